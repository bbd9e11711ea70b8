package tinode_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"imlab/targets/tinode"
)

// script is a loopback WebSocket server that records every client frame
// and answers with what the test's handler returns, frame by frame, so the
// client's framing and its reading of answers are checked without any
// server logic in between.
type script struct {
	t       *testing.T
	ln      net.Listener
	srv     *http.Server
	mu      sync.Mutex
	frames  []map[string]json.RawMessage
	headers []http.Header
	answer  func(msg string, body map[string]any) []string
	wg      sync.WaitGroup
}

func startScript(t *testing.T, answer func(msg string, body map[string]any) []string) *script {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sc := &script{t: t, ln: ln, answer: answer}
	up := websocket.Upgrader{}
	sc.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc.mu.Lock()
		sc.headers = append(sc.headers, r.Header.Clone())
		sc.mu.Unlock()
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			if mt != websocket.TextMessage {
				t.Errorf("client sent frame type %d, want text", mt)
			}
			var f map[string]json.RawMessage
			if err := json.Unmarshal(b, &f); err != nil {
				t.Errorf("client frame is not one JSON object: %q", b)
				continue
			}
			sc.mu.Lock()
			sc.frames = append(sc.frames, f)
			sc.mu.Unlock()
			if len(f) != 1 {
				t.Errorf("client frame has %d members, want 1: %s", len(f), b)
				continue
			}
			for name, raw := range f {
				var body map[string]any
				_ = json.Unmarshal(raw, &body)
				for _, out := range sc.answer(name, body) {
					if out == "DROP" {
						return
					}
					if err := c.WriteMessage(websocket.TextMessage, []byte(out)); err != nil {
						return
					}
				}
			}
		}
	})}
	sc.wg.Go(func() { _ = sc.srv.Serve(ln) })
	t.Cleanup(func() {
		_ = sc.srv.Close()
		sc.wg.Wait()
	})
	return sc
}

func (sc *script) url() string { return "ws://" + sc.ln.Addr().String() + "/v0/channels" }

