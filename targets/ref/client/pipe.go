package client

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// The pipelined transport (Config.Pipeline > 0). A request is rendered
// straight into its connection's write buffer (no request object, no copy
// of one), a writer goroutine per connection writes what accumulated in one
// system call (a batch), and a reader goroutine per connection reads the
// answers in order and hands each to the request it belongs to. There is
// no timer per request: a batch's answers must all arrive within the
// timeout of the moment the batch was written (one read deadline per
// batch), a write within the timeout of its start (one write deadline per
// batch), and a connection that misses either, or fails, or is closed by
// the server, is dropped: every request on it that has no answer yet ends
// with a transport error (an *Error of Status 0, an unknown outcome), never
// a definite one, whether or not its bytes had left the buffer.

// Errors of the pipelined transport.
var (
	errPipeFull   = errors.New("every pipelined connection is full (max_conns x pipeline requests in flight) past the timeout")
	errPipeClosed = errors.New("the pipelined connection was closed by the client")
	errPipeIdle   = errors.New("the pipelined connection was closed after being idle")
)

const (
	// pipeIdleClose: a connection without a request for this long is
	// closed (below the usual servers' idle timeouts, so that the client,
	// not the server, ends it between two runs' sends).
	pipeIdleClose = 30 * time.Second
	// pipeFullWait: how long a request waits before looking again for a
	// connection with room when every one is full.
	pipeFullWait = 50 * time.Microsecond
	// pipeReadBuffer and pipeWriteBuffer size a connection's buffers.
	pipeReadBuffer  = 32 << 10
	pipeWriteBuffer = 32 << 10
)

// pipePool is the pipelined transport of one Client.
type pipePool struct {
	addr    string
	host    string
	depth   int32
	delay   time.Duration
	timeout time.Duration
	slots   []pipeSlot
	next    atomic.Uint32
	calls   sync.Pool // *pipeCall
}

// pipeSlot holds one connection at a time, dialled when first needed and
// again after it was dropped.
type pipeSlot struct {
	mu sync.Mutex // held while dialling
	pc atomic.Pointer[pipeConn]
}

// pipeCall is one request's wait for its answer.
type pipeCall struct {
	resp fasthttp.Response
	err  error
	done chan struct{} // one signal per request
}

func newPipePool(host string, cfg Config) *pipePool {
	p := &pipePool{addr: host, host: host, depth: int32(cfg.Pipeline), delay: cfg.PipelineDelay, timeout: cfg.Timeout,
		slots: make([]pipeSlot, cfg.MaxConns)}
	p.calls.New = func() any { return &pipeCall{done: make(chan struct{}, 1)} }
	return p
}

// roundTrip sends one request and waits for its answer; the caller reads
// call.resp and gives call back with release. A non-nil error is an *Error
// of Status 0.
func (p *pipePool) roundTrip(method, path, token string, body []byte) (*pipeCall, error) {
	call := p.calls.Get().(*pipeCall)
	var deadline time.Time
	first := int(p.next.Add(1))
	for i := 0; ; i++ {
		s := &p.slots[(first+i)%len(p.slots)]
		pc, err := s.conn(p)
		if err != nil {
			p.calls.Put(call)
			return nil, &Error{Err: err}
		}
		queued, dead := pc.enqueue(call, method, path, token, body)
		if queued {
			break
		}
		if dead {
			i-- // the same slot again: it dials a new connection
			continue
		}
		if (i+1)%len(p.slots) != 0 {
			continue
		}
		// Every connection is full: wait for room, up to the timeout.
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(p.timeout)
		} else if now.After(deadline) {
			p.calls.Put(call)
			return nil, &Error{Err: errPipeFull}
		}
		time.Sleep(pipeFullWait)
	}
	<-call.done
	if call.err != nil {
		err := call.err
		p.release(call)
		return nil, &Error{Err: err}
	}
	return call, nil
}

// release gives a finished call back to the pool.
func (p *pipePool) release(call *pipeCall) {
	call.resp.Reset()
	call.err = nil
	p.calls.Put(call)
}

// close drops every connection; requests still without an answer end with
// a transport error.
func (p *pipePool) close() {
	for i := range p.slots {
		if pc := p.slots[i].pc.Load(); pc != nil {
			pc.kill(errPipeClosed)
		}
	}
}

// conn returns the slot's live connection, dialling one if there is none.
func (s *pipeSlot) conn(p *pipePool) (*pipeConn, error) {
	if pc := s.pc.Load(); pc != nil && !pc.dead.Load() {
		return pc, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if pc := s.pc.Load(); pc != nil && !pc.dead.Load() {
		return pc, nil
	}
	nc, err := net.DialTimeout("tcp", p.addr, p.timeout)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", p.addr, err)
	}
	pc := &pipeConn{p: p, nc: nc, wake: make(chan struct{}, 1), closed: make(chan struct{}),
		batches: make(chan pipeBatch, p.depth), free: make(chan []*pipeCall, 4)}
	s.pc.Store(pc)
	go pc.writer()
	go pc.reader()
	return pc, nil
}

// pipeConn is one connection: the requests rendered and not yet written
// (buf, calls), and the written ones in order on their way to the reader
// (batches).
type pipeConn struct {
	p  *pipePool
	nc net.Conn

	mu    sync.Mutex
	buf   []byte      // rendered requests not yet written
	calls []*pipeCall // their calls, in order
	dying bool        // under mu; dead mirrors it for lock-free readers

	dead    atomic.Bool
	pending atomic.Int32 // requests enqueued and not yet answered or failed

	wake    chan struct{} // the writer's signal: calls went from none to some
	closed  chan struct{} // closed when the connection is dropped
	batches chan pipeBatch
	free    chan []*pipeCall // the reader gives finished batches' slices back
}

