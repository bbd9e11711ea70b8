//go:build linux

package wspoll

import (
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Supported says whether this system has the poller (Linux only).
const Supported = true

// MessageLimit bounds one message (a longer one is a protocol error).
const MessageLimit = 1 << 20

// readSize is the room a read has at least.
const readSize = 8 << 10

// Poller is one epoll for many connections. Dial adds a connection; Run
// reads them all until its context ends, then closes every connection
// still open (each Handler's Ended says ErrStopped).
type Poller struct {
	ep   *os.File // the epoll descriptor: Run waits for it in the runtime's own poller
	epfd int

	mu      sync.Mutex
	conns   map[int32]*Conn
	stopped bool
}

// New makes a poller; Run must then run it.
func New() (*Poller, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("wspoll: epoll_create: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("wspoll: epoll non-blocking: %w", err)
	}
	return &Poller{ep: os.NewFile(uintptr(fd), "epoll"), epfd: fd, conns: map[int32]*Conn{}}, nil
}

// Run reads every connection's ready socket until ctx ends; it is the
// poller's one goroutine (call it once). When it returns every connection
// has ended and the poller takes no more.
func (p *Poller) Run(ctx context.Context) error {
	defer p.shut()
	stop := context.AfterFunc(ctx, func() { p.ep.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	rc, err := p.ep.SyscallConn()
	if err != nil {
		return fmt.Errorf("wspoll: %w", err)
	}
	events := make([]unix.EpollEvent, 256)
	var werr error
	err = rc.Read(func(fd uintptr) bool {
		for ctx.Err() == nil {
			n, err := unix.EpollWait(int(fd), events, 0)
			switch {
			case err == unix.EINTR:
				continue
			case err != nil:
				werr = err
				return true
			case n == 0:
				return false // wait in the runtime's poller for the next event
			}
			more := n == len(events)
			for i := range events[:n] {
				more = p.ready(events[i].Fd) || more
			}
			if !more {
				// Every ready socket was read short of the buffer's room, so
				// each was empty when read: new bytes on any of them are a new
				// event, which wakes the runtime's poller waiting for the epoll
				// descriptor. No epoll_wait that would find nothing.
				return false
			}
		}
		return true
	})
	switch {
	case ctx.Err() != nil:
		return nil
	case werr != nil:
		return fmt.Errorf("wspoll: epoll_wait: %w", werr)
	case err != nil:
		return fmt.Errorf("wspoll: %w", err)
	}
	return nil
}

// ready reads the connection of fd once; true when the read filled the
// room it had (the socket may hold more).
func (p *Poller) ready(fd int32) bool {
	p.mu.Lock()
	c := p.conns[fd]
	p.mu.Unlock()
	return c != nil && c.readable()
}

// shut ends every connection and closes the epoll descriptor.
func (p *Poller) shut() {
	p.mu.Lock()
	p.stopped = true
	cs := make([]*Conn, 0, len(p.conns))
	for _, c := range p.conns {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.end(ErrStopped)
	}
	p.ep.Close()
}

// Conn is one client WebSocket read by a Poller. WriteText and Close may
// be called from any goroutine.
type Conn struct {
	p   *Poller
	h   Handler
	wto time.Duration
	r   reader // the poller's (Dial's until the connection is added)

	closing atomic.Bool
	wmu     sync.Mutex
	fd      int // -1 once ended; closed only by end, under wmu
	wbuf    []byte
}

// Dial opens the WebSocket at u (ws://host/path) with the request header
// h, timeout bounding the dial, the upgrade and each write, and adds it to
// the poller: h's Message is called with every message it receives.
func (p *Poller) Dial(ctx context.Context, u string, h http.Header, timeout time.Duration, hd Handler) (*Conn, error) {
	tc, rest, err := handshake(ctx, u, h, timeout)
	if err != nil {
		return nil, err
	}
	fd, err := takeFD(tc)
	if err != nil {
		return nil, &HandshakeError{Err: err}
	}
	c := &Conn{p: p, h: hd, wto: timeout, fd: fd, r: reader{buf: make([]byte, 0, max(readSize, 2*len(rest))), limit: MessageLimit}}
	c.r.buf = append(c.r.buf, rest...)
	if err := c.consume(); err != nil { // frames that came with the answer
		c.end(err)
		return c, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		c.closeFD()
		return nil, ErrStopped
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(fd)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		c.closeFD()
		return nil, fmt.Errorf("wspoll: epoll_ctl: %w", err)
	}
	p.conns[int32(fd)] = c
	return c, nil
}

// takeFD duplicates tc's descriptor (non-blocking, as the runtime left
// it) and closes tc, which takes the original out of the runtime's poller.
func takeFD(tc *net.TCPConn) (int, error) {
	defer tc.Close()
	rc, err := tc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	return fd, derr
}

// readable reads what the socket holds (once) and hands out the whole
// messages; true when the read filled its room (more may wait).
func (c *Conn) readable() bool {
	r := &c.r
	if cap(r.buf)-len(r.buf) < readSize/2 {
		nb := make([]byte, len(r.buf), max(readSize, 2*cap(r.buf)))
		copy(nb, r.buf)
		r.buf = nb
	}
	room := cap(r.buf) - len(r.buf)
	n, err := unix.Read(c.fd, r.buf[len(r.buf):cap(r.buf)])
	switch {
	case err == unix.EAGAIN:
		return false
	case err == unix.EINTR:
		return true
	case err != nil:
		c.end(fmt.Errorf("wspoll: read: %w", err))
		return false
	case n == 0:
		c.end(io.EOF)
		return false
	}
	r.buf = r.buf[:len(r.buf)+n]
	if err := c.consume(); err != nil {
		c.end(err)
		return false
	}
	return n == room
}

// consume hands out every whole message in the read buffer and answers
// control frames; an error ends the connection.
func (c *Conn) consume() error {
	off := 0
	defer func() { c.r.compact(off) }()
	for {
		if c.closing.Load() {
			return ErrClosed
		}
		ev, ok, err := c.r.next(&off)
		if err != nil || !ok {
			return err
		}
		switch ev.op {
		case opText, opBinary:
			if err := c.h.Message(ev.payload); err != nil {
				return err
			}
		case opPing:
			c.write(opPong, ev.payload) // a failed write shows as the read's end
		case opClose:
			ce := closeFrame(ev.payload)
			c.write(opClose, ev.payload[:min(2, len(ev.payload))])
			return ce
		}
	}
}

// end takes the connection out of the poller, closes it and tells the
// handler (the poller's goroutine, or Dial's before it was added).
func (c *Conn) end(err error) {
	c.p.mu.Lock()
	if c.p.conns[int32(c.fd)] == c {
		delete(c.p.conns, int32(c.fd))
		unix.EpollCtl(c.p.epfd, unix.EPOLL_CTL_DEL, c.fd, nil)
	}
	c.p.mu.Unlock()
	if c.closing.Load() && !errors.Is(err, ErrStopped) {
		err = ErrClosed
	}
	c.closeFD()
	c.h.Ended(err)
}

func (c *Conn) closeFD() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// WriteText writes b as one masked text frame.
func (c *Conn) WriteText(b []byte) error { return c.write(opText, b) }

func (c *Conn) write(op byte, b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.fd < 0 || (c.closing.Load() && op != opClose) {
		return ErrClosed
	}
	c.wbuf = appendFrame(c.wbuf[:0], op, b, mrand.Uint32())
	return writeAll(c.fd, c.wbuf, c.wto)
}

// writeAll writes b to the non-blocking fd, waiting at most wto (0: no
// bound) for room each time the socket is full.
func writeAll(fd int, b []byte, wto time.Duration) error {
	ms := -1
	if wto > 0 {
		ms = int(max(wto/time.Millisecond, 1))
	}
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			pf := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			k, err := unix.Poll(pf, ms)
			if err != nil && err != unix.EINTR {
				return fmt.Errorf("wspoll: poll: %w", err)
			}
			if k == 0 && err == nil {
				return fmt.Errorf("wspoll: write: no room within %s", wto)
			}
			continue
		case err != nil:
			return fmt.Errorf("wspoll: write: %w", err)
		}
		b = b[n:]
	}
	return nil
}

// Close ends the connection: no message is handed out after it returns
// but the one in progress, and Ended follows (ErrClosed) on the poller's
// goroutine.
func (c *Conn) Close() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.fd < 0 || c.closing.Swap(true) {
		return nil
	}
	if err := unix.Shutdown(c.fd, unix.SHUT_RDWR); err != nil && err != unix.ENOTCONN {
		return fmt.Errorf("wspoll: shutdown: %w", err)
	}
	return nil
}
