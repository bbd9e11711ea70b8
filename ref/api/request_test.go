package api

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// TestQueryNone: a request without parameters reads as an empty Query
// (nil, no map made); one with any parameter is still checked against the
// allowed names.
func TestQueryNone(t *testing.T) {
	for uri, wantErr := range map[string]bool{"/v1/msg/send": false, "/v1/msg/send?": false, "/v1/msg/send?uid=2": true, "/v1/msg/send?a": true} {
		var rc fasthttp.RequestCtx
		rc.Request.SetRequestURI(uri)
		r := &Request{rc: &rc}
		q, err := r.Query()
		if (err != nil) != wantErr {
			t.Fatalf("%s: %v", uri, err)
		}
		if err == nil {
			if q != nil || q.has("uid") {
				t.Fatalf("%s: %v", uri, q)
			}
			if _, ok, err := q.Uint64("limit"); ok || err != nil {
				t.Fatalf("%s: limit %v %v", uri, ok, err)
			}
		}
		if n := testing.AllocsPerRun(10, func() { _, _ = r.Query() }); !wantErr && n != 0 {
			t.Fatalf("%s: %v allocs", uri, n)
		}
	}
}
