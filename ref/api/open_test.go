package api

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"imlab/ref/model"
)

// Open routes answer without a token, GET only, with an empty query, and
// map errors like every other route.
func TestOpenRoutes(t *testing.T) {
	var fail atomic.Bool
	h := newHarness(t, func(_ *Config, d *Deps) {
		d.Open = []OpenRoute{{Path: "/v1/lab/lag", Name: "lag", Handle: func(context.Context) (any, error) {
			if fail.Load() {
				return nil, fmt.Errorf("%w: no queue here", model.ErrNotFound)
			}
			return map[string]int{"records": 3}, nil
		}}}
	})
	a := h.do("GET", "/v1/lab/lag", "", nil)
	if a.status != 200 || string(a.body) != `{"records":3}` {
		t.Fatalf("lag: %d %s", a.status, a.body)
	}
	if a = h.do("GET", "/v1/lab/lag?x=1", "", nil); a.status != 400 {
		t.Fatalf("lag with a query: %d %s", a.status, a.body)
	}
	if a = h.do("POST", "/v1/lab/lag", "", []byte(`{}`)); a.status != 405 {
		t.Fatalf("lag POST: %d %s", a.status, a.body)
	}
	fail.Store(true)
	if a = h.do("GET", "/v1/lab/lag", "", nil); a.status != 404 || a.errCode(t) != "not_found" {
		t.Fatalf("lag error: %d %s", a.status, a.body)
	}
	ok := OpenRoute{Path: "/v1/lab/ok", Name: "ok", Handle: func(context.Context) (any, error) { return nil, nil }}
	if _, err := New(DefaultConfig(), Deps{Auth: h.auth, Send: h.send, Pull: h.pull, Registry: prometheus.NewRegistry(), Open: []OpenRoute{ok}}); err != nil {
		t.Fatalf("good open route refused: %v", err)
	}
	for _, bad := range []OpenRoute{
		{Path: "/lab/lag", Name: "x", Handle: func(context.Context) (any, error) { return nil, nil }},
		{Path: "/v1/sync/pull", Name: "x", Handle: func(context.Context) (any, error) { return nil, nil }},
		{Path: "/v1/x", Name: "x"},
	} {
		if _, err := New(DefaultConfig(), Deps{Auth: h.auth, Send: h.send, Pull: h.pull, Registry: prometheus.NewRegistry(), Open: []OpenRoute{bad}}); err == nil {
			t.Fatalf("open route %+v accepted", bad)
		}
	}
}
