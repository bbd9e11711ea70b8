package api

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"imlab/ref/model"
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

// TestSendResultLen: the longest send answer fits the handler's stack
// buffer, so a send's reply does not grow it.
func TestSendResultLen(t *testing.T) {
	for _, r := range []model.SendResult{
		{MsgID: math.MaxUint64, ConvID: math.MaxUint64, ConvSeq: math.MaxUint64, ServerTime: time.UnixMilli(math.MinInt64)},
		{MsgID: math.MaxUint64, ConvID: math.MaxUint64, ConvSeq: math.MaxUint64, ServerTime: time.UnixMilli(math.MaxInt64)},
	} {
		var buf [sendResultLen]byte
		out := appendSendResult(buf[:0], nil, r)
		if len(out) > sendResultLen || &out[0] != &buf[0] {
			t.Fatalf("%d bytes for %s, buffer %d", len(out), out, sendResultLen)
		}
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil || len(m) != 6 {
			t.Fatalf("%s: %v", out, err)
		}
		for _, k := range []string{"msg_id", "conv_id"} {
			if n, ok := m[k].(json.Number); !ok || m[k+"_str"] != string(n) {
				t.Fatalf("%s: %s and %s differ", out, k, k+"_str")
			}
		}
	}
}
