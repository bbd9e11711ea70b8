package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"imlab/targets/ref/client"
)

// pipelined returns a warm-less pipelined client of addr.
func pipelined(t *testing.T, addr string, conns, depth int, timeout time.Duration) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Target, cfg.Secret, cfg.MaxConns, cfg.Pipeline, cfg.Timeout = "http://"+addr, secret, conns, depth, timeout
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Every pipelined request gets its own answer, a refusal with its status,
// code and Retry-After included, though the answers of a connection come
// back in one stream.
func TestPipelinedAnswersInOrder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		var req struct {
			ClientMsgID string `json:"client_msg_id"`
		}
		if string(ctx.Path()) != "/v1/msg/send" || !strings.HasPrefix(string(ctx.Request.Header.Peek("Authorization")), "Bearer ") ||
			json.Unmarshal(ctx.PostBody(), &req) != nil {
			ctx.SetStatusCode(400)
			return
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(req.ClientMsgID, "c-"))
		if n%7 == 0 {
			ctx.Response.Header.Set("Retry-After", "2")
			ctx.SetStatusCode(429)
			ctx.SetBodyString(`{"error":{"code":"slow_down","message":"m` + strconv.Itoa(n) + `"}}`)
			return
		}
		ctx.SetBodyString(fmt.Sprintf(`{"msg_id":%d,"conv_id":1,"conv_seq":%d,"server_time":0}`, n, n+1))
	}}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown() }()
	cl := pipelined(t, ln.Addr().String(), 2, 32, 30*time.Second)
	if err := cl.Warm(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	tok, err := cl.Token(1, "d")
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			ack, err := cl.Send(tok, &client.SendReq{ClientMsgID: "c-" + strconv.Itoa(i), ConvType: 1, ToUID: 2, Content: "x"})
			var ce *client.Error
			switch {
			case i%7 == 0 && !(errors.As(err, &ce) && ce.Status == 429 && ce.Code == "slow_down" && ce.Message == "m"+strconv.Itoa(i) && ce.RetryAfter == 2*time.Second):
				errs <- fmt.Errorf("send %d: %v, want its own 429", i, err)
			case i%7 != 0 && (err != nil || ack.MsgID != uint64(i) || ack.ConvSeq != uint64(i+1)):
				errs <- fmt.Errorf("send %d: %+v %v, want its own ack", i, ack, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// pipeServer accepts one connection (then refuses any other), reads
// answered requests, answers each (the last with Connection: close when
// closeHeader) and ends the connection without answering the rest; with
// answered < 0 it reads and never answers.
func pipeServer(t *testing.T, answered int, closeHeader bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		if answered < 0 {
			go func() { _, _ = io.Copy(io.Discard, br) }()
			<-done
			return
		}
		var out strings.Builder
		for i := range answered {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			hdr := ""
			if closeHeader && i == answered-1 {
				hdr = "Connection: close\r\n"
			}
			body := `{"msg_id":7,"conv_id":1,"conv_seq":1,"server_time":0}`
			fmt.Fprintf(&out, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", hdr, len(body), body)
		}
		_, _ = io.WriteString(c, out.String())
		// End the connection with a FIN, not a reset (a close with requests
		// unread in its buffer resets it, and a reset may discard the
		// answers before the client reads them), and read what the client
		// still sends until it closes its end.
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, br)
	}()
	return ln.Addr().String()
}

// A connection that ends mid-pipeline: the requests answered before its end
// are ACKed, every other one on it ends with a transport error (an unknown
// outcome: Status 0), never a definite answer, whether the server closed it
// after a Connection: close answer or without a word.
func TestPipelinedConnectionLostMidPipeline(t *testing.T) {
	for _, closeHeader := range []bool{false, true} {
		t.Run("connection_close_"+strconv.FormatBool(closeHeader), func(t *testing.T) {
			const n, answered = 40, 10
			cl := pipelined(t, pipeServer(t, answered, closeHeader), 1, 64, 30*time.Second)
			tok, err := cl.Token(1, "d")
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			ok, unknown := 0, 0
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					_, err := cl.Send(tok, &client.SendReq{ClientMsgID: "c-" + strconv.Itoa(i), ConvType: 1, ToUID: 2, Content: "x"})
					var ce *client.Error
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						ok++
					case errors.As(err, &ce) && ce.Status == 0:
						unknown++
					default:
						t.Errorf("send %d: %v, want an ACK or a transport error", i, err)
					}
				})
			}
			wg.Wait()
			if ok != answered || unknown != n-answered {
				t.Fatalf("ok %d, transport errors %d; want %d and %d", ok, unknown, answered, n-answered)
			}
		})
	}
}

// A server that never answers: every request ends with a transport error
// once its batch's read deadline passes (no timer per request).
func TestPipelinedStalledServerTimesOut(t *testing.T) {
	cl := pipelined(t, pipeServer(t, -1, false), 1, 64, 300*time.Millisecond)
	tok, err := cl.Token(1, "d")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			_, err := cl.Send(tok, &client.SendReq{ClientMsgID: "c-" + strconv.Itoa(i), ConvType: 1, ToUID: 2, Content: "x"})
			if ce := (*client.Error)(nil); !errors.As(err, &ce) || ce.Status != 0 {
				t.Errorf("send %d to a silent server: %v, want a transport error", i, err)
			}
		})
	}
	wg.Wait()
	if el := time.Since(start); el > 20*time.Second {
		t.Fatalf("the sends to a silent server took %s with a 300ms timeout", el)
	}
}

// Close ends the pool's connections: a send after it dials again.
func TestPipelinedCloseThenSend(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetBodyString(`{"msg_id":3,"conv_id":1,"conv_seq":1,"server_time":0}`)
	}}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown() }()
	cl := pipelined(t, ln.Addr().String(), 2, 8, 10*time.Second)
	tok, err := cl.Token(1, "d")
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		ack, err := cl.Send(tok, &client.SendReq{ClientMsgID: "c-" + strconv.Itoa(round), ConvType: 1, ToUID: 2, Content: "x"})
		if err != nil || ack.MsgID != 3 {
			t.Fatalf("round %d: %+v %v", round, ack, err)
		}
		cl.Close()
	}
}
