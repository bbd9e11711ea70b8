package api

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"imlab/ref/history"
	"imlab/ref/model"
)

type fakeHistory struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeHistory) rec(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeHistory) History(_ context.Context, uid, conv, from, to uint64) ([]history.HistoryItem, error) {
	f.rec(fmt.Sprintf("history %d %d %d %d", uid, conv, from, to))
	if conv == 8 {
		return nil, fmt.Errorf("%w: not a member", model.ErrForbidden)
	}
	return []history.HistoryItem{{ConvSeq: from, MsgID: 9, SenderUID: 1, CreatedAt: 5, Content: "x"}, {ConvSeq: from + 1, Tombstone: true}}, nil
}
func (f *fakeHistory) Revoke(_ context.Context, uid, conv, seq uint64) error {
	f.rec(fmt.Sprintf("revoke %d %d %d", uid, conv, seq))
	return nil
}
func (f *fakeHistory) Delete(_ context.Context, uid, conv, seq uint64) error {
	f.rec(fmt.Sprintf("delete %d %d %d", uid, conv, seq))
	return nil
}
func (f *fakeHistory) Clear(_ context.Context, uid, conv uint64) (uint64, error) {
	f.rec(fmt.Sprintf("clear %d %d", uid, conv))
	return 42, nil
}

func TestHistoryRoutes(t *testing.T) {
	fh := &fakeHistory{}
	h := newHarness(t, func(_ *Config, d *Deps) { d.History = HistoryRoutes(fh) })
	tok := h.token(3, "phone")
	ok := []struct{ method, path, body, want string }{
		{"GET", "/v1/history?conv_id=7&from_seq=4&to_seq=5", "", `{"msgs":[{"conv_seq":4,"msg_id":9,"sender_uid":1,"created_at":5,"content":"x","msg_id_str":"9"},{"conv_seq":5,"msg_id":0,"sender_uid":0,"created_at":0,"content":"","tombstone":true,"msg_id_str":"0"}]}`},
		{"POST", "/v1/msg/revoke", `{"conv_id":7,"conv_seq":4}`, `{}`},
		{"POST", "/v1/msg/delete", `{"conv_id":7,"conv_seq":4}`, `{}`},
		{"POST", "/v1/conv/clear", `{"conv_id":7}`, `{"min_seq":42}`},
		// conv_id as the string of its digits (a double-only client's form).
		{"POST", "/v1/msg/revoke", `{"conv_id":"7","conv_seq":4}`, `{}`},
		{"POST", "/v1/conv/clear", `{"conv_id":"7"}`, `{"min_seq":42}`},
	}
	for _, c := range ok {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		a := h.do(c.method, c.path, tok, body)
		if a.status != 200 || string(a.body) != c.want {
			t.Errorf("%s %s: %d %s", c.method, c.path, a.status, a.body)
		}
	}
	bad := []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/v1/history?conv_id=7", "", 400},
		{"GET", "/v1/history?conv_id=7&from_seq=5&to_seq=4", "", 400},
		{"GET", "/v1/history?conv_id=7&from_seq=1&uid=9", "", 400},
		{"GET", "/v1/history?conv_id=8&from_seq=1", "", 403},
		{"POST", "/v1/msg/revoke", `{"conv_id":7}`, 400},
		{"POST", "/v1/msg/revoke", `{"conv_id":0,"conv_seq":1}`, 400},
		{"POST", "/v1/msg/delete", `{"conv_id":7,"conv_seq":1,"uid":2}`, 400},
		{"POST", "/v1/conv/clear", `{"conv_id":"7x"}`, 400},
		{"POST", "/v1/conv/clear", `{"conv_id":"0"}`, 400},
		{"POST", "/v1/msg/delete", `{"conv_id":"-7","conv_seq":1}`, 400},
	}
	before := len(fh.calls)
	for _, c := range bad {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		if a := h.do(c.method, c.path, tok, body); a.status != c.status {
			t.Errorf("%s %s %s: %d %s, want %d", c.method, c.path, c.body, a.status, a.body, c.status)
		}
	}
	if got := len(fh.calls) - before; got != 1 { // only the 403 case reaches the service
		t.Errorf("bad requests reached the service %d times: %v", got, fh.calls[before:])
	}
	want := []string{"history 3 7 4 5", "revoke 3 7 4", "delete 3 7 4", "clear 3 7", "revoke 3 7 4", "clear 3 7"}
	for i, w := range want {
		if fh.calls[i] != w {
			t.Errorf("call %d = %q, want %q", i, fh.calls[i], w)
		}
	}
}
