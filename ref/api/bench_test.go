package api

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"imlab/internal/budget"
	"imlab/ref/auth"
	"imlab/ref/model"
)

// benchServer serves the API over an in-memory listener with fake services,
// so the figures are the HTTP surface's own cost (parse, auth, JSON,
// metrics), not storage.
func benchServer(b *testing.B) (*fasthttp.Client, string) {
	b.Helper()
	acfg := auth.DefaultConfig()
	acfg.Secret = testSecret
	a, err := auth.New(acfg)
	if err != nil {
		b.Fatal(err)
	}
	entries := make([]model.InboxEntry, 100)
	for i := range entries {
		entries[i] = model.InboxEntry{UID: 2, Seq: uint64(i + 1), MsgID: uint64(1<<40 + i), ConvID: 1<<63 | 1<<31 | 2,
			ConvType: 1, ConvSeq: uint64(i + 1), SenderUID: 1, CreatedAt: time.Now(), Content: "hello, this is a 40-byte message body!!"}
	}
	srv, err := New(DefaultConfig(), Deps{
		Auth:     a,
		Send:     &nopSender{},
		Pull:     &nopPuller{res: model.PullResult{Msgs: entries, NextCursor: 100}},
		Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		b.Fatal(err)
	}
	ln := fasthttputil.NewInmemoryListener()
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = ln.Close() })
	tok, err := a.Mint(2, "phone", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	c := &fasthttp.Client{Dial: func(string) (net.Conn, error) { return ln.Dial() }, MaxConnsPerHost: 256}
	return c, tok
}

type nopSender struct{}

func (nopSender) Send(_ context.Context, r model.SendRequest) (model.SendResult, error) {
	return model.SendResult{MsgID: 1, ConvID: r.ConvID(), ConvSeq: 1, ServerTime: time.Now()}, nil
}
func (nopSender) CreateGroup(context.Context, uint64, []uint64) error { return nil }

type nopPuller struct{ res model.PullResult }

func (p *nopPuller) Pull(context.Context, uint64, string, *uint64, int, bool) (model.PullResult, error) {
	return p.res, nil
}
func (p *nopPuller) ConvPull(context.Context, uint64, string, uint64, uint64, int) (model.PullResult, error) {
	return p.res, nil
}
func (p *nopPuller) Ack(_ context.Context, _ uint64, _ string, s uint64) (uint64, error) {
	return s, nil
}
func (p *nopPuller) MarkServed(context.Context, uint64, string, uint64) error { return nil }
func (p *nopPuller) Register(context.Context, uint64, string) error           { return nil }
func (p *nopPuller) MarkServedAck(_ context.Context, _ uint64, _ string, s uint64) (uint64, error) {
	return s, nil
}

func benchDo(b *testing.B, method, uri string, body []byte) {
	c, tok := benchServer(b)
	b.ReportAllocs()
	b.SetParallelism(32) // 32 x GOMAXPROCS clients in flight: throughput, not one client's latency
	b.ResetTimer()
	cpu0 := budget.ReadCPU(0)
	defer func() {
		b.ReportMetric(float64((budget.ReadCPU(0).Self-cpu0.Self).Nanoseconds())/1e3/float64(b.N), "go-µs/req")
	}()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		for pb.Next() {
			req.Reset()
			req.SetRequestURI(uri)
			req.Header.SetMethod(method)
			req.Header.Set("Authorization", "Bearer "+tok)
			if body != nil {
				req.SetBody(body)
			}
			if err := c.Do(req, resp); err != nil {
				b.Fatal(err)
			}
			if resp.StatusCode() != 200 {
				b.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
			}
		}
	})
}

// BenchmarkAPISend: POST /v1/msg/send with a no-op sender. go-µs/req is
// this process's CPU (getrusage) per request, client and server together:
// the HTTP layer's cost of one send without storage.
func BenchmarkAPISend(b *testing.B) {
	benchDo(b, "POST", "http://imlab/v1/msg/send", []byte(`{"client_msg_id":"c-1","conv_type":1,"to_uid":3,"content":"hello, this is a 40-byte message body!!"}`))
}

// BenchmarkAPIPull100: GET /v1/sync/pull answering 100 items.
func BenchmarkAPIPull100(b *testing.B) {
	benchDo(b, "GET", "http://imlab/v1/sync/pull?limit=100", nil)
}

// BenchmarkAPISendHandler: one POST /v1/msg/send through the server's
// handler alone (no connection, no client), a no-op sender: the exact
// per-request work and allocations of the API layer (routing, auth,
// strict decode, encode, metrics).
func BenchmarkAPISendHandler(b *testing.B) {
	h, tok := nopHandler(b)
	var rc fasthttp.RequestCtx
	sendRequest(&rc, tok, []byte(`{"client_msg_id":"c-1","conv_type":1,"to_uid":3,"content":"hello, this is a 40-byte message body!!"}`))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rc.Response.Reset()
		h(&rc)
		if rc.Response.StatusCode() != 200 {
			b.Fatalf("status %d: %s", rc.Response.StatusCode(), rc.Response.Body())
		}
	}
}
