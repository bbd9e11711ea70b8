package chaos

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// checkLoopbackHost reports whether host (an IP literal or "localhost") is
// on this machine. Other host names are refused rather than resolved: a
// name could resolve anywhere.
func checkLoopbackHost(host string) error {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return nil
	}
	if i := strings.IndexByte(h, '%'); i >= 0 { // zone of a link-local literal
		h = h[:i]
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return fmt.Errorf("%w: host %q is not an IP literal or localhost", ErrNotLoopback, host)
	}
	if !ip.IsLoopback() {
		return fmt.Errorf("%w: %s", ErrNotLoopback, host)
	}
	return nil
}

// checkLoopbackAddr checks a "host:port" address: loopback host, numeric
// port in 1..65535.
func checkLoopbackAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: address %q: %v", ErrInvalid, addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%w: address %q: port must be 1..65535", ErrInvalid, addr)
	}
	return checkLoopbackHost(host)
}
