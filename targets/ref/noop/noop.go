// Package noop is a fasthttp endpoint that answers every request at once
// with a fixed send ACK, and every WebSocket send frame on /v1/ws with a
// fixed send_ack echoing its client_msg_id. The load generator measures its
// own ceiling against it, so that a result never mistakes the generator's
// limit for the server's. It owns nothing else.
package noop

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"
)

// Body is the fixed answer.
const Body = `{"msg_id":1,"conv_id":1,"conv_seq":1,"server_time":0}`

// Server is a running no-op endpoint.
type Server struct {
	ln  net.Listener
	srv *fasthttp.Server
	wg  sync.WaitGroup
	up  websocket.FastHTTPUpgrader
	mu  sync.Mutex
	ws  map[*websocket.Conn]bool // open WebSockets, closed by Close
}

// Start listens on addr (e.g. 127.0.0.1:0).
func Start(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("noop: %w", err)
	}
	body := []byte(Body)
	s := &Server{ln: ln, ws: map[*websocket.Conn]bool{}}
	s.up = websocket.FastHTTPUpgrader{CheckOrigin: func(*fasthttp.RequestCtx) bool { return true }}
	s.srv = &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if string(ctx.Path()) == "/v1/ws" && websocket.FastHTTPIsWebSocketUpgrade(ctx) {
				_ = s.up.Upgrade(ctx, s.serveWS)
				return
			}
			ctx.SetContentType("application/json")
			ctx.SetBody(body)
		},
		Name:          "noop",
		NoDefaultDate: true,
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); _ = s.srv.Serve(ln) }()
	return s, nil
}

// serveWS answers send frames in order until the connection ends.
func (s *Server) serveWS(c *websocket.Conn) {
	s.mu.Lock()
	s.ws[c] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.ws, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	var f struct {
		Type        string `json:"type"`
		ClientMsgID string `json:"client_msg_id"`
	}
	out := make([]byte, 0, 128)
	for {
		_, b, err := c.ReadMessage()
		if err != nil {
			return
		}
		f.Type, f.ClientMsgID = "", ""
		if json.Unmarshal(b, &f) != nil || f.Type != "send" {
			continue
		}
		out = append(out[:0], `{"type":"send_ack","client_msg_id":`...)
		out = strconv.AppendQuote(out, f.ClientMsgID)
		out = append(out, `,"msg_id":1,"conv_id":1,"conv_seq":1,"server_time":0}`...)
		if c.WriteMessage(websocket.TextMessage, out) != nil {
			return
		}
	}
}

// URL is the base URL.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops it and closes its WebSockets.
func (s *Server) Close() error {
	s.closeWS()
	err := s.srv.Shutdown()
	s.closeWS() // any upgraded while shutting down
	s.wg.Wait()
	return err
}

func (s *Server) closeWS() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.ws {
		_ = c.Close()
	}
}
