package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
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
	Error  *struct{ Code, Message string } `json:"error,omitempty"`
	Reason string                          `json:"reason,omitempty"`
}

// WS is one device's WebSocket. One goroutine may Read while others write.
type WS struct {
	conn *websocket.Conn
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

// Read returns the next frame. A deadline of zero waits forever.
func (w *WS) Read(deadline time.Time) (Frame, error) {
	var f Frame
	w.conn.SetReadDeadline(deadline)
	_, b, err := w.conn.ReadMessage()
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("client: ws frame: %w", err)
	}
	return f, nil
}

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
