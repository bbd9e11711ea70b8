package chaos

import (
	"fmt"
	"net"
	"sync/atomic"
)

// Advertiser makes a server that names its own listener's address to its
// clients (a Kafka broker does, in metadata) name the proxy in front of it
// instead: a client that bootstraps through the proxy then keeps going
// through it, so the proxy's toxics reach every connection. kfake, for one,
// advertises whatever its listener's Addr reports.
//
// It is safe for concurrent use; the zero value advertises nothing (Addr
// of a wrapped listener is the listener's own until Set).
type Advertiser struct {
	adv atomic.Pointer[net.TCPAddr]
}

// Wrap returns l whose Addr reports the advertised address once Set.
func (a *Advertiser) Wrap(l net.Listener) net.Listener {
	return advertisedListener{Listener: l, a: a}
}

// Set advertises addr (a loopback host:port, normally a proxy's Addr).
func (a *Advertiser) Set(addr string) error {
	if err := checkLoopbackAddr(addr); err != nil {
		return fmt.Errorf("chaos: advertise: %w", err)
	}
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return fmt.Errorf("%w: advertise %q: %v", ErrInvalid, addr, err)
	}
	a.adv.Store(ta)
	return nil
}

// Addr is the advertised address, or nil before Set.
func (a *Advertiser) Addr() *net.TCPAddr { return a.adv.Load() }

type advertisedListener struct {
	net.Listener
	a *Advertiser
}

func (l advertisedListener) Addr() net.Addr {
	if ta := l.a.Addr(); ta != nil {
		return ta
	}
	return l.Listener.Addr()
}
