package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fastjson"
)

// Frame is any /v1/ws frame, in either direction.
type Frame struct {
	Type    string `json:"type"` // msg, ack, send, send_ack, error, close
	PrevSeq uint64 `json:"prev_seq,omitempty"`
	PullSeq uint64 `json:"pull_seq,omitempty"`
	Msg
	// send_ack / send
	ClientMsgID string `json:"client_msg_id,omitempty"`
	ServerTime  int64  `json:"server_time,omitempty"`
	// error / close
	Error  *FrameError `json:"error,omitempty"`
	Reason string      `json:"reason,omitempty"`
}

// FrameError is the error member of an error frame.
type FrameError struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
}

// codeStatus maps an error frame's code to the HTTP status the same error
// has on the HTTP routes, so that callers classify both alike. An unknown
// code maps to 500 (outcome unknown).
var codeStatus = map[string]int{
	"invalid_argument": 400, "invalid": 400, "unauthenticated": 401, "unauthorized": 401,
	"permission_denied": 403, "forbidden": 403, "not_found": 404, "method_not_allowed": 405,
	"conflict": 409, "cursor_beyond_served": 409, "too_large": 413, "rate_limited": 429,
	"internal": 500, "not_implemented": 501, "unavailable": 503,
}

// AsError turns an error frame into an *Error like the HTTP answer of the
// same failure.
func (fe *FrameError) AsError() *Error {
	st, ok := codeStatus[fe.Code]
	if !ok {
		st = 500
	}
	e := &Error{Status: st, Code: fe.Code, Message: fe.Message}
	if fe.RetryAfterMS > 0 {
		e.RetryAfter = min(time.Duration(fe.RetryAfterMS)*time.Millisecond, maxRetryAfter)
	}
	return e
}

// WS is one device's WebSocket. One goroutine may Read while others write.
type WS struct {
	conn *websocket.Conn
	fp   fastjson.Parser // Read's
	rbuf bytes.Buffer    // Read's: the frame being parsed, reused
	rdl  time.Time       // Read's: the read deadline last set
	wmu  sync.Mutex
	wbuf []byte
	wto  time.Duration
}

// DialWS opens /v1/ws with token.
func (c *Client) DialWS(ctx context.Context, token string) (*WS, error) {
	d := websocket.Dialer{HandshakeTimeout: c.cfg.Timeout, ReadBufferSize: 16 << 10, WriteBufferSize: 4 << 10}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	conn, resp, err := d.DialContext(ctx, "ws://"+c.host+"/v1/ws", h)
	if err != nil {
		st := 0
		if resp != nil {
			st = resp.StatusCode
		}
		return nil, &Error{Status: st, Err: fmt.Errorf("ws dial: %w", err)}
	}
	conn.SetReadLimit(1 << 20)
	return &WS{conn: conn, wto: c.cfg.Timeout}, nil
}

// Read returns the next frame. A deadline of zero waits forever. One
// goroutine reads. The frame is read into a buffer the WS reuses (the
// parsed Frame keeps nothing of it).
func (w *WS) Read(deadline time.Time) (Frame, error) {
	var f Frame
	if !deadline.Equal(w.rdl) {
		if err := w.conn.SetReadDeadline(deadline); err != nil {
			return f, err
		}
		w.rdl = deadline
	}
	_, r, err := w.conn.NextReader()
	if err != nil {
		return f, err
	}
	w.rbuf.Reset()
	if _, err := w.rbuf.ReadFrom(r); err != nil {
		return f, err
	}
	if err := parseFrame(&w.fp, w.rbuf.Bytes(), &f); err != nil {
		return Frame{}, fmt.Errorf("client: ws frame: %w", err)
	}
	if w.rbuf.Cap() > maxKeptFrame {
		w.rbuf = bytes.Buffer{} // a rare large frame: not kept for the connection's life
	}
	return f, nil
}

// maxKeptFrame bounds the read buffer a WS keeps between frames.
const maxKeptFrame = 64 << 10

func (w *WS) write(b []byte) error {
	w.conn.SetWriteDeadline(time.Now().Add(w.wto))
	return w.conn.WriteMessage(websocket.TextMessage, b)
}

// Ack sends {"type":"ack","pull_seq":seq}.
func (w *WS) Ack(seq uint64) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.wbuf = strconv.AppendUint(append(w.wbuf[:0], `{"type":"ack","pull_seq":`...), seq, 10)
	return w.write(append(w.wbuf, '}'))
}

