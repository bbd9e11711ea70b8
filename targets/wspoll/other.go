//go:build !linux

package wspoll

import (
	"context"
	"net/http"
	"time"
)

// Supported says whether this system has the poller (Linux only).
const Supported = false

// Poller is not available here: New fails.
type Poller struct{}

// New fails: the poller needs Linux's epoll.
func New() (*Poller, error) { return nil, ErrUnsupported }

// Run returns at once.
func (p *Poller) Run(ctx context.Context) error { return ErrUnsupported }

// Conn is not available here.
type Conn struct{}

// Dial fails: the poller needs Linux's epoll.
func (p *Poller) Dial(ctx context.Context, u string, h http.Header, timeout time.Duration, hd Handler) (*Conn, error) {
	return nil, ErrUnsupported
}

// WriteText fails.
func (c *Conn) WriteText(b []byte) error { return ErrUnsupported }

// Close does nothing.
func (c *Conn) Close() error { return nil }
