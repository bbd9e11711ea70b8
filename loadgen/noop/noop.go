// Package noop is a fasthttp endpoint that answers every request at once
// with a fixed send ACK. The load generator measures its own ceiling against
// it, so that a result never mistakes the generator's limit for the
// server's. It owns nothing else.
package noop

import (
	"fmt"
	"net"
	"sync"

	"github.com/valyala/fasthttp"
)

// Body is the fixed answer.
const Body = `{"msg_id":1,"conv_id":1,"conv_seq":1,"server_time":0}`

// Server is a running no-op endpoint.
type Server struct {
	ln  net.Listener
	srv *fasthttp.Server
	wg  sync.WaitGroup
}

// Start listens on addr (e.g. 127.0.0.1:0).
func Start(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("noop: %w", err)
	}
	body := []byte(Body)
	s := &Server{ln: ln, srv: &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
			ctx.SetBody(body)
		},
		Name:                          "noop",
		DisableHeaderNamesNormalizing: true,
		NoDefaultDate:                 true,
	}}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); _ = s.srv.Serve(ln) }()
	return s, nil
}

// URL is the base URL.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops it.
func (s *Server) Close() error {
	err := s.srv.Shutdown()
	s.wg.Wait()
	return err
}
