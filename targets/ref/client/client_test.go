package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"imlab/targets/ref/client"
	"imlab/targets/ref/noop"
)

const secret = "client-test-secret-0123456789"

func TestConfigPipelineLimits(t *testing.T) {
	for _, c := range []struct {
		n int
		d time.Duration
	}{{-1, 0}, {client.MaxPipeline + 1, 0}, {8, -time.Microsecond}, {8, client.MaxPipelineDelay + 1}} {
		cfg := client.DefaultConfig()
		cfg.Target, cfg.Secret, cfg.Pipeline, cfg.PipelineDelay = "http://127.0.0.1:1", secret, c.n, c.d
		if _, err := client.New(cfg); !errors.Is(err, client.ErrInvalid) {
			t.Fatalf("pipeline %d delay %s: %v, want ErrInvalid", c.n, c.d, err)
		}
	}
}

// Both transports warm their pool and answer many concurrent sends, each
// with its own answer.
func TestPooledAndPipelinedSends(t *testing.T) {
	srv, err := noop.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, pipeline := range []int{0, 8} {
		cfg := client.DefaultConfig()
		cfg.Target, cfg.Secret, cfg.MaxConns, cfg.Pipeline = srv.URL(), secret, 4, pipeline
		if pipeline > 0 {
			cfg.PipelineDelay = 100 * time.Microsecond
		}
		cl, err := client.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Warm(context.Background(), 4); err != nil {
			t.Fatalf("pipeline %d: warm: %v", pipeline, err)
		}
		tok, err := cl.Token(1, "d")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ack, err := cl.Send(tok, &client.SendReq{ClientMsgID: "c-" + strconv.Itoa(i), ConvType: 1, ToUID: 2, Content: "x"})
				if err == nil && ack.MsgID != 1 {
					err = errors.New("unexpected ack")
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("pipeline %d: %v", pipeline, err)
		}
		cl.Close()
	}
}

// Warm fails, with a transport error, when nothing answers.
func TestWarmNothingListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	for _, pipeline := range []int{0, 4} {
		cfg := client.DefaultConfig()
		cfg.Target, cfg.Secret, cfg.MaxConns, cfg.Pipeline, cfg.Timeout = "http://"+addr, secret, 2, pipeline, time.Second
		cl, err := client.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = cl.Warm(context.Background(), 2)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != 0 {
			t.Fatalf("pipeline %d: warm against a closed port: %v", pipeline, err)
		}
	}
}

// BenchmarkSend: one pipelined client against the no-op endpoint, many
// goroutines; allocations per send are the figure to watch (-benchmem).
func BenchmarkSend(b *testing.B) {
	srv, err := noop.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	cfg := client.DefaultConfig()
	cfg.Target, cfg.Secret, cfg.MaxConns, cfg.Pipeline = srv.URL(), secret, 2, 256
	cl, err := client.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := cl.Token(1, "d")
	if err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(64)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := client.SendReq{ClientMsgID: "c-1", ConvType: 1, ToUID: 2, Content: "some sixty-four bytes of message content, more or less, to send."}
		for pb.Next() {
			if _, err := cl.Send(tok, &req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// QueueLag asks for a measurement of now, and reads the snapshot route of a
// server that has only that one; a server with neither answers 404.
func TestQueueLagPrefersTheFreshRoute(t *testing.T) {
	for _, c := range []struct {
		name   string
		routes map[string]string
		want   int64 // records of group g; -1: a 404
	}{
		{"both", map[string]string{client.LagNowPath: `{"records":{"g":7}}`, client.LagPath: `{"records":{"g":1}}`}, 7},
		{"snapshot only", map[string]string{client.LagPath: `{"records":{"g":1}}`}, 1},
		{"neither", map[string]string{}, -1},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, ok := c.routes[r.URL.Path]
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"error":"not_found","message":"no such route"}`))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
		}))
		cfg := client.DefaultConfig()
		cfg.Target, cfg.Secret = srv.URL, secret
		cl, err := client.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		q, err := cl.QueueLag()
		var ce *client.Error
		switch {
		case c.want < 0 && !(errors.As(err, &ce) && ce.Status == 404):
			t.Errorf("%s: %v, want a 404", c.name, err)
		case c.want >= 0 && (err != nil || q.Records["g"] != c.want):
			t.Errorf("%s: %+v %v, want %d records", c.name, q, err, c.want)
		}
		cl.Close()
		srv.Close()
	}
}
