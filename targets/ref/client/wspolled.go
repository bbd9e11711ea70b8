package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/valyala/fastjson"

	"imlab/targets/wspoll"
)

// PolledWS is a device's /v1/ws whose frames a wspoll.Poller reads: each
// is parsed on the poller's goroutine and handed to on, in order; end is
// told once, last, why the connection ended. Ack may be called from any
// goroutine.
type PolledWS struct {
	c   *wspoll.Conn
	fp  fastjson.Parser // the poller's
	on  func(f *Frame)
	end func(error)
}

// DialPolled opens /v1/ws with token on p. on must not block (the poller
// reads every other connection meanwhile).
func (c *Client) DialPolled(ctx context.Context, token string, p *wspoll.Poller, on func(f *Frame), end func(error)) (*PolledWS, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	w := &PolledWS{on: on, end: end}
	conn, err := p.Dial(ctx, "ws://"+c.host+"/v1/ws", h, c.cfg.Timeout, w)
	if err != nil {
		st := 0
		if he := (*wspoll.HandshakeError)(nil); errors.As(err, &he) {
			st = he.Status
		}
		return nil, &Error{Status: st, Err: fmt.Errorf("ws dial: %w", err)}
	}
	w.c = conn
	return w, nil
}

// Message parses one frame and hands it on (wspoll.Handler).
func (w *PolledWS) Message(b []byte) error {
	var f Frame
	if err := parseFrame(&w.fp, b, &f); err != nil {
		return fmt.Errorf("client: ws frame: %w", err)
	}
	w.on(&f)
	return nil
}

// Ended is the connection's end (wspoll.Handler).
func (w *PolledWS) Ended(err error) { w.end(err) }

// Ack sends {"type":"ack","pull_seq":seq}.
func (w *PolledWS) Ack(seq uint64) error {
	if w.c == nil {
		return errors.New("client: ack before the connection was opened")
	}
	var a [48]byte
	b := strconv.AppendUint(append(a[:0], `{"type":"ack","pull_seq":`...), seq, 10)
	return w.c.WriteText(append(b, '}'))
}

// Close ends the connection (end follows, on the poller's goroutine).
func (w *PolledWS) Close() error { return w.c.Close() }
