package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"imlab/ref/model"
	"imlab/ref/push"
)

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (h *harness) do(method, path, token string, body []byte) answer {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

type errBody struct {
	Error struct {
		Code         string `json:"code"`
		Message      string `json:"message"`
		RetryAfterMS int64  `json:"retry_after_ms"`
	} `json:"error"`
}

func (a answer) errCode(t *testing.T) string {
	t.Helper()
	var e errBody
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("error body %q is not {\"error\":{...}}: %v", a.body, err)
	}
	if e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("error body %q lacks code or message", a.body)
	}
	return e.Error.Code
}

func TestAuthRequired(t *testing.T) {
	h := newHarness(t, nil)
	good := h.token(1, "phone")
	routes := []struct{ method, path string }{
		{"POST", "/v1/msg/send"}, {"GET", "/v1/sync/pull"}, {"POST", "/v1/sync/ack"},
		{"GET", "/v1/conv/pull"}, {"POST", "/v1/group/create"}, {"GET", "/v1/ws"},
		{"GET", "/v1/history"}, {"POST", "/v1/msg/revoke"}, {"POST", "/v1/msg/delete"}, {"POST", "/v1/conv/clear"},
	}
	for _, r := range routes {
		for name, hdr := range map[string]string{
			"missing":      "",
			"basic":        "Basic dXNlcjpwYXNz",
			"empty bearer": "Bearer ",
			"garbage":      "Bearer not.a.token",
			"tampered":     "Bearer " + good[:len(good)-2] + "xx",
		} {
			req, _ := http.NewRequest(r.method, h.url+r.path, strings.NewReader(`{}`))
			if hdr != "" {
				req.Header.Set("Authorization", hdr)
			}
			resp, err := h.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			a := answer{status: resp.StatusCode, header: resp.Header, body: b}
			if a.status != 401 || a.errCode(t) != "unauthenticated" || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s with %s auth: %d %s", r.method, r.path, name, a.status, b)
			}
		}
	}
	if n := h.send.calls(); n != 0 {
		t.Fatalf("sender called %d times without auth", n)
	}
	if n := len(h.pull.snapshot()); n != 0 {
		t.Fatalf("puller called %d times without auth", n)
	}
	// Lower-case scheme is accepted.
	req, _ := http.NewRequest("GET", h.url+"/v1/sync/pull", nil)
	req.Header.Set("Authorization", "bearer "+good)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("lower-case bearer: %d", resp.StatusCode)
	}
}

func TestSendUsesTokenIdentity(t *testing.T) {
	h := newHarness(t, nil)
	a := h.do("POST", "/v1/msg/send", h.token(5, "tab"), []byte(`{"client_msg_id":"c-1","conv_type":1,"to_uid":6,"content":"hi"}`))
	if a.status != 200 {
		t.Fatalf("send: %d %s", a.status, a.body)
	}
	var got map[string]any
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.UseNumber()
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	conv, _ := model.SingleConvID(5, 6)
	want := map[string]string{"msg_id": "99", "msg_id_str": "99", "conv_id": fmt.Sprint(conv), "conv_id_str": fmt.Sprint(conv),
		"conv_seq": "3", "server_time": "1700000000123"}
	if len(got) != len(want) {
		t.Fatalf("answer fields %v, want %v", got, want)
	}
	for k, v := range want {
		if fmt.Sprint(got[k]) != v {
			t.Errorf("%s = %v, want %s", k, got[k], v)
		}
	}
	if len(h.send.sends) != 1 || h.send.sends[0].SenderUID != 5 || h.send.sends[0].DeviceID != "tab" ||
		h.send.sends[0].ToUID != 6 || h.send.sends[0].ClientMsgID != "c-1" || h.send.sends[0].Content != "hi" {
		t.Fatalf("service got %+v", h.send.sends)
	}
	// A body naming a sender is refused: the sender is the token's.
	a = h.do("POST", "/v1/msg/send", h.token(5, "tab"), []byte(`{"client_msg_id":"c-2","conv_type":1,"to_uid":6,"sender_uid":7,"content":"hi"}`))
	if a.status != 400 || a.errCode(t) != "invalid_argument" {
		t.Fatalf("sender_uid in body: %d %s", a.status, a.body)
	}
}