// pipeBatch is what one write carried.
type pipeBatch struct {
	calls   []*pipeCall
	written time.Time
}

// enqueue renders the request into the connection's buffer. queued is
// false when the connection has no room (pipeline requests without an
// answer) or was dropped (dead).
func (pc *pipeConn) enqueue(call *pipeCall, method, path, token string, body []byte) (queued, dead bool) {
	pc.mu.Lock()
	if pc.dying {
		pc.mu.Unlock()
		return false, true
	}
	if pc.pending.Load() >= pc.p.depth {
		pc.mu.Unlock()
		return false, false
	}
	pc.pending.Add(1)
	pc.buf = appendRequest(pc.buf, method, path, pc.p.host, token, body)
	pc.calls = append(pc.calls, call)
	first := len(pc.calls) == 1
	pc.mu.Unlock()
	if first {
		select {
		case pc.wake <- struct{}{}:
		default:
		}
	}
	return true, false
}

// appendRequest renders an HTTP/1.1 request: the headers the contract
// needs (Host, the bearer token, the JSON body's type and length).
func appendRequest(b []byte, method, path, host, token string, body []byte) []byte {
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	if token != "" {
		b = append(b, "\r\nAuthorization: Bearer "...)
		b = append(b, token...)
	}
	if body != nil {
		b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
	} else if method == fasthttp.MethodPost {
		b = append(b, "\r\nContent-Length: 0"...)
	}
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}

// writer writes what accumulated, one system call per batch, until the
// connection is dropped or idle for pipeIdleClose.
func (pc *pipeConn) writer() {
	defer close(pc.batches)
	idle := time.NewTimer(pipeIdleClose)
	defer idle.Stop()
	spare := make([]byte, 0, pipeWriteBuffer)
	for {
		select {
		case <-pc.wake:
		case <-pc.closed:
			return
		case <-idle.C:
			if pc.closeIdle() {
				return
			}
			idle.Reset(pipeIdleClose)
			continue
		}
		if pc.p.delay > 0 {
			time.Sleep(pc.p.delay) // let more requests join this batch
		}
		var spareCalls []*pipeCall
		select {
		case spareCalls = <-pc.free:
		default:
		}
		pc.mu.Lock()
		if pc.dying {
			pc.mu.Unlock()
			return
		}
		buf, calls := pc.buf, pc.calls
		pc.buf, pc.calls = spare[:0], spareCalls
		pc.mu.Unlock()
		if len(calls) == 0 {
			spare = buf
			continue
		}
		now := time.Now()
		err := pc.nc.SetWriteDeadline(now.Add(pc.p.timeout))
		if err == nil {
			_, err = pc.nc.Write(buf)
		}
		if err != nil {
			err = fmt.Errorf("write: %w", err)
			pc.kill(err)
			for _, c := range calls {
				pc.finish(c, err)
			}
			return
		}
		pc.batches <- pipeBatch{calls: calls, written: now} // never blocks: at most depth requests are pending
		spare = buf
		if !idle.Stop() {
			select {
			case <-idle.C:
			default:
			}
		}
		idle.Reset(pipeIdleClose)
	}
}

// closeIdle drops the connection if it carries nothing.
func (pc *pipeConn) closeIdle() bool {
	pc.mu.Lock()
	if pc.dying || pc.pending.Load() > 0 {
		pc.mu.Unlock()
		return pc.dying
	}
	pc.mu.Unlock()
	pc.kill(errPipeIdle)
	return true
}

// reader reads the answers of each batch in order. After an error every
// later request on the connection fails with it.
func (pc *pipeConn) reader() {
	br := bufio.NewReaderSize(pc.nc, pipeReadBuffer)
	var err error
	for b := range pc.batches {
		if err == nil {
			if e := pc.nc.SetReadDeadline(b.written.Add(pc.p.timeout)); e != nil {
				err = fmt.Errorf("read deadline: %w", e)
			}
		}
		for _, c := range b.calls {
			if err == nil {
				if e := c.resp.Read(br); e != nil {
					err = fmt.Errorf("read: %w", e)
				}
			}
			if err != nil {
				pc.finish(c, err)
				continue
			}
			closing := c.resp.ConnectionClose()
			pc.finish(c, nil)
			if closing {
				err = errors.New("the server closed the connection (Connection: close) with requests in flight on it")
			}
		}
		if err != nil {
			pc.kill(err)
		}
		clear(b.calls)
		select {
		case pc.free <- b.calls[:0]:
		default:
		}
	}
}

// finish hands a call its end.
func (pc *pipeConn) finish(c *pipeCall, err error) {
	c.err = err
	pc.pending.Add(-1)
	c.done <- struct{}{}
}

// kill drops the connection (once): the requests not yet written fail with
// err, the writer stops, and the reader fails the written ones still
// without an answer.
func (pc *pipeConn) kill(err error) {
	pc.mu.Lock()
	if pc.dying {
		pc.mu.Unlock()
		return
	}
	pc.dying = true
	pc.dead.Store(true)
	calls := pc.calls
	pc.buf, pc.calls = nil, nil
	pc.mu.Unlock()
	close(pc.closed)
	_ = pc.nc.Close()
	werr := fmt.Errorf("connection dropped before the request was written: %w", err)
	for _, c := range calls {
		pc.finish(c, werr)
	}
}
