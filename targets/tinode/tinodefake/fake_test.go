package tinodefake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
)

// raw is a bare WebSocket client: the fake is checked frame by frame,
// without the driver.
type raw struct {
	t    *testing.T
	c    *websocket.Conn
	next int
}

func dialRaw(t *testing.T, s *Server, key string) *raw {
	t.Helper()
	h := http.Header{}
	h.Set("X-Tinode-APIKey", key)
	c, _, err := websocket.DefaultDialer.Dial(s.URL(), h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &raw{t: t, c: c}
}

// send writes {name: body} with a fresh id (unless body has none) and
// returns the id.
func (r *raw) send(name string, body map[string]any) string {
	r.t.Helper()
	r.next++
	id := fmt.Sprint(r.next)
	if _, ok := body["id"]; !ok && name != "note" {
		body["id"] = id
	}
	b, _ := json.Marshal(map[string]any{name: body})
	if err := r.c.WriteMessage(websocket.TextMessage, b); err != nil {
		r.t.Fatal(err)
	}
	return id
}

// read returns the next frame's member name and body.
func (r *raw) read() (string, map[string]any) {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, b, err := r.c.ReadMessage()
	if err != nil {
		r.t.Fatal(err)
	}
	var f map[string]map[string]any
	if err := json.Unmarshal(b, &f); err != nil || len(f) != 1 {
		r.t.Fatalf("frame %s: %v", b, err)
	}
	for k, v := range f {
		return k, v
	}
	return "", nil
}

// ctrl reads the next frame, which must be a {ctrl} with the given code.
func (r *raw) ctrl(code int) map[string]any {
	r.t.Helper()
	name, body := r.read()
	if name != "ctrl" || body["code"] != float64(code) {
		r.t.Fatalf("got %s %v, want ctrl %d", name, body, code)
	}
	return body
}

func (r *raw) login(name string) string {
	r.send("hi", map[string]any{"ver": "0.25"})
	r.ctrl(201)
	r.send("acc", map[string]any{"user": "new", "scheme": "basic", "login": true,
		"secret": base64.StdEncoding.EncodeToString([]byte(name + ":secret123"))})
	return r.ctrl(200)["params"].(map[string]any)["user"].(string)
}

func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	cfg.APIKey = "k"
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func TestHandshakeRules(t *testing.T) {
	s := start(t, Config{})
	if _, resp, err := websocket.DefaultDialer.Dial(s.URL(), nil); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Errorf("no api key: %v %v", resp, err)
	}
	r := dialRaw(t, s, "k")
	r.send("login", map[string]any{"scheme": "token", "secret": "x"})
	r.ctrl(409) // command out of sequence: {hi} first
	r.send("hi", map[string]any{"ver": "0.25"})
	if p := r.ctrl(201)["params"].(map[string]any); p["ver"] != Ver {
		t.Errorf("hi params = %v", p)
	}
	r.send("sub", map[string]any{"topic": "new"})
	r.ctrl(401) // authentication required
}

// TestPagesNewestFirst: {get what="data"} answers the newest messages of
// the range first, at most MaxMessageResults whatever the limit, then 208
// with the count; an empty range is 204.
func TestPagesNewestFirst(t *testing.T) {
	s := start(t, Config{MaxMessageResults: 4})
	r := dialRaw(t, s, "k")
	r.login("alice")
	r.send("sub", map[string]any{"topic": "new"})
	grp := r.ctrl(200)["topic"].(string)
	for i := range 10 {
		r.send("pub", map[string]any{"topic": grp, "noecho": true, "content": i})
		if seq := r.ctrl(202)["params"].(map[string]any)["seq"]; seq != float64(i+1) {
			t.Fatalf("seq %v, want %d", seq, i+1)
		}
	}
	r.send("get", map[string]any{"topic": grp, "what": "data", "data": map[string]any{"since": 2, "before": 9, "limit": 100}})
	var seqs []float64
	for {
		name, body := r.read()
		if name == "ctrl" {
			if body["code"] != 208.0 || body["params"].(map[string]any)["count"] != 4.0 {
				t.Errorf("end of page: %v", body)
			}
			break
		}
		seqs = append(seqs, body["seq"].(float64))
	}
	if !slices.Equal(seqs, []float64{8, 7, 6, 5}) {
		t.Errorf("page = %v", seqs)
	}
	r.send("get", map[string]any{"topic": grp, "what": "data", "data": map[string]any{"since": 11}})
	r.ctrl(204)
}