// Send writes a send frame; the answer arrives as a send_ack or error frame.
func (w *WS) Send(r *SendReq) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	b := r.appendJSON(append(w.wbuf[:0], `{"type":"send",`...))
	// appendJSON opened its own object: splice it into the frame.
	b = append(b[:len(`{"type":"send",`)], b[len(`{"type":"send",`)+1:]...)
	w.wbuf = b
	return w.write(b)
}

// Close closes the connection.
func (w *WS) Close() error { return w.conn.Close() }

// MaxPendingSends bounds the sends awaiting their answer on one Sender.
const MaxPendingSends = 4096

// Sender multiplexes sends over one WebSocket: many goroutines may Send at
// once; the answers (send_ack or error frames echoing client_msg_id) are
// matched by client_msg_id. Its reader goroutine reads every frame (push
// frames are dropped: a sender is not a receiving device) and ends when the
// connection does; Close ends it.
type Sender struct {
	ws      *WS
	mu      sync.Mutex
	pending map[string]chan Frame
	err     error // set once the reader ended
	done    chan struct{}
}

// DialSender opens /v1/ws with token for sending.
func (c *Client) DialSender(ctx context.Context, token string) (*Sender, error) {
	ws, err := c.DialWS(ctx, token)
	if err != nil {
		return nil, err
	}
	s := &Sender{ws: ws, pending: map[string]chan Frame{}, done: make(chan struct{})}
	go s.read()
	return s, nil
}

func (s *Sender) read() {
	var err error
	for {
		var f Frame
		f, err = s.ws.Read(time.Time{})
		if err != nil {
			break
		}
		if (f.Type != "send_ack" && f.Type != "error") || f.ClientMsgID == "" {
			continue
		}
		s.mu.Lock()
		ch := s.pending[f.ClientMsgID]
		delete(s.pending, f.ClientMsgID)
		s.mu.Unlock()
		if ch != nil {
			ch <- f // buffered, one answer per registration
		}
	}
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	close(s.done)
}

// Done is closed when the connection has ended; a Sender is then useless.
func (s *Sender) Done() <-chan struct{} { return s.done }

// Send writes a send frame and waits up to timeout for its answer. A
// non-nil error is an *Error: Status 0 when the outcome is unknown
// (timeout, connection lost), otherwise the status the same error has over
// HTTP. One client_msg_id may be pending only once per Sender.
func (s *Sender) Send(r *SendReq, timeout time.Duration) (SendAck, error) {
	ch := make(chan Frame, 1)
	s.mu.Lock()
	switch {
	case s.err != nil || isClosed(s.done):
		s.mu.Unlock()
		return SendAck{}, &Error{Err: fmt.Errorf("ws sender: connection ended: %v", s.err)}
	case len(s.pending) >= MaxPendingSends:
		s.mu.Unlock()
		return SendAck{}, &Error{Status: 429, Code: "client_pending_limit", Message: "too many sends pending on one connection", RetryAfter: 10 * time.Millisecond}
	case s.pending[r.ClientMsgID] != nil:
		s.mu.Unlock()
		return SendAck{}, fmt.Errorf("%w: client_msg_id %q already pending", ErrInvalid, r.ClientMsgID)
	}
	s.pending[r.ClientMsgID] = ch
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		if s.pending[r.ClientMsgID] == ch {
			delete(s.pending, r.ClientMsgID)
		}
		s.mu.Unlock()
	}
	if err := s.ws.Send(r); err != nil {
		forget()
		return SendAck{}, &Error{Err: fmt.Errorf("ws send: %w", err)}
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case f := <-ch:
		if f.Type == "error" {
			if f.Error == nil {
				return SendAck{}, &Error{Status: 500, Code: "bad_frame", Message: "error frame without error"}
			}
			return SendAck{}, f.Error.AsError()
		}
		return SendAck{MsgID: f.MsgID, ConvID: f.ConvID, ConvSeq: f.ConvSeq, ServerTime: f.ServerTime}, nil
	case <-s.done:
		forget()
		// The answer may have been handed over just before the end.
		select {
		case f := <-ch:
			if f.Type == "send_ack" {
				return SendAck{MsgID: f.MsgID, ConvID: f.ConvID, ConvSeq: f.ConvSeq, ServerTime: f.ServerTime}, nil
			}
		default:
		}
		return SendAck{}, &Error{Err: errors.New("ws sender: connection ended before the answer")}
	case <-t.C:
		forget()
		return SendAck{}, &Error{Err: fmt.Errorf("ws sender: no answer within %s", timeout)}
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Close closes the connection and waits for the reader.
func (s *Sender) Close() error {
	err := s.ws.Close()
	<-s.done
	return err
}
