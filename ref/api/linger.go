package api

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of the lingering close after an early answer (see lingerConn).
const (
	// LingerTimeout bounds how long a connection answered early reads and
	// drops what its client still sends before it is closed.
	LingerTimeout = time.Second
	// LingerBytes bounds how much it reads and drops.
	LingerBytes = 1 << 20
)

// lingerListener hands out lingerConns.
type lingerListener struct{ net.Listener }

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &lingerConn{Conn: c}, nil
}

// lingerConn closes like other HTTP servers do after answering a request
// it did not read whole (a request line past the read buffer: 414, headers
// past it: 431, a body past MaxReadBodyBytes: 413): closing a socket with
// the client's bytes still unread makes the kernel reset the connection,
// and a client that is still writing its request then fails on its next
// write and never reads the answer already sent to it. So such a
// connection (marked by lingerOnClose) first closes its sending side (the
// answer is followed by the end of the stream), then reads and drops what
// the client still sends until the client closes, LingerTimeout passes or
// LingerBytes were read, and only then closes. The goroutine that closes
// the connection (fasthttp's worker serving it) does this, so it is
// bounded by the server's Concurrency.
type lingerConn struct {
	net.Conn
	linger atomic.Bool
	once   sync.Once
	err    error
}

// lingerOnClose marks the connection as answered early.
func (c *lingerConn) lingerOnClose() { c.linger.Store(true) }

func (c *lingerConn) Close() error {
	c.once.Do(func() {
		if c.linger.Load() {
			c.drain()
		}
		c.err = c.Conn.Close()
	})
	return c.err
}

// drain half-closes the connection and reads what the client still sends,
// within the bounds.
func (c *lingerConn) drain() {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	if c.Conn.SetReadDeadline(time.Now().Add(LingerTimeout)) != nil {
		return
	}
	// EOF (the client closed), the deadline, a reset or the byte bound:
	// the connection is done either way.
	_, _ = io.Copy(io.Discard, io.LimitReader(c.Conn, LingerBytes))
}

// markLinger marks the connection under c (a fasthttp request's) as
// answered early; a connection of another kind is left as it is.
func markLinger(c net.Conn) {
	if lc, ok := c.(*lingerConn); ok {
		lc.lingerOnClose()
	}
}
