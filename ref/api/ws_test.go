package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"imlab/ref/model"
)

func (h *harness) dial(token string) (*websocket.Conn, *http.Response, error) {
	hdr := http.Header{}
	if token != "" {
		hdr.Set("Authorization", "Bearer "+token)
	}
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	return d.Dial("ws"+strings.TrimPrefix(h.url, "http")+"/v1/ws", hdr)
}

// connect opens a WebSocket with a token of uid/did, failing t if the
// upgrade is refused; it is closed when the test ends.
func (h *harness) connect(t *testing.T, uid uint64, did string) *websocket.Conn {
	t.Helper()
	c, _, err := h.dial(h.token(uid, did))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readFrame(t *testing.T, c *websocket.Conn) map[string]any {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("frame %s: %v", b, err)
	}
	return m
}

func TestWSRefusals(t *testing.T) {
	h := newHarness(t, nil)
	if _, resp, err := h.dial(""); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("no token: %v %v", resp, err)
	}
	if _, resp, err := h.dial("bad"); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("bad token: %v %v", resp, err)
	}
	// Plain GET without upgrade.
	a := h.do("GET", "/v1/ws", h.token(1, "p"), nil)
	if a.status != 400 || a.errCode(t) != "invalid_argument" {
		t.Fatalf("plain GET: %d %s", a.status, a.body)
	}
	h.hub.err = errors.Join(model.ErrUnavailable, errors.New("hub closed"))
	if _, resp, err := h.dial(h.token(1, "p")); err == nil || resp == nil || resp.StatusCode != 503 {
		t.Fatalf("hub refusing: %v %v", resp, err)
	}
	if len(h.hub.subs) != 0 {
		t.Fatalf("subscriptions opened by refused upgrades: %d", len(h.hub.subs))
	}

	noHub := newHarness(t, func(_ *Config, d *Deps) { d.Hub = nil })
	if _, resp, err := noHub.dial(noHub.token(1, "p")); err == nil || resp == nil || resp.StatusCode != 501 {
		t.Fatalf("no hub: %v %v", resp, err)
	}
}

