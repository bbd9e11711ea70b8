package targets

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Driver names.
const (
	DriverRef    = "ref"
	DriverTinode = "tinode"
)

// Config opens a driver (targets/drivers.Open).
type Config struct {
	// Target is the server's address as a URL; its scheme names the
	// driver: ref+http://host:port or http://host:port (the reference
	// server), tinode+ws://host:port (Tinode).
	Target string
	// Driver, when set, names the driver whatever the scheme (it must
	// agree with a driver-qualified scheme).
	Driver string
	// Secret signs the lab's tokens (the reference server's IMLAB_SECRET).
	Secret string
	// Conns bounds the connection pool of everything but sends on their
	// own pool.
	Conns int
	// Timeout bounds one exchange with the target.
	Timeout time.Duration
	// SendPool, when Own, gives sends a pool of their own.
	SendPool SendPool
	// Options are driver-specific settings (key=value), each documented by
	// its driver; an unknown key is an error.
	Options map[string]string
}

// SendPool is the connection pool of sends when they have their own.
type SendPool struct {
	Own   bool
	Conns int
	// Pipeline, PipelineDelay: HTTP/1.1 pipelining of the reference
	// driver (targets/ref/client.Config); 0 sends one request at a time
	// per connection.
	Pipeline      int
	PipelineDelay time.Duration
}

// Validate checks the driver-independent settings.
func (c Config) Validate() error {
	if _, _, err := c.Endpoint(); err != nil {
		return err
	}
	switch {
	case c.Conns < 1 || c.Conns > 100_000:
		return fmt.Errorf("%w: conns %d must be in 1..100000", ErrInvalid, c.Conns)
	case c.Timeout <= 0:
		return fmt.Errorf("%w: timeout must be > 0", ErrInvalid)
	case c.SendPool.Own && (c.SendPool.Conns < 1 || c.SendPool.Conns > 100_000):
		return fmt.Errorf("%w: send pool conns %d must be in 1..100000", ErrInvalid, c.SendPool.Conns)
	}
	return nil
}

// Endpoint resolves the driver's name and the target's plain URL (the
// driver prefix removed from the scheme): ref+http://h:p → ("ref",
// "http://h:p"); http://h:p → ("ref", "http://h:p"); tinode+ws://h:p →
// ("tinode", "ws://h:p"). Config.Driver overrides a plain scheme's
// default and must agree with a qualified one.
func (c Config) Endpoint() (driver, target string, err error) {
	u, perr := url.Parse(c.Target)
	if perr != nil || u.Scheme == "" || u.Host == "" {
		return "", "", fmt.Errorf("%w: target %q must be a URL such as ref+http://host:port, http://host:port or tinode+ws://host:port", ErrInvalid, c.Target)
	}
	name, scheme, qualified := strings.Cut(u.Scheme, "+")
	if !qualified {
		scheme, name = name, ""
		switch scheme {
		case "http":
			name = DriverRef
		case "ws", "wss":
			name = c.Driver
		}
	}
	if c.Driver != "" {
		if qualified && c.Driver != name {
			return "", "", fmt.Errorf("%w: driver %q disagrees with target %q", ErrInvalid, c.Driver, c.Target)
		}
		name = c.Driver
	}
	if name == "" {
		return "", "", fmt.Errorf("%w: target %q names no driver: use ref+http:// or tinode+ws://, or set the driver", ErrInvalid, c.Target)
	}
	u.Scheme = scheme
	return name, u.String(), nil
}