// TestDelLogRows: {get what="del"} counts rows (ranges), so a page may end
// inside a transaction; clear is the highest transaction id in the page.
func TestDelLogRows(t *testing.T) {
	s := start(t, Config{MaxResults: 2})
	r := dialRaw(t, s, "k")
	r.login("alice")
	r.send("sub", map[string]any{"topic": "new"})
	grp := r.ctrl(200)["topic"].(string)
	for range 10 {
		r.send("pub", map[string]any{"topic": grp, "noecho": true, "content": "x"})
		r.ctrl(202)
	}
	r.send("del", map[string]any{"topic": grp, "delseq": []map[string]int{{"low": 1}}})
	r.ctrl(200)
	r.send("del", map[string]any{"topic": grp, "hard": true, "delseq": []map[string]int{{"low": 3, "hi": 5}, {"low": 7}}})
	if del := r.ctrl(200)["params"].(map[string]any)["del"]; del != 2.0 {
		t.Errorf("delete id = %v", del)
	}
	r.send("get", map[string]any{"topic": grp, "what": "del", "del": map[string]any{"since": 1}})
	_, m := r.read()
	if d, _ := json.Marshal(m["del"]); string(d) != `{"clear":2,"delseq":[{"low":1},{"hi":5,"low":3}]}` {
		t.Errorf("page 1 = %s", d)
	}
	r.send("del", map[string]any{"topic": grp, "delseq": []map[string]int{{"low": 9, "hi": 20}}})
	r.ctrl(400) // past the topic's seq
}

// TestDropDelLog: a {del} under DropDelLog is applied and answered ok but
// left out of the delete log; the next one is logged again.
func TestDropDelLog(t *testing.T) {
	s := start(t, Config{})
	r := dialRaw(t, s, "k")
	r.login("alice")
	r.send("sub", map[string]any{"topic": "new"})
	grp := r.ctrl(200)["topic"].(string)
	for range 3 {
		r.send("pub", map[string]any{"topic": grp, "noecho": true, "content": "x"})
		r.ctrl(202)
	}
	s.DropDelLog("", 1)
	r.send("del", map[string]any{"topic": grp, "delseq": []map[string]int{{"low": 1}}})
	r.ctrl(200)
	r.send("del", map[string]any{"topic": grp, "delseq": []map[string]int{{"low": 2}}})
	r.ctrl(200)
	r.send("get", map[string]any{"topic": grp, "what": "del", "del": map[string]any{"since": 1}})
	_, m := r.read()
	if d, _ := json.Marshal(m["del"]); string(d) != `{"clear":2,"delseq":[{"low":2}]}` {
		t.Errorf("delete log = %s", d)
	}
	r.send("get", map[string]any{"topic": grp, "what": "data"})
	var seqs []any
	for {
		k, m := r.read()
		if k != "data" {
			break
		}
		seqs = append(seqs, m["seq"])
	}
	if len(seqs) != 1 || seqs[0] != 3.0 {
		t.Errorf("messages shown: seqs %v, want [3] (1 and 2 deleted)", seqs)
	}
}

// TestCommitTimeoutRefusesUntilUnload: the stored-but-failed publish
// leaves the counter behind, every later publish is refused, and Unload
// evicts the sessions and heals the topic.
func TestCommitTimeoutRefusesUntilUnload(t *testing.T) {
	s := start(t, Config{})
	r := dialRaw(t, s, "k")
	r.login("alice")
	r.send("sub", map[string]any{"topic": "new"})
	grp := r.ctrl(200)["topic"].(string)
	s.CommitTimeout(grp)
	for range 3 {
		r.send("pub", map[string]any{"topic": grp, "noecho": true, "content": "x"})
		r.ctrl(500)
	}
	if got := s.StoredSeqs(grp); !slices.Equal(got, []int64{1}) || s.TopicSeq(grp) != 0 {
		t.Errorf("stored %v, counter %d", got, s.TopicSeq(grp))
	}
	s.Unload(grp)
	if body := r.ctrl(205); body["id"] != nil || body["topic"] != grp {
		t.Errorf("eviction notice = %v", body)
	}
	r.send("pub", map[string]any{"topic": grp, "content": "x"})
	r.ctrl(409) // must attach first
	r.send("sub", map[string]any{"topic": grp})
	r.ctrl(200)
	r.send("pub", map[string]any{"topic": grp, "noecho": true, "content": "x"})
	if seq := r.ctrl(202)["params"].(map[string]any)["seq"]; seq != 2.0 {
		t.Errorf("seq after unload = %v", seq)
	}
}