func TestWSPushAckSend(t *testing.T) {
	h := newHarness(t, nil)
	c := h.connect(t, 3, "phone")
	sub := <-h.hub.got
	if w := h.hub.who[0]; w.UID != 3 || w.DID != "phone" {
		t.Fatalf("subscribed as %+v", w)
	}

	// A pushed frame reaches the client verbatim.
	sub.push(5, `{"type":"msg","seq":5}`)
	if f := readFrame(t, c); f["type"] != "msg" || f["seq"].(json.Number) != "5" {
		t.Fatalf("push frame %v", f)
	}

	// Ack within what was pushed: served raised, then acked.
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"ack","pull_seq":5}`)); err != nil {
		t.Fatal(err)
	}
	if f := readFrame(t, c); f["type"] != "acked" || f["pull_seq"].(json.Number) != "5" {
		t.Fatalf("ack reply %v", f)
	}
	// Ack beyond what was pushed (and served): refused, served untouched.
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"ack","pull_seq":6}`)); err != nil {
		t.Fatal(err)
	}
	f := readFrame(t, c)
	if f["type"] != "error" || f["error"].(map[string]any)["code"] != "cursor_beyond_served" {
		t.Fatalf("ack beyond: %v", f)
	}
	calls := h.pull.snapshot()
	var kinds []string
	for _, cl := range calls {
		if cl.uid != 3 || cl.did != "phone" {
			t.Fatalf("pull call as %d/%s", cl.uid, cl.did)
		}
		kinds = append(kinds, cl.kind)
	}
	if strings.Join(kinds, ",") != "served,ack,ack" || calls[0].seq != 5 {
		t.Fatalf("pull calls %+v", calls)
	}

	// Send frame.
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"send","client_msg_id":"w-1","conv_type":1,"to_uid":4,"content":"yo"}`)); err != nil {
		t.Fatal(err)
	}
	f = readFrame(t, c)
	if f["type"] != "send_ack" || f["client_msg_id"] != "w-1" || f["msg_id"].(json.Number) != "99" || f["server_time"].(json.Number) != "1700000000123" {
		t.Fatalf("send_ack %v", f)
	}
	if s := h.send.sends[0]; s.SenderUID != 3 || s.DeviceID != "phone" || s.ToUID != 4 {
		t.Fatalf("send as %+v", s)
	}
	// A failing send says which client_msg_id failed.
	h.send.err = &model.RateLimitError{RetryAfter: time.Second}
	_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"send","client_msg_id":"w-2","conv_type":1,"to_uid":4,"content":"yo"}`))
	f = readFrame(t, c)
	if f["type"] != "error" || f["client_msg_id"] != "w-2" || f["error"].(map[string]any)["code"] != "rate_limited" {
		t.Fatalf("send error %v", f)
	}
	h.send.err = nil

	// Malformed frames get error frames and the connection stays up.
	for _, bad := range []string{`nope`, `{"type":"ack"}`, `{"type":"ack","pull_seq":"1"}`, `{"type":"ack","pull_seq":1,"uid":9}`,
		`{"type":"bogus"}`, `{"type":"send","client_msg_id":"w-3","conv_type":3,"to_uid":4}`, `{"type":"send","sender_uid":9}`} {
		_ = c.WriteMessage(websocket.TextMessage, []byte(bad))
		if f := readFrame(t, c); f["type"] != "error" || f["error"].(map[string]any)["code"] != "invalid_argument" {
			t.Fatalf("frame %s: %v", bad, f)
		}
	}
	if len(h.send.sends) != 2 {
		t.Fatalf("malformed frames reached the sender: %d", len(h.send.sends))
	}

	// The hub drops the subscription: queued frames first, then 1008 + reason.
	sub.push(6, `{"type":"msg","seq":6}`)
	sub.end("slow_consumer")
	if f := readFrame(t, c); f["seq"].(json.Number) != "6" {
		t.Fatalf("queued frame %v", f)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != CloseDropped || ce.Text != "slow_consumer" {
		t.Fatalf("close: %v", err)
	}
}

func TestWSOversizedFrameCloses(t *testing.T) {
	h := newHarness(t, nil)
	c := h.connect(t, 3, "phone")
	sub := <-h.hub.got
	_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"send","content":"`+strings.Repeat("x", MaxBodyBytes)+`"}`))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig {
		t.Fatalf("oversized frame: %v", err)
	}
	select {
	case <-sub.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("subscription not closed after the connection ended")
	}
	if len(h.send.sends) != 0 {
		t.Fatal("oversized frame reached the sender")
	}
}

func TestWSShutdownClosesConnections(t *testing.T) {
	h := newHarness(t, nil)
	c := h.connect(t, 3, "phone")
	sub := <-h.hub.got
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- h.srv.Shutdown(ctx)
	}()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != CloseShutdown {
		t.Fatalf("shutdown close: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	select {
	case <-sub.closed:
	default:
		t.Fatal("subscription still open after shutdown")
	}
}

// TestWSRegistersDevice: the upgrade registers the device with the read
// path before it subscribes (retention then waits for its cursor); a
// registration that fails refuses the upgrade and opens no subscription.
func TestWSRegistersDevice(t *testing.T) {
	h := newHarness(t, nil)
	h.connect(t, 7, "tablet")
	if got := h.pull.registrations(); len(got) != 1 || got[0] != "7/tablet" {
		t.Fatalf("registrations %v", got)
	}
	bad := newHarness(t, nil)
	bad.pull.registerErr = errors.Join(model.ErrUnavailable, errors.New("mysql down"))
	if _, resp, err := bad.dial(bad.token(7, "tablet")); err == nil || resp == nil || resp.StatusCode != 503 {
		t.Fatalf("registration failing: %v %v", resp, err)
	}
	if len(bad.hub.subs) != 0 {
		t.Fatalf("subscriptions opened by a refused upgrade: %d", len(bad.hub.subs))
	}
}
