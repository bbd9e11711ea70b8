package server

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"imlab/internal/budget"
	"imlab/internal/testenv"
	"imlab/ref/auth"
	"imlab/ref/model"
	"imlab/ref/push"
)

const e2eSecret = "e2e-secret-0123456789abcdef"

type e2e struct {
	t      *testing.T
	p      *Process
	db     *sql.DB
	base   string
	auth   *auth.Authority
	client *http.Client
}

// e2eConfig is the default config on a free loopback port, with the test
// secret and the Redis key prefix.
func e2eConfig(redisPrefix string) Config {
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Auth.Secret = e2eSecret
	cfg.Redis.KeyPrefix = redisPrefix
	return cfg
}

func startE2E(t *testing.T, mutate func(*Config)) *e2e {
	t.Helper()
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	cfg := e2eConfig(rd.Keys.Prefix)
	cfg.MySQL.MaxOpenConns = 16
	cfg.MySQL.MaxIdleConns = 16
	cfg.Pull.RateLimit = 1e5
	cfg.Pull.RateBurst = 1e5
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.API.WS.CloseGrace = 200 * time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Start(ctx, cfg, Backends{MySQLDSN: my.DSN, RedisAddr: rd.Addr}, DefaultRoles())
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	e := &e2e{t: t, p: p, db: my.DB, base: "http://" + p.APIAddr().String(), auth: p.Auth, client: &http.Client{Timeout: 15 * time.Second}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
		e.client.CloseIdleConnections()
	})
	return e
}