func TestMalformedRequests(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.token(1, "phone")
	big := `{"client_msg_id":"c","conv_type":1,"to_uid":2,"content":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	long := `{"client_msg_id":"c","conv_type":1,"to_uid":2,"content":"` + strings.Repeat("x", model.MaxContentLen+1) + `"}`
	members := make([]string, model.MaxGroupMembers+1)
	for i := range members {
		members[i] = fmt.Sprint(i + 1)
	}
	group501 := `{"group_id":7,"members":[` + strings.Join(members, ",") + `]}`
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"bad json", "POST", "/v1/msg/send", `{"client_msg_id":`, 400, "invalid_argument"},
		{"not json", "POST", "/v1/msg/send", `hello`, 400, "invalid_argument"},
		{"empty body", "POST", "/v1/msg/send", ``, 400, "invalid_argument"},
		{"array body", "POST", "/v1/msg/send", `[1,2]`, 400, "invalid_argument"},
		{"trailing data", "POST", "/v1/msg/send", `{"client_msg_id":"c","conv_type":1,"to_uid":2} {}`, 400, "invalid_argument"},
		{"unknown field", "POST", "/v1/msg/send", `{"client_msg_id":"c","conv_type":1,"to_uid":2,"x":1}`, 400, "invalid_argument"},
		{"wrong type", "POST", "/v1/msg/send", `{"client_msg_id":"c","conv_type":"1","to_uid":2}`, 400, "invalid_argument"},
		{"negative uid", "POST", "/v1/msg/send", `{"client_msg_id":"c","conv_type":1,"to_uid":-2}`, 400, "invalid_argument"},
		{"fraction uid", "POST", "/v1/msg/send", `{"client_msg_id":"c","conv_type":1,"to_uid":2.5}`, 400, "invalid_argument"},
		{"conv_type 3", "POST", "/v1/msg/send", `{"client_msg_id":"c","conv_type":3,"to_uid":2}`, 400, "invalid_argument"},
		{"conv_type 256", "POST", "/v1/msg/send", `{"client_msg_id":"c","conv_type":256,"to_uid":2}`, 400, "invalid_argument"},
		{"no client_msg_id", "POST", "/v1/msg/send", `{"conv_type":1,"to_uid":2}`, 400, "invalid_argument"},
		{"to self", "POST", "/v1/msg/send", `{"client_msg_id":"c","conv_type":1,"to_uid":1}`, 400, "invalid_argument"},
		{"group with to_uid", "POST", "/v1/msg/send", `{"client_msg_id":"c","conv_type":2,"group_id":7,"to_uid":2}`, 400, "invalid_argument"},
		{"content too long", "POST", "/v1/msg/send", long, 413, "too_large"},
		{"oversized body", "POST", "/v1/msg/send", big, 413, "too_large"},
		{"query on send", "POST", "/v1/msg/send?uid=2", `{"client_msg_id":"c","conv_type":1,"to_uid":2}`, 400, "invalid_argument"},
		{"limit 0", "GET", "/v1/sync/pull?limit=0", ``, 400, "invalid_argument"},
		{"limit 501", "GET", "/v1/sync/pull?limit=501", ``, 400, "invalid_argument"},
		{"limit abc", "GET", "/v1/sync/pull?limit=abc", ``, 400, "invalid_argument"},
		{"negative cursor", "GET", "/v1/sync/pull?cursor=-1", ``, 400, "invalid_argument"},
		{"cursor overflow", "GET", "/v1/sync/pull?cursor=18446744073709551616", ``, 400, "invalid_argument"},
		{"full=2", "GET", "/v1/sync/pull?full=2", ``, 400, "invalid_argument"},
		{"uid param", "GET", "/v1/sync/pull?uid=2", ``, 400, "invalid_argument"},
		{"repeated cursor", "GET", "/v1/sync/pull?cursor=1&cursor=2", ``, 400, "invalid_argument"},
		{"conv limit 51", "GET", "/v1/conv/pull?conv_id=7&limit=51", ``, 400, "invalid_argument"},
		{"conv missing id", "GET", "/v1/conv/pull", ``, 400, "invalid_argument"},
		{"conv id 0", "GET", "/v1/conv/pull?conv_id=0", ``, 400, "invalid_argument"},
		{"conv id malformed 1:1", "GET", "/v1/conv/pull?conv_id=9223372036854775808", ``, 400, "invalid_argument"},
		{"ack missing", "POST", "/v1/sync/ack", `{}`, 400, "invalid_argument"},
		{"ack string", "POST", "/v1/sync/ack", `{"pull_seq":"5"}`, 400, "invalid_argument"},
		{"ack negative", "POST", "/v1/sync/ack", `{"pull_seq":-5}`, 400, "invalid_argument"},
		{"ack extra", "POST", "/v1/sync/ack", `{"pull_seq":5,"uid":2}`, 400, "invalid_argument"},
		{"group of 501", "POST", "/v1/group/create", group501, 400, "invalid_argument"},
		{"group empty", "POST", "/v1/group/create", `{"group_id":7,"members":[]}`, 400, "invalid_argument"},
		{"group id 0", "POST", "/v1/group/create", `{"group_id":0,"members":[1]}`, 400, "invalid_argument"},
		{"group member 0", "POST", "/v1/group/create", `{"group_id":7,"members":[1,0]}`, 400, "invalid_argument"},
		{"group member too big", "POST", "/v1/group/create", `{"group_id":7,"members":[1,2147483648]}`, 400, "invalid_argument"},
		{"wrong method", "GET", "/v1/msg/send", ``, 405, "method_not_allowed"},
		{"unknown route", "GET", "/v1/nope", ``, 404, "not_found"},
		{"history absent", "GET", "/v1/history?conv_id=7&from_seq=1", ``, 501, "not_implemented"},
		{"revoke absent", "POST", "/v1/msg/revoke", `{"conv_id":7,"conv_seq":1}`, 501, "not_implemented"},
	}
	for _, c := range cases {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		a := h.do(c.method, c.path, tok, body)
		if a.status != c.status || a.errCode(t) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, a.status, truncate(string(a.body), 200), c.status, c.code)
		}
		if ct := a.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: content type %q", c.name, ct)
		}
	}
	if n := h.send.calls(); n != 0 {
		t.Fatalf("sender called %d times by malformed requests", n)
	}
	if calls := h.pull.snapshot(); len(calls) != 0 {
		t.Fatalf("puller called by malformed requests: %+v", calls)
	}
	// A body over MaxBodyBytes but within MaxReadBodyBytes is read whole and
	// answered 413 JSON, so the client always gets the answer.
	a := h.do("POST", "/v1/sync/ack", tok, bytes.Repeat([]byte(" "), MaxReadBodyBytes))
	if a.status != 413 || a.errCode(t) != "too_large" {
		t.Fatalf("oversized body: %d %s", a.status, a.body)
	}
	// A body beyond MaxReadBodyBytes is never buffered: the server answers
	// 413 at once and closes, so the client sees the 413 or, when it is
	// still writing, a reset connection; never a 2xx and never a call.
	req, err := http.NewRequest("POST", h.url+"/v1/sync/ack", bytes.NewReader(bytes.Repeat([]byte(" "), 4*MaxReadBodyBytes)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if resp, err := h.client.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Fatalf("huge body: status %d", resp.StatusCode)
		}
	}
	if calls := h.pull.snapshot(); len(calls) != 0 {
		t.Fatalf("puller called by oversized bodies: %+v", calls)
	}
}

func TestErrorMapping(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.token(1, "phone")
	body := []byte(`{"client_msg_id":"c","conv_type":2,"group_id":7,"content":"x"}`)
	cases := []struct {
		err    error
		status int
		code   string
		secret string // must not appear in the answer
	}{
		{fmt.Errorf("%w: not a member of group 7", model.ErrForbidden), 403, "permission_denied", ""},
		{fmt.Errorf("%w: no group 7", model.ErrNotFound), 404, "not_found", ""},
		{fmt.Errorf("%w: group exists with other members", model.ErrConflict), 409, "conflict", ""},
		{fmt.Errorf("%w: content", model.ErrTooLarge), 413, "too_large", ""},
		{fmt.Errorf("%w: nope", model.ErrInvalid), 400, "invalid_argument", ""},
		{fmt.Errorf("%w: dial tcp 10.0.0.1:3306: refused", model.ErrUnavailable), 503, "unavailable", "10.0.0.1"},
		{fmt.Errorf("queue full: %w", context.DeadlineExceeded), 503, "unavailable", "queue full"},
		{errors.New("Error 1062: Duplicate entry secret-row"), 500, "internal", "secret-row"},
		{&model.RateLimitError{RetryAfter: 1500 * time.Millisecond}, 429, "rate_limited", ""},
	}
	for _, c := range cases {
		h.send.err = c.err
		a := h.do("POST", "/v1/msg/send", tok, body)
		if a.status != c.status || a.errCode(t) != c.code {
			t.Errorf("%v: %d %s, want %d %s", c.err, a.status, a.body, c.status, c.code)
		}
		if c.secret != "" && bytes.Contains(a.body, []byte(c.secret)) {
			t.Errorf("%v: answer leaks %q: %s", c.err, c.secret, a.body)
		}
		if c.status == 429 {
			if ra := a.header.Get("Retry-After"); ra != "2" {
				t.Errorf("Retry-After = %q, want 2", ra)
			}
			var e errBody
			_ = json.Unmarshal(a.body, &e)
			if e.Error.RetryAfterMS != 1500 {
				t.Errorf("retry_after_ms = %d", e.Error.RetryAfterMS)
			}
		}
	}
	// Pull errors: cursor beyond served on ack, rate limit on pull.
	h.pull.err = &model.RateLimitError{RetryAfter: 200 * time.Millisecond}
	a := h.do("GET", "/v1/sync/pull", tok, nil)
	if a.status != 429 || a.errCode(t) != "rate_limited" || a.header.Get("Retry-After") != "1" {
		t.Fatalf("pull rate limit: %d %v %s", a.status, a.header, a.body)
	}
	h.pull.err = nil
	a = h.do("POST", "/v1/sync/ack", tok, []byte(`{"pull_seq":10}`))
	if a.status != 409 || a.errCode(t) != "cursor_beyond_served" {
		t.Fatalf("ack beyond served: %d %s", a.status, a.body)
	}
}

func TestPanicIsContained(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.token(1, "phone")
	h.send.panicky = true
	a := h.do("POST", "/v1/msg/send", tok, []byte(`{"client_msg_id":"c","conv_type":1,"to_uid":2}`))
	if a.status != 500 || a.errCode(t) != "internal" || bytes.Contains(a.body, []byte("fake send panic")) {
		t.Fatalf("panic answer: %d %s", a.status, a.body)
	}
	h.send.panicky = false
	a = h.do("POST", "/v1/msg/send", tok, []byte(`{"client_msg_id":"c","conv_type":1,"to_uid":2}`))
	if a.status != 200 {
		t.Fatalf("after panic: %d %s", a.status, a.body)
	}
	m := h.do("GET", "/metrics", "", nil)
	if !bytes.Contains(m.body, []byte("imlab_http_panics_total 1")) {
		t.Fatalf("panic not counted:\n%s", m.body)
	}
	if !bytes.Contains(m.body, []byte(`imlab_http_requests_total{code="500",route="send"} 1`)) {
		t.Fatalf("500 not counted by route")
	}
}

func TestPullParsingAndEncoding(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.token(9, "pad")
	created := time.UnixMilli(1_700_000_000_456).UTC()
	h.pull.res = model.PullResult{
		Msgs: []model.InboxEntry{
			{UID: 9, Seq: 4, MsgID: 1 << 60, ConvID: 1<<63 | 1<<31 | 9, ConvType: 1, ConvSeq: 2, SenderUID: 1, CreatedAt: created, Content: "hé \"q\" \n<\x01>"},
			{UID: 9, Seq: 5, MsgID: 77, ConvID: 7, ConvType: 2, ConvSeq: 1, SenderUID: 3, CreatedAt: created, Missing: true},
		},
		HasMore: true, NextCursor: 5, Truncated: true, Source: "cache",
		Summary: []model.ConvSummary{{ConvID: 7, ConvType: 2, Unread: 100001, MinSeq: 5, MaxSeq: 100005}},
	}
	a := h.do("GET", "/v1/sync/pull?cursor=3&limit=2&full=1", tok, nil)
	if a.status != 200 {
		t.Fatalf("pull: %d %s", a.status, a.body)
	}
	if a.header.Get("X-Imlab-Source") != "cache" {
		t.Errorf("source header %q", a.header.Get("X-Imlab-Source"))
	}
	type summary struct {
		model.ConvSummary
		ConvIDStr string `json:"conv_id_str"`
	}
	var got struct {
		Msgs       []push.Item `json:"msgs"`
		HasMore    bool        `json:"has_more"`
		NextCursor uint64      `json:"next_cursor"`
		Truncated  bool        `json:"truncated"`
		Summary    []summary   `json:"summary"`
	}
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
	if len(got.Msgs) != 2 || !got.HasMore || got.NextCursor != 5 || !got.Truncated || len(got.Summary) != 1 ||
		got.Summary[0].ConvSummary != h.pull.res.Summary[0] || got.Summary[0].ConvIDStr != "7" {
		t.Fatalf("pull answer %+v", got)
	}
	m0 := got.Msgs[0]
	if m0.Seq != 4 || m0.MsgID != 1<<60 || m0.MsgIDStr != "1152921504606846976" || m0.ConvID != 1<<63|1<<31|9 ||
		m0.ConvIDStr != "9223372039002259465" || m0.ConvType != 1 || m0.ConvSeq != 2 ||
		m0.SenderUID != 1 || m0.CreatedAt != 1_700_000_000_456 || m0.Content != "hé \"q\" \n<\x01>" || m0.Missing ||
		m0.Type != "" || m0.PrevSeq != 0 { // a pull item is not a push frame
		t.Fatalf("item 0: %+v", m0)
	}
	if !got.Msgs[1].Missing || got.Msgs[1].Content != "" {
		t.Fatalf("item 1: %+v", got.Msgs[1])
	}
	// Defaults and parsing reach the service with the token's identity.
	h.pull.res = model.PullResult{}
	a = h.do("GET", "/v1/sync/pull", tok, nil)
	if a.status != 200 || string(a.body) != `{"msgs":[],"has_more":false,"next_cursor":0}` {
		t.Fatalf("empty pull: %d %s", a.status, a.body)
	}
	h.do("GET", "/v1/conv/pull?conv_id=7&cursor=11", tok, nil)
	h.do("GET", "/v1/sync/pull?cursor=0&limit=500&full=false", tok, nil)
	calls := h.pull.snapshot()
	if len(calls) != 4 {
		t.Fatalf("calls %+v", calls)
	}
	for _, c := range calls {
		if c.uid != 9 || c.did != "pad" {
			t.Fatalf("call with identity %d/%s", c.uid, c.did)
		}
	}
	if c := calls[0]; c.cursor == nil || *c.cursor != 3 || c.limit != 2 || !c.full {
		t.Fatalf("call 0 %+v", c)
	}
	if c := calls[1]; c.cursor != nil || c.limit != 0 || c.full {
		t.Fatalf("call 1 %+v", c)
	}
	if c := calls[2]; c.kind != "conv" || c.conv != 7 || *c.cursor != 11 || c.limit != 0 {
		t.Fatalf("call 2 %+v", c)
	}
	if c := calls[3]; c.cursor == nil || *c.cursor != 0 || c.limit != 500 || c.full {
		t.Fatalf("call 3 %+v", c)
	}
}

func TestAckAndGroup(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.token(2, "phone")
	h.pull.served[key(2, "phone")] = 8
	a := h.do("POST", "/v1/sync/ack", tok, []byte(`{"pull_seq":8}`))
	if a.status != 200 || string(a.body) != `{"pull_seq":8}` {
		t.Fatalf("ack: %d %s", a.status, a.body)
	}
	a = h.do("POST", "/v1/sync/ack", tok, []byte(`{"pull_seq":3}`))
	if a.status != 200 || string(a.body) != `{"pull_seq":8}` {
		t.Fatalf("ack back: %d %s", a.status, a.body)
	}
	a = h.do("POST", "/v1/group/create", tok, []byte(`{"group_id":7,"members":[1,2,3]}`))
	if a.status != 200 || string(a.body) != `{}` {
		t.Fatalf("group: %d %s", a.status, a.body)
	}
	if len(h.send.groups) != 1 || fmt.Sprint(h.send.groups[0]) != "[7 1 2 3]" {
		t.Fatalf("groups %v", h.send.groups)
	}
}

func TestExtensionRoutes(t *testing.T) {
	h := newHarness(t, func(_ *Config, d *Deps) {
		d.History.Get = func(_ context.Context, c Caller, r *Request) (any, error) {
			conv, _, _, err := seqRange(r, false)
			if err != nil {
				return nil, err
			}
			return map[string]any{"uid": c.UID, "conv_id": conv}, nil
		}
		d.Extra = []Route{{Method: "POST", Path: "/v1/x/echo", Name: "echo", Handle: func(_ context.Context, c Caller, r *Request) (any, error) {
			var b struct {
				N uint64 `json:"n"`
			}
			if err := r.DecodeJSON(&b); err != nil {
				return nil, err
			}
			return map[string]uint64{"n": b.N, "uid": c.UID}, nil
		}}}
	})
	tok := h.token(4, "phone")
	a := h.do("GET", "/v1/history?conv_id=7&from_seq=1", tok, nil)
	if a.status != 200 || string(a.body) != `{"conv_id":7,"uid":4}` {
		t.Fatalf("history: %d %s", a.status, a.body)
	}
	a = h.do("GET", "/v1/history?conv_id=7&uid=5", tok, nil)
	if a.status != 400 {
		t.Fatalf("history with uid: %d %s", a.status, a.body)
	}
	a = h.do("POST", "/v1/x/echo", tok, []byte(`{"n":3}`))
	if a.status != 200 || string(a.body) != `{"n":3,"uid":4}` {
		t.Fatalf("echo: %d %s", a.status, a.body)
	}
	a = h.do("POST", "/v1/x/echo", tok, []byte(`{"n":3,"m":1}`))
	if a.status != 400 {
		t.Fatalf("echo unknown field: %d %s", a.status, a.body)
	}
	if _, err := New(DefaultConfig(), Deps{Auth: h.auth, Send: h.send, Pull: h.pull, Registry: h.reg,
		Extra: []Route{{Method: "GET", Path: "/v1/sync/pull", Name: "dup", Handle: func(context.Context, Caller, *Request) (any, error) { return nil, nil }}}}); err == nil {
		t.Fatal("duplicate route accepted")
	}
}

func TestHealthAndMetrics(t *testing.T) {
	h := newHarness(t, nil)
	a := h.do("GET", "/healthz", "", nil)
	if a.status != 200 || string(a.body) != `{"status":"ok"}` {
		t.Fatalf("healthz: %d %s", a.status, a.body)
	}
	h.do("GET", "/v1/sync/pull", h.token(1, "p"), nil)
	m := h.do("GET", "/metrics", "", nil)
	if m.status != 200 || !bytes.Contains(m.body, []byte(`imlab_http_requests_total{code="200",route="pull"} 1`)) ||
		!bytes.Contains(m.body, []byte(`imlab_http_request_duration_seconds_count{route="pull"} 1`)) {
		t.Fatalf("metrics: %d\n%s", m.status, m.body)
	}
	if a := h.do("POST", "/healthz", "", nil); a.status != 405 || a.header.Get("Allow") != "GET" {
		t.Fatalf("POST healthz: %d %v", a.status, a.header)
	}
}

// TestRouteMetricsResolvedOnce: a route's series are kept after first use
// and go on counting; a series appears only once a request used it; codes
// and routes stay apart, and requests outside every route count as
// "unknown".
func TestRouteMetricsResolvedOnce(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.token(1, "p")
	for range 3 {
		h.do("GET", "/v1/sync/pull", tok, nil)
	}
	h.do("GET", "/v1/sync/pull?bogus=1", tok, nil)
	h.do("GET", "/v1/nowhere", tok, nil)
	h.do("GET", "/v1/nowhere", tok, nil)
	m := h.do("GET", "/metrics", "", nil)
	for _, want := range []string{
		`imlab_http_requests_total{code="200",route="pull"} 3`,
		`imlab_http_requests_total{code="400",route="pull"} 1`,
		`imlab_http_requests_total{code="404",route="unknown"} 2`,
		`imlab_http_request_duration_seconds_count{route="pull"} 4`,
		`imlab_http_request_duration_seconds_count{route="unknown"} 2`,
	} {
		if !bytes.Contains(m.body, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, unused := range []string{`route="send"`, `route="unparsed"`, `code="500"`} {
		if bytes.Contains(m.body, []byte(unused)) {
			t.Errorf("metrics show %s before any request used it", unused)
		}
	}
}

// A ws send frame embeds the send body: a wrongly typed field is named by
// its JSON name, as in the HTTP body, not by the Go path to it.
func TestFrameFieldErrorsNameTheJSONField(t *testing.T) {
	for _, body := range []string{
		`{"type":"send","client_msg_id":"c","conv_type":2,"group_id":true}`,
		`{"type":"send","client_msg_id":"c","conv_type":2,"group_id":"07"}`,
		`{"type":"send","client_msg_id":"c","conv_type":"2","group_id":7}`,
	} {
		var f sendFrame
		err := decodeStrict([]byte(body), &f)
		if err == nil {
			t.Fatalf("%s: accepted", body)
		}
		if msg := err.Error(); strings.Contains(msg, "sendBody") || !strings.Contains(msg, "field ") {
			t.Fatalf("%s: %q", body, msg)
		}
	}
}
