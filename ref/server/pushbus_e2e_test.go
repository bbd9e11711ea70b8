package server

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"imlab/ref/pushbus"
)

// pushChain sends n 1:1 messages from -> to through e and reads n frames
// from ws: they carry the sent msg_ids in order, and each frame's prev_seq
// is the previous frame's seq (the first's is 0: a fresh inbox). Then no
// further frame arrives within quiet.
func pushChain(t *testing.T, e *e2e, ws *websocket.Conn, from, to uint64, tag string, n int, quiet time.Duration) {
	t.Helper()
	var ids []uint64
	for i := 0; i < n; i++ {
		a := e.send(e.tok(from, "phone"), fmt.Sprintf(`{"client_msg_id":"%s-%d","conv_type":1,"to_uid":%d,"content":"%s %d"}`, tag, i, to, tag, i))
		ids = append(ids, a.MsgID)
	}
	prev := uint64(0)
	for i := 0; i < n; i++ {
		f := readJSON(t, ws)
		if f["type"] != "msg" {
			t.Fatalf("%s frame %d: %v", tag, i, f)
		}
		var ps uint64
		if v, ok := f["prev_seq"]; ok {
			ps = num(t, v)
		}
		seq := num(t, f["seq"])
		if num(t, f["msg_id"]) != ids[i] || ps != prev || seq <= prev || f["content"] != fmt.Sprintf("%s %d", tag, i) {
			t.Fatalf("%s frame %d: %v (want msg_id %d, prev_seq %d)", tag, i, f, ids[i], prev)
		}
		prev = seq
	}
	_ = ws.SetReadDeadline(time.Now().Add(quiet))
	_, b, err := ws.ReadMessage()
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%s: a frame beyond the %d sent: %s (err %v)", tag, n, b, err)
	}
}

// metricValue reads one sample of the process's /metrics (0 if absent).
func metricValue(t *testing.T, e *e2e, sample string) float64 {
	t.Helper()
	r := e.call("GET", "/metrics", "", "")
	if r.status != 200 {
		t.Fatalf("metrics: %d", r.status)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(r.body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPushBusRoleSeparation: an api-only process (outbox policy) holds the
// device's WebSocket; a relay+consumer process writes the inbox rows; with
// the redis push bus the device gets every message pushed, in chain order.
// Then one all-in-one process with the redis bus pushes each message
// exactly once (its own bus messages are skipped, not fed to its hub again).
func TestPushBusRoleSeparation(t *testing.T) {
	fb := startFullBackends(t, false)
	// busProcess starts a process on fb with the redis push bus.
	busProcess := func(node uint16, policy string, roles ...string) *Process {
		cfg := fullConfig(fb, policy, roles...)
		cfg.Send.Node = node
		cfg.PushBus.Mode = pushbus.ModeRedis
		return startProcess(t, cfg, fb.b)
	}
	api := busProcess(1, "outbox", RoleAPI)
	worker := busProcess(2, "outbox", RoleRelay, RoleConsumer)
	e := clientFor(t, api, fb.my)
	w := clientFor(t, worker, fb.my)

	ws := e.dial(e.tok(2, "tablet"))
	pushChain(t, e, ws, 1, 2, "split", 12, 400*time.Millisecond)
	if v := metricValue(t, e, "imlab_push_bus_received_total"); v < 1 {
		t.Fatalf("api process received %v bus messages", v)
	}
	if v := metricValue(t, w, "imlab_push_bus_published_total"); v < 1 {
		t.Fatalf("worker published %v bus messages", v)
	}
	ws.Close()
	stopProcess(t, worker)
	stopProcess(t, api)

	all := busProcess(3, "strict", RoleAll)
	a := clientFor(t, all, fb.my)
	ws4 := a.dial(a.tok(4, "tablet"))
	pushChain(t, a, ws4, 3, 4, "all", 8, 400*time.Millisecond)
	if v := metricValue(t, a, "imlab_push_bus_published_total"); v < 1 {
		t.Fatalf("all-in-one published %v bus messages", v)
	}
	if v := metricValue(t, a, "imlab_push_bus_received_total"); v != 0 {
		t.Fatalf("all-in-one fed %v of its own bus messages to its hub", v)
	}
	if v := metricValue(t, a, `imlab_ws_dropped_total{reason="late_frame"}`); v != 0 {
		t.Fatalf("all-in-one dropped %v late frames (entries fed twice)", v)
	}
}