func (e *e2e) tok(uid uint64, did string) string {
	e.t.Helper()
	s, err := e.auth.Mint(uid, did, time.Hour)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

type resp struct {
	status int
	hdr    http.Header
	body   []byte
}

func (e *e2e) call(method, path, token, body string) resp {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.base+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	r, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp{r.StatusCode, r.Header, b}
}

func (r resp) code() string {
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

type sendAnswer struct {
	MsgID      uint64 `json:"msg_id"`
	MsgIDStr   string `json:"msg_id_str"`
	ConvID     uint64 `json:"conv_id"`
	ConvIDStr  string `json:"conv_id_str"`
	ConvSeq    uint64 `json:"conv_seq"`
	ServerTime int64  `json:"server_time"`
}

func (e *e2e) send(token, body string) sendAnswer {
	e.t.Helper()
	var a sendAnswer
	e.decode(e.call("POST", "/v1/msg/send", token, body), "send "+body, &a)
	return a
}

// decode fails the test unless r is a 200 whose body decodes into dst with
// no member dst lacks; what names the call.
func (e *e2e) decode(r resp, what string, dst any) {
	e.t.Helper()
	if r.status != 200 {
		e.t.Fatalf("%s: %d %s", what, r.status, r.body)
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		e.t.Fatalf("%s: answer %s: %v", what, r.body, err)
	}
}

type pullAnswer struct {
	Msgs       []push.Item     `json:"msgs"`
	HasMore    bool            `json:"has_more"`
	NextCursor uint64          `json:"next_cursor"`
	Truncated  bool            `json:"truncated"`
	Summary    json.RawMessage `json:"summary"`
}

func (e *e2e) pull(token, query string) pullAnswer {
	e.t.Helper()
	var a pullAnswer
	e.decode(e.call("GET", "/v1/sync/pull"+query, token, ""), "pull "+query, &a)
	return a
}

func (e *e2e) count(table string) int {
	e.t.Helper()
	var n int
	if err := e.db.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *e2e) counts() string {
	var parts []string
	for _, t := range []string{"offline_msg", "msg_content", "sync_cursor", "sync_served", "conv_counter", "im_group", "group_member", "seq_fence"} {
		parts = append(parts, fmt.Sprintf("%s=%d", t, e.count(t)))
	}
	return strings.Join(parts, " ")
}

func TestE2ESendPullAck(t *testing.T) {
	e := startE2E(t, nil)
	a, b := e.tok(1, "phone"), e.tok(2, "phone")
	before := time.Now().Add(-time.Second).UnixMilli()
	s := e.send(a, `{"client_msg_id":"c-1","conv_type":1,"to_uid":2,"content":"hi \"b\""}`)
	conv, _ := model.SingleConvID(1, 2)
	if s.ConvID != conv || s.ConvSeq != 1 || s.MsgID == 0 || s.ServerTime < before {
		t.Fatalf("send answer %+v", s)
	}
	// The ids the server mints pass 2^53 (a double would round them); each
	// comes with its exact string twin.
	if s.MsgID <= 1<<53 || conv <= 1<<53 || s.MsgIDStr != strconv.FormatUint(s.MsgID, 10) || s.ConvIDStr != strconv.FormatUint(conv, 10) {
		t.Fatalf("send answer %+v: ids and their twins", s)
	}
	// Retried client_msg_id: the first answer, nothing new stored.
	if again := e.send(a, `{"client_msg_id":"c-1","conv_type":1,"to_uid":2,"content":"hi \"b\""}`); again != s {
		t.Fatalf("retry answered %+v, first %+v", again, s)
	}
	if n := e.count("msg_content"); n != 1 {
		t.Fatalf("msg_content rows %d after a retried send", n)
	}
	if n := e.count("offline_msg"); n != 2 { // recipient and sender (multi-device sync)
		t.Fatalf("offline_msg rows %d", n)
	}

	p := e.pull(b, "")
	if len(p.Msgs) != 1 || p.HasMore || p.Truncated {
		t.Fatalf("pull %+v", p)
	}
	m := p.Msgs[0]
	if m.MsgID != s.MsgID || m.MsgIDStr != s.MsgIDStr || m.ConvID != conv || m.ConvIDStr != s.ConvIDStr || m.ConvType != 1 || m.ConvSeq != 1 || m.SenderUID != 1 ||
		m.Content != `hi "b"` || m.CreatedAt < before || p.NextCursor != m.Seq {
		t.Fatalf("item %+v next %d", m, p.NextCursor)
	}
	// The sender's own inbox holds it too.
	if pa := e.pull(a, ""); len(pa.Msgs) != 1 || pa.Msgs[0].MsgID != s.MsgID {
		t.Fatalf("sender inbox %+v", pa)
	}
	// Ack beyond what was served: 409, cursor untouched.
	r := e.call("POST", "/v1/sync/ack", b, fmt.Sprintf(`{"pull_seq":%d}`, m.Seq+1))
	if r.status != 409 || r.code() != "cursor_beyond_served" {
		t.Fatalf("ack beyond: %d %s", r.status, r.body)
	}
	r = e.call("POST", "/v1/sync/ack", b, fmt.Sprintf(`{"pull_seq":%d}`, m.Seq))
	if r.status != 200 || string(r.body) != fmt.Sprintf(`{"pull_seq":%d}`, m.Seq) {
		t.Fatalf("ack: %d %s", r.status, r.body)
	}
	// The stored cursor is used when cursor= is absent.
	if p := e.pull(b, ""); len(p.Msgs) != 0 || p.NextCursor != m.Seq {
		t.Fatalf("pull after ack %+v", p)
	}
	// An explicit cursor re-reads.
	if p := e.pull(b, "?cursor=0&limit=1"); len(p.Msgs) != 1 {
		t.Fatalf("re-read %+v", p)
	}
	// conv/pull sees the conversation.
	r = e.call("GET", fmt.Sprintf("/v1/conv/pull?conv_id=%d", conv), b, "")
	if r.status != 200 || !bytes.Contains(r.body, []byte(`"msg_id":`+strconv.FormatUint(s.MsgID, 10))) {
		t.Fatalf("conv pull: %d %s", r.status, r.body)
	}
	// Ack going backwards keeps the cursor (monotonic).
	r = e.call("POST", "/v1/sync/ack", b, `{"pull_seq":0}`)
	if r.status != 200 || string(r.body) != fmt.Sprintf(`{"pull_seq":%d}`, m.Seq) {
		t.Fatalf("ack back: %d %s", r.status, r.body)
	}
}

func TestE2ECrossUID(t *testing.T) {
	e := startE2E(t, nil)
	a, b := e.tok(1, "phone"), e.tok(2, "phone")
	// A writes to C: B sees nothing of it.
	e.send(a, `{"client_msg_id":"x-1","conv_type":1,"to_uid":3,"content":"secret"}`)
	if p := e.pull(b, "?cursor=0"); len(p.Msgs) != 0 {
		t.Fatalf("B sees %+v", p.Msgs)
	}
	// B cannot ack anything (it was served nothing); A's cursor is untouched.
	if r := e.call("POST", "/v1/sync/ack", b, `{"pull_seq":1}`); r.status != 409 {
		t.Fatalf("B ack: %d %s", r.status, r.body)
	}
	var n int
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM sync_cursor WHERE uid = 1`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("A's cursor rows %d %v", n, err)
	}
	// conv/pull of A and C's conversation by B: nothing (only B's own inbox is read).
	conv, _ := model.SingleConvID(1, 3)
	r := e.call("GET", fmt.Sprintf("/v1/conv/pull?conv_id=%d", conv), b, "")
	if r.status == 200 && bytes.Contains(r.body, []byte("secret")) {
		t.Fatalf("B read A-C conversation: %s", r.body)
	}
	// A token for A sending to B writes into B's inbox only as a message from A.
	e.send(a, `{"client_msg_id":"x-2","conv_type":1,"to_uid":2,"content":"to b"}`)
	p := e.pull(b, "?cursor=0")
	if len(p.Msgs) != 1 || p.Msgs[0].SenderUID != 1 || p.Msgs[0].Content != "to b" {
		t.Fatalf("B inbox %+v", p.Msgs)
	}
	var sender uint64
	if err := e.db.QueryRow(`SELECT sender_uid FROM offline_msg WHERE uid = 2`).Scan(&sender); err != nil || sender != 1 {
		t.Fatalf("B's row sender %d %v", sender, err)
	}
	// A body that tries to name the sender is refused.
	if r := e.call("POST", "/v1/msg/send", b, `{"client_msg_id":"x-3","conv_type":1,"to_uid":3,"sender_uid":1,"content":"forged"}`); r.status != 400 {
		t.Fatalf("forged sender: %d %s", r.status, r.body)
	}
	if r := e.call("GET", "/v1/sync/pull?uid=1", b, ""); r.status != 400 {
		t.Fatalf("uid param: %d %s", r.status, r.body)
	}
}

func TestE2EMalformedChangesNothing(t *testing.T) {
	e := startE2E(t, nil)
	a := e.tok(1, "phone")
	e.send(a, `{"client_msg_id":"seed","conv_type":1,"to_uid":2,"content":"seed"}`)
	if r := e.call("POST", "/v1/group/create", a, `{"group_id":7,"members":[1,2,3]}`); r.status != 200 {
		t.Fatalf("group: %d %s", r.status, r.body)
	}
	before := e.counts()
	members := make([]string, model.MaxGroupMembers+1)
	for i := range members {
		members[i] = strconv.Itoa(i + 1)
	}
	huge := strings.Repeat("x", 40<<10)
	cases := []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"bad json", "POST", "/v1/msg/send", a, `{"client_msg_id":"m1",`, 400, "invalid_argument"},
		{"unknown field", "POST", "/v1/msg/send", a, `{"client_msg_id":"m2","conv_type":1,"to_uid":2,"content":"x","prio":1}`, 400, "invalid_argument"},
		{"wrong type", "POST", "/v1/msg/send", a, `{"client_msg_id":"m3","conv_type":1,"to_uid":"2","content":"x"}`, 400, "invalid_argument"},
		{"missing auth", "POST", "/v1/msg/send", "", `{"client_msg_id":"m4","conv_type":1,"to_uid":2,"content":"x"}`, 401, "unauthenticated"},
		{"bad token", "POST", "/v1/msg/send", "abc.def.ghi", `{"client_msg_id":"m5","conv_type":1,"to_uid":2,"content":"x"}`, 401, "unauthenticated"},
		{"oversized body", "POST", "/v1/msg/send", a, `{"client_msg_id":"m6","conv_type":1,"to_uid":2,"content":"` + huge + `"}`, 413, "too_large"},
		{"content too long", "POST", "/v1/msg/send", a, `{"client_msg_id":"m7","conv_type":1,"to_uid":2,"content":"` + strings.Repeat("y", model.MaxContentLen+1) + `"}`, 413, "too_large"},
		{"conv_type 3", "POST", "/v1/msg/send", a, `{"client_msg_id":"m8","conv_type":3,"to_uid":2,"content":"x"}`, 400, "invalid_argument"},
		{"client_msg_id too long", "POST", "/v1/msg/send", a, `{"client_msg_id":"` + strings.Repeat("c", 65) + `","conv_type":1,"to_uid":2}`, 400, "invalid_argument"},
		{"not a member", "POST", "/v1/msg/send", e.tok(9, "phone"), `{"client_msg_id":"m9","conv_type":2,"group_id":7,"content":"x"}`, 403, "permission_denied"},
		{"limit 0", "GET", "/v1/sync/pull?limit=0", a, ``, 400, "invalid_argument"},
		{"limit 501", "GET", "/v1/sync/pull?limit=501", a, ``, 400, "invalid_argument"},
		{"limit abc", "GET", "/v1/sync/pull?limit=abc", a, ``, 400, "invalid_argument"},
		{"negative cursor", "GET", "/v1/sync/pull?cursor=-1", a, ``, 400, "invalid_argument"},
		{"conv limit 51", "GET", "/v1/conv/pull?conv_id=7&limit=51", a, ``, 400, "invalid_argument"},
		{"ack wrong type", "POST", "/v1/sync/ack", a, `{"pull_seq":"1"}`, 400, "invalid_argument"},
		{"ack unknown field", "POST", "/v1/sync/ack", a, `{"pull_seq":1,"did":"x"}`, 400, "invalid_argument"},
		{"group of 501", "POST", "/v1/group/create", a, `{"group_id":8,"members":[` + strings.Join(members, ",") + `]}`, 400, "invalid_argument"},
		{"group changed members", "POST", "/v1/group/create", a, `{"group_id":7,"members":[1,2,4]}`, 409, "conflict"},
	}
	for _, c := range cases {
		r := e.call(c.method, c.path, c.token, c.body)
		if r.status != c.status || r.code() != c.code {
			t.Errorf("%s: %d %.200s, want %d %s", c.name, r.status, r.body, c.status, c.code)
		}
		if after := e.counts(); after != before {
			t.Fatalf("%s changed the data:\n before %s\n after  %s", c.name, before, after)
		}
	}
}

func TestE2ERateLimit(t *testing.T) {
	e := startE2E(t, func(c *Config) {
		c.Pull.RateLimit = 1
		c.Pull.RateBurst = 2
	})
	b := e.tok(2, "phone")
	var limited resp
	for i := 0; i < 10; i++ {
		r := e.call("GET", "/v1/sync/pull", b, "")
		if r.status == 429 {
			limited = r
			break
		}
		if r.status != 200 {
			t.Fatalf("pull %d: %d %s", i, r.status, r.body)
		}
	}
	if limited.status != 429 || limited.code() != "rate_limited" {
		t.Fatalf("no 429 within 10 pulls at 1/s burst 2")
	}
	ra, err := strconv.Atoi(limited.hdr.Get("Retry-After"))
	if err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", limited.hdr.Get("Retry-After"))
	}
	// Another uid is not limited by B's pulls.
	if r := e.call("GET", "/v1/sync/pull", e.tok(3, "phone"), ""); r.status != 200 {
		t.Fatalf("other uid: %d %s", r.status, r.body)
	}
}

func (e *e2e) dial(token string) *websocket.Conn {
	e.t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	c, _, err := d.Dial("ws"+strings.TrimPrefix(e.base, "http")+"/v1/ws", http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

func readJSON(t *testing.T, c *websocket.Conn) map[string]any {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("ws read: %v", err)
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("ws frame %s: %v", b, err)
	}
	return m
}

func num(t *testing.T, v any) uint64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("not a number: %v", v)
	}
	u, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestE2EWebSocket(t *testing.T) {
	e := startE2E(t, nil)
	a, b := e.tok(1, "phone"), e.tok(2, "tablet")
	wb := e.dial(b)
	s := e.send(a, `{"client_msg_id":"w-1","conv_type":1,"to_uid":2,"content":"pushed"}`)
	f := readJSON(t, wb)
	if f["type"] != "msg" || num(t, f["msg_id"]) != s.MsgID || f["msg_id_str"] != s.MsgIDStr || f["conv_id_str"] != s.ConvIDStr ||
		num(t, f["sender_uid"]) != 1 || f["content"] != "pushed" {
		t.Fatalf("push frame %v", f)
	}
	seq := num(t, f["seq"])
	// Ack the pushed seq over ws: served raised to it, cursor stored.
	if err := wb.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf(`{"type":"ack","pull_seq":%d}`, seq))); err != nil {
		t.Fatal(err)
	}
	f = readJSON(t, wb)
	if f["type"] != "acked" || num(t, f["pull_seq"]) != seq {
		t.Fatalf("ack reply %v", f)
	}
	var cur uint64
	if err := e.db.QueryRow(`SELECT pull_seq FROM sync_cursor WHERE uid = 2 AND device_id = 'tablet'`).Scan(&cur); err != nil || cur != seq {
		t.Fatalf("stored cursor %d %v", cur, err)
	}
	// Acking beyond what was pushed or served is refused.
	_ = wb.WriteMessage(websocket.TextMessage, []byte(fmt.Sprintf(`{"type":"ack","pull_seq":%d}`, seq+5)))
	if f = readJSON(t, wb); f["type"] != "error" {
		t.Fatalf("ack beyond %v", f)
	}
	// A send frame from B reaches A; B gets send_ack.
	_ = wb.WriteMessage(websocket.TextMessage, []byte(`{"type":"send","client_msg_id":"w-2","conv_type":1,"to_uid":1,"content":"reply"}`))
	for {
		f = readJSON(t, wb)
		if f["type"] == "send_ack" {
			break
		}
		if f["type"] != "msg" { // B's own copy may be pushed first (multi-device sync)
			t.Fatalf("unexpected frame %v", f)
		}
	}
	if f["client_msg_id"] != "w-2" || num(t, f["conv_seq"]) != 2 {
		t.Fatalf("send_ack %v", f)
	}
	pa := e.pull(a, "?cursor=0")
	if len(pa.Msgs) != 2 || pa.Msgs[1].Content != "reply" || pa.Msgs[1].SenderUID != 2 {
		t.Fatalf("A inbox %+v", pa.Msgs)
	}
	// A second connection of the same device replaces the first: 1008.
	wb2 := e.dial(b)
	_ = wb.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := wb.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || ce.Text != "replaced" {
			t.Fatalf("replaced close: %v", err)
		}
		break
	}
	_ = wb2
}

// BenchmarkE2ESend1to1 measures strict 1:1 sends (1000 users) through a
// whole server process (API, hot-cache and push hooks, MariaDB + Redis) two
// ways at the same concurrency (e2eSendersInFlight requests in flight):
// "http" POSTs /v1/msg/send over real HTTP on loopback; "inproc" calls the
// same process's send.Service directly. The ratio http/inproc is what the
// HTTP layer costs.
//
// The comparison is fair only if the client costs little: it runs in this
// process, on the same cores as the server, and every CPU-µs it spends is
// taken from the server. So the http mode uses the client the lab's own
// generator uses (targets/ref/client: fasthttp), one HostClient with a
// connection per request in flight, each sender reusing its request,
// response and body buffer; net/http's client, which allocates a request,
// a response and their headers per call, would measure itself. Both modes
// build the same client_msg_id with strconv into a reused buffer.
//
// Reported besides ns/op: msgs/s (wall clock of the timed loop), go-µs/msg
// (this process's user+system CPU from getrusage around the timed loop,
// client and server together; exact on a shared machine, unlike msgs/s) and
// -benchmem's allocations per message (client included: the fasthttp
// client's are near zero) and, when the MySQL server's process is readable,
// db-µs/msg (its CPU from /proc; on a shared server an upper bound).
func BenchmarkE2ESend1to1(b *testing.B) {
	for _, mode := range []string{"http", "inproc"} {
		b.Run(mode, func(b *testing.B) { benchE2ESend(b, mode) })
	}
}

// e2eSendersInFlight is the concurrency of BenchmarkE2ESend1to1.
const e2eSendersInFlight = 64

func benchE2ESend(b *testing.B, mode string) {
	my := testenv.NewMySQL(b)
	rd := testenv.NewRedis(b)
	cfg := e2eConfig(rd.Keys.Prefix)
	cfg.Logger = slog.New(slog.DiscardHandler)
	ctx := context.Background()
	p, err := Start(ctx, cfg, Backends{MySQLDSN: my.DSN, RedisAddr: rd.Addr}, DefaultRoles())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Stop(context.Background()) })
	core, err := p.Core(ctx)
	if err != nil {
		b.Fatal(err)
	}
	const users = 1000
	auths := make([][]byte, users+1)
	for u := 1; u <= users; u++ {
		tok, err := p.Auth.Mint(uint64(u), "bench", time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		auths[u] = []byte("Bearer " + tok)
	}
	addr := p.APIAddr().String()
	hc := &fasthttp.HostClient{
		Addr:                addr,
		MaxConns:            e2eSendersInFlight,
		MaxConnWaitTimeout:  30 * time.Second,
		ReadTimeout:         30 * time.Second,
		WriteTimeout:        30 * time.Second,
		MaxIdleConnDuration: time.Minute,
	}
	b.Cleanup(hc.CloseIdleConnections)
	var seq atomicCounter
	var failed atomic.Int64
	b.SetParallelism(max(1, e2eSendersInFlight/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	dbPID := budget.ServerPID(ctx, my.DB)
	cpu0 := budget.ReadCPU(dbPID)
	t0 := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI("http://" + addr + "/v1/msg/send")
		req.Header.SetContentType("application/json")
		body := make([]byte, 0, 128)
		cmid := make([]byte, 0, 24)
		for pb.Next() {
			n := seq.next()
			from := n%users + 1
			to := (n*7+3)%users + 1
			if to == from {
				to = to%users + 1
			}
			cmid = strconv.AppendUint(append(cmid[:0], "b-"...), n, 10)
			if mode == "inproc" {
				_, err := core.Send.Send(ctx, model.SendRequest{SenderUID: from, DeviceID: "bench", ClientMsgID: string(cmid),
					ConvType: model.ConvSingle, ToUID: to, Content: "benchmark message body"})
				if err != nil {
					failed.Add(1)
				}
				continue
			}
			body = append(body[:0], `{"client_msg_id":"`...)
			body = append(body, cmid...)
			body = append(body, `","conv_type":1,"to_uid":`...)
			body = strconv.AppendUint(body, to, 10)
			body = append(body, `,"content":"benchmark message body"}`...)
			req.SetBodyRaw(body)
			req.Header.SetBytesV(fasthttp.HeaderAuthorization, auths[from])
			if err := hc.Do(req, resp); err != nil || resp.StatusCode() != fasthttp.StatusOK {
				failed.Add(1)
			}
		}
	})
	el := time.Since(t0)
	cpu1 := budget.ReadCPU(dbPID)
	b.StopTimer()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d sends failed", f, b.N)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	b.ReportMetric(float64((cpu1.Self-cpu0.Self).Microseconds())/float64(b.N), "go-µs/msg")
	if cpu0.ServerOK && cpu1.ServerOK {
		b.ReportMetric(float64((cpu1.Server-cpu0.Server).Microseconds())/float64(b.N), "db-µs/msg")
	}
}

type atomicCounter struct{ v atomic.Uint64 }

func (c *atomicCounter) next() uint64 { return c.v.Add(1) }