// dial opens a session with the default config on sc, closed when the
// test ends.
func (sc *script) dial(t *testing.T) *tinode.Session {
	t.Helper()
	s, err := tinode.Dial(context.Background(), tinode.Config{URL: sc.url()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func (sc *script) sent(name string) []map[string]any {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var out []map[string]any
	for _, f := range sc.frames {
		if raw, ok := f[name]; ok {
			var body map[string]any
			_ = json.Unmarshal(raw, &body)
			out = append(out, body)
		}
	}
	return out
}

func hiOK(id any) string {
	return `{"ctrl":{"id":"` + id.(string) + `","params":{"ver":"0.25","build":"script"},"code":201,"text":"created","ts":"2026-01-01T00:00:00.000Z"}}`
}

func ctrlJSON(id any, topic string, code int, text, params string) string {
	s := `{"ctrl":{"id":"` + id.(string) + `","topic":"` + topic + `","code":` + itoa(code) + `,"text":"` + text + `"`
	if params != "" {
		s += `,"params":` + params
	}
	return s + `,"ts":"2026-01-01T00:00:00.000Z"}}`
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestFraming checks the client's frames against the API document: one
// JSON object per text frame with one member named for the message, the
// API key header, {hi} fields, {pub} with an id and the tag in head,
// {get data} with since/before/limit, {note} without an id.
func TestFraming(t *testing.T) {
	sc := startScript(t, func(msg string, b map[string]any) []string {
		switch msg {
		case "hi":
			return []string{hiOK(b["id"])}
		case "pub":
			return []string{ctrlJSON(b["id"], b["topic"].(string), 202, "accepted", `{"seq":7}`)}
		case "get":
			return []string{ctrlJSON(b["id"], b["topic"].(string), 204, "no content", `{"what":"data"}`)}
		case "del":
			return []string{ctrlJSON(b["id"], b["topic"].(string), 200, "ok", `{"del":3}`)}
		}
		return nil
	})
	ctx := context.Background()
	s, err := tinode.Dial(ctx, tinode.Config{URL: sc.url(), APIKey: "key-1", UserAgent: "ua/1", DeviceID: "dev-9"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if h := s.Hello(); h.Ver != "0.25" || h.Build != "script" {
		t.Errorf("hello = %+v", h)
	}
	ack, err := s.Publish(ctx, "grpX", tinode.Message{Tag: "tag-1", Content: "hi", Head: map[string]any{"mime": "text/plain"}})
	if err != nil || ack.Seq != 7 {
		t.Fatalf("publish = %+v, %v", ack, err)
	}
	if _, err := s.History(ctx, "grpX", 3, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Note(ctx, "grpX", tinode.NoteRead, 5); err != nil {
		t.Fatal(err)
	}
	if id, err := s.DeleteMessages(ctx, "grpX", []tinode.SeqRange{{Low: 2}, {Low: 4, Hi: 6}}, true); err != nil || id != 3 {
		t.Fatalf("delete = %d, %v", id, err)
	}
	// The note has no answer: wait until the script saw it (it follows the del).
	waitFor(t, func() bool { return len(sc.sent("note")) == 1 })

	sc.mu.Lock()
	h0 := sc.headers[0]
	sc.mu.Unlock()
	if got := h0.Get(tinode.APIKeyHeader); got != "key-1" {
		t.Errorf("api key header = %q", got)
	}
	hi := sc.sent("hi")[0]
	if hi["ver"] != tinode.DefaultProtocolVersion || hi["ua"] != "ua/1" || hi["dev"] != "dev-9" || hi["id"] == "" {
		t.Errorf("hi = %v", hi)
	}
	pub := sc.sent("pub")[0]
	head, _ := pub["head"].(map[string]any)
	if pub["topic"] != "grpX" || pub["content"] != "hi" || pub["id"] == nil || pub["id"] == "" ||
		head[tinode.TagHeadKey] != "tag-1" || head["mime"] != "text/plain" {
		t.Errorf("pub = %v", pub)
	}
	get := sc.sent("get")[0]
	data, _ := get["data"].(map[string]any)
	if get["what"] != "data" || data["since"] != 3.0 || data["before"] != 10.0 || data["limit"] != float64(tinode.DefaultPageLimit) {
		t.Errorf("get = %v", get)
	}
	note := sc.sent("note")[0]
	if _, hasID := note["id"]; hasID || note["what"] != "read" || note["seq"] != 5.0 || note["topic"] != "grpX" {
		t.Errorf("note = %v", note)
	}
	del := sc.sent("del")[0]
	if del["what"] != "msg" || del["hard"] != true {
		t.Errorf("del = %v", del)
	}
	// Re-encoded from a map: keys come sorted.
	if ds, _ := json.Marshal(del["delseq"]); string(ds) != `[{"low":2},{"hi":6,"low":4}]` {
		t.Errorf("delseq = %s", ds)
	}
	// Request ids are unique within the session.
	seen := map[any]bool{}
	for _, name := range []string{"hi", "pub", "get", "del"} {
		for _, b := range sc.sent(name) {
			if seen[b["id"]] {
				t.Errorf("request id %v reused", b["id"])
			}
			seen[b["id"]] = true
		}
	}
}

// TestAckParsing checks how answers become results and errors: a 202 with
// a seq is an ACK; a 202 without one, or a malformed answer, is unknown; an
// error code is a definite failure; an answer to nobody is a late answer
// or a notice on Pushes; a frame that is not JSON is counted and skipped.
func TestAckParsing(t *testing.T) {
	sc := startScript(t, func(msg string, b map[string]any) []string {
		if msg == "hi" {
			return []string{hiOK(b["id"])}
		}
		topic := b["topic"].(string)
		switch topic {
		case "grpOK":
			return []string{`not json`, ctrlJSON(b["id"], topic, 202, "accepted", `{"seq":41}`)}
		case "grpNoSeq":
			return []string{ctrlJSON(b["id"], topic, 202, "accepted", `{"what":"x"}`)}
		case "grpBadParams":
			return []string{ctrlJSON(b["id"], topic, 202, "accepted", `{"seq":"x"}`)}
		case "grp500":
			return []string{ctrlJSON(b["id"], topic, 500, "internal error", "")}
		case "grp409":
			return []string{ctrlJSON(b["id"], topic, 409, "must attach first", "")}
		case "grpStray":
			return []string{ctrlJSON("nobody", topic, 202, "accepted", `{"seq":1}`),
				`{"ctrl":{"topic":"grpStray","code":205,"text":"evicted","ts":"2026-01-01T00:00:00Z"}}`,
				ctrlJSON(b["id"], topic, 202, "accepted", `{"seq":2}`)}
		case "grpDrop":
			return []string{"DROP"}
		}
		return nil
	})
	ctx := context.Background()
	s := sc.dial(t)
	msg := tinode.Message{Content: "x"}

	ack, err := s.Publish(ctx, "grpOK", msg)
	if err != nil || ack.Seq != 41 || ack.TS.IsZero() || ack.ID == "" {
		t.Errorf("grpOK: %+v, %v", ack, err)
	}
	if st := s.Stats(); st.Malformed != 1 {
		t.Errorf("malformed = %d, want 1", st.Malformed)
	}
	for _, topic := range []string{"grpNoSeq", "grpBadParams"} {
		_, err := s.Publish(ctx, topic, msg)
		var ue *tinode.UnknownError
		if tinode.OutcomeOf(err) != tinode.OutcomeUnknown || !errors.As(err, &ue) || !errors.Is(err, tinode.ErrProtocol) {
			t.Errorf("%s: %v (outcome %v), want unknown protocol error", topic, err, tinode.OutcomeOf(err))
		}
	}
	_, err = s.Publish(ctx, "grp500", msg)
	if !errors.Is(err, tinode.ErrServerFailure) || !tinode.IsCode(err, 500) || tinode.OutcomeOf(err) != tinode.OutcomeFailed {
		t.Errorf("grp500: %v", err)
	}
	_, err = s.Publish(ctx, "grp409", msg)
	if !errors.Is(err, tinode.ErrRejected) || !tinode.IsCode(err, 409) || tinode.OutcomeOf(err) != tinode.OutcomeFailed {
		t.Errorf("grp409: %v", err)
	}
	if ack, err := s.Publish(ctx, "grpStray", msg); err != nil || ack.Seq != 2 {
		t.Errorf("grpStray: %+v, %v", ack, err)
	}
	late, notice := <-s.Pushes(), <-s.Pushes()
	if late.Kind != tinode.PushLate || late.Ctrl.ID != "nobody" || notice.Kind != tinode.PushNotice || notice.Ctrl.Code != 205 {
		t.Errorf("pushes = %+v %+v", late, notice)
	}
	_, err = s.Publish(ctx, "grpDrop", msg)
	if tinode.OutcomeOf(err) != tinode.OutcomeUnknown || !errors.Is(err, tinode.ErrUnknownOutcome) {
		t.Errorf("grpDrop: %v (outcome %v), want unknown", err, tinode.OutcomeOf(err))
	}
	<-s.Done()
	_, err = s.Publish(ctx, "grpOK", msg)
	if !errors.Is(err, tinode.ErrClosed) || tinode.OutcomeOf(err) != tinode.OutcomeFailed {
		t.Errorf("after the connection ended: %v", err)
	}
}

// TestHistoryPageViolations: pages that break the protocol's promises are
// errors, never silently reassembled.
func TestHistoryPageViolations(t *testing.T) {
	data := func(topic string, seq int) string {
		return `{"data":{"topic":"` + topic + `","from":"usrA","ts":"2026-01-01T00:00:00Z","seq":` + itoa(seq) + `,"content":"m"}}`
	}
	sc := startScript(t, func(msg string, b map[string]any) []string {
		if msg == "hi" {
			return []string{hiOK(b["id"])}
		}
		topic := b["topic"].(string)
		switch topic {
		case "grpAscending": // oldest first: not what the protocol says
			return []string{data(topic, 1), data(topic, 2), ctrlJSON(b["id"], topic, 208, "delivered", `{"count":2}`)}
		case "grpCount":
			return []string{data(topic, 2), ctrlJSON(b["id"], topic, 208, "delivered", `{"count":2}`)}
		case "grpLive": // seq 9 is outside [1,3): a live push, not part of the page
			return []string{data(topic, 2), data(topic, 9), data(topic, 1), ctrlJSON(b["id"], topic, 208, "delivered", `{"count":2}`)}
		}
		return nil
	})
	ctx := context.Background()
	s := sc.dial(t)
	for _, topic := range []string{"grpAscending", "grpCount"} {
		if _, err := s.History(ctx, topic, 1, 3); !errors.Is(err, tinode.ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", topic, err)
		}
	}
	h, err := s.History(ctx, "grpLive", 1, 3)
	if err != nil || len(h.Messages) != 2 || h.Messages[0].Seq != 1 || h.Messages[1].Seq != 2 || h.Pages != 1 {
		t.Fatalf("grpLive: %+v, %v", h, err)
	}
	if p := <-s.Pushes(); p.Kind != tinode.PushData || p.Data.Seq != 9 {
		t.Errorf("live push = %+v", p)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []tinode.Config{
		{URL: ""}, {URL: "http://127.0.0.1:1/v0/channels"}, {URL: "ws:///x"},
		{URL: "ws://h/x", APIKey: "a\nb"}, {URL: "ws://h/x", MaxPending: -1}, {URL: "ws://h/x", RequestTimeout: -1},
	} {
		err := c.Validate()
		if !errors.Is(err, tinode.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", c, err)
		}
		if _, err := tinode.Dial(context.Background(), c); !errors.Is(err, tinode.ErrInvalid) {
			t.Errorf("dial %+v: %v", c, err)
		}
	}
	if err := (tinode.Config{URL: "ws://127.0.0.1:6060/v0/channels"}).Validate(); err != nil {
		t.Error(err)
	}
	if _, err := tinode.Dial(context.Background(), tinode.Config{URL: "ws://127.0.0.1:1/v0/channels", DialTimeout: time.Second}); !errors.Is(err, tinode.ErrDial) ||
		tinode.OutcomeOf(err) != tinode.OutcomeFailed || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("dial to a closed port: %v", err)
	}
}

// TestStaleHistoryPage: a page whose answer came too late must not leak
// into the next page (history frames carry no request id): the next page
// is asked only once the late answer is in, and its frames are dropped.
func TestStaleHistoryPage(t *testing.T) {
	var mu sync.Mutex
	gets := 0
	data := func(seq int) string {
		return `{"data":{"topic":"grpS","from":"usrA","ts":"2026-01-01T00:00:00Z","seq":` + itoa(seq) + `,"content":"m"}}`
	}
	sc := startScript(t, func(msg string, b map[string]any) []string {
		if msg == "hi" {
			return []string{hiOK(b["id"])}
		}
		mu.Lock()
		gets++
		first := gets == 1
		mu.Unlock()
		if first {
			time.Sleep(300 * time.Millisecond)
		}
		return []string{data(3), data(2), data(1), ctrlJSON(b["id"], "grpS", 208, "delivered", `{"count":3}`)}
	})
	ctx := context.Background()
	s := sc.dial(t)
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := s.History(wctx, "grpS", 1, 4); tinode.OutcomeOf(err) != tinode.OutcomeUnknown {
		t.Fatalf("late page: %v", err)
	}
	h, err := s.History(ctx, "grpS", 1, 4)
	if err != nil || !slices.Equal(seqsOf(h.Messages), []int64{1, 2, 3}) {
		t.Fatalf("next page: %v, %v", seqsOf(h.Messages), err)
	}
	if st := s.Stats(); st.Late != 1 || st.Ignored != 3 || st.Pushes != 1 {
		t.Errorf("stats = %+v: want the late answer pushed and its 3 frames dropped", st)
	}
}
