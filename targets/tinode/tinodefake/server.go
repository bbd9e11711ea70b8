// Package tinodefake is an in-process, loopback-only server that speaks the
// subset of Tinode's JSON-over-WebSocket protocol the lab's driver uses
// ({hi}, {acc} and {login} with the basic and token schemes, {sub} to p2p
// and new or existing group topics, {set sub} invites, {pub}, {get} of
// desc, sub, data and del, {del what="msg"}, {note} recv/read, {leave}),
// written from the protocol's public API document. It exists to test the
// driver (targets/tinode) and, through it, the lab's checker: besides the
// normal behaviour (newest-first pages capped per request, numbered delete
// ranges) it can be told to misbehave the way real servers were seen to:
// a seq consumed with nothing stored, a topic that refuses every publish,
// a publish answered with an error yet stored and delivered, a connection
// dropped mid-publish, a late answer, deletes applied but left out of the
// delete log.
//
// It owns only its in-memory state; it must not import the driver (the two
// are independent readings of the same document, so a misreading shows as
// a test failure), persist anything, or listen on anything but loopback.
// One mutex guards all state; it is a test target, never a server under
// measurement.
package tinodefake

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
)

// Defaults of Config.
const (
	// DefaultMaxMessageResults is the most {data} frames one
	// {get what="data"} answers, whatever limit was asked (the tested
	// server's fixed cap).
	DefaultMaxMessageResults = 100
	// DefaultMaxResults is the most delete ranges one {get what="del"}
	// answers (the server's store_config.max_results default).
	DefaultMaxResults = 1024
	// DefaultSendQueue bounds each session's outgoing frames; a session
	// that falls behind is disconnected.
	DefaultSendQueue = 4096
	// DefaultPageLimit is the limit of a {get} that names none.
	DefaultPageLimit = 32
	// MaxFrameBytes bounds one client frame; a larger one ends the
	// connection.
	MaxFrameBytes = 1 << 20
	// MaxMessageSize is what {hi}'s answer reports as the largest message
	// (the server's max_message_size default); a {pub} whose content is
	// larger is refused with 413.
	MaxMessageSize = 128 << 10
	// Ver is the protocol version the fake answers {hi} with.
	Ver = "0.25"
	// WriteTimeout bounds one frame write; a session that cannot take a
	// frame within it is disconnected.
	WriteTimeout = 5 * time.Second
	// HeaderTimeout bounds reading the upgrade request.
	HeaderTimeout = 5 * time.Second
)

// Config of the fake.
type Config struct {
	// APIKey, if set, must come as the X-Tinode-APIKey header or the apikey
	// query parameter; otherwise the upgrade is refused with 403.
	APIKey            string
	MaxMessageResults int
	MaxResults        int
	SendQueue         int
}

// Server is a running fake. Start it with Start, stop it with Close.
//
// Goroutines: the HTTP server's accept loop and, per connection, a reader
// (the upgraded handler) and a writer; Close stops them all and waits.
type Server struct {
	cfg  Config
	ln   net.Listener
	http *http.Server
	wg   sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	sessions map[*session]struct{}
	users    map[string]*user // by id
	logins   map[string]*user
	tokens   map[string]*user
	topics   map[string]*topic // by internal id
	faults   map[string]*faults
	timers   map[*time.Timer]struct{}
}

// Start listens on 127.0.0.1 (a free port) and serves the protocol at
// /v0/channels.
func Start(cfg Config) (*Server, error) {
	if cfg.MaxMessageResults == 0 {
		cfg.MaxMessageResults = DefaultMaxMessageResults
	}
	if cfg.MaxResults == 0 {
		cfg.MaxResults = DefaultMaxResults
	}
	if cfg.SendQueue == 0 {
		cfg.SendQueue = DefaultSendQueue
	}
	if cfg.MaxMessageResults < 0 || cfg.MaxResults < 0 || cfg.SendQueue < 0 {
		return nil, fmt.Errorf("tinodefake: negative limit in %+v", cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tinodefake: listen: %w", err)
	}
	s := &Server{cfg: cfg, ln: ln,
		sessions: map[*session]struct{}{}, users: map[string]*user{}, logins: map[string]*user{},
		tokens: map[string]*user{}, topics: map[string]*topic{}, faults: map[string]*faults{},
		timers: map[*time.Timer]struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/v0/channels", s.serveWS)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: HeaderTimeout}
	s.wg.Go(func() { _ = s.http.Serve(ln) })
	return s, nil
}

// URL is the WebSocket endpoint, ws://127.0.0.1:PORT/v0/channels.
func (s *Server) URL() string { return "ws://" + s.ln.Addr().String() + "/v0/channels" }

// Close stops the server: every connection is closed, every goroutine
// waited for.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for t := range s.timers {
		t.Stop()
	}
	clear(s.timers)
	for ss := range s.sessions {
		ss.closeLocked()
	}
	s.mu.Unlock()
	err := s.http.Shutdown(context.Background())
	s.wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

var upgrader = websocket.Upgrader{ReadBufferSize: 16 << 10, WriteBufferSize: 16 << 10,
	CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if s.cfg.APIKey != "" {
		k := r.Header.Get("X-Tinode-APIKey")
		if k == "" {
			k = r.URL.Query().Get("apikey")
		}
		if k != s.cfg.APIKey {
			http.Error(w, `{"ctrl":{"code":403,"text":"valid API key required"}}`, http.StatusForbidden)
			return
		}
	}
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	conn.SetReadLimit(MaxFrameBytes)
	ss := &session{srv: s, conn: conn, out: make(chan []byte, s.cfg.SendQueue), attached: map[string]bool{}}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.sessions[ss] = struct{}{}
	s.wg.Add(1) // this handler's goroutine is the session's reader
	s.mu.Unlock()
	defer s.wg.Done()
	s.wg.Go(ss.writeLoop)
	ss.readLoop()
}

// session is one connection.
type session struct {
	srv  *Server
	conn *websocket.Conn
	out  chan []byte // closed by closeLocked; the writer drains it

	// guarded by srv.mu
	gone     bool
	hi       bool
	user     *user
	attached map[string]bool // internal topic ids
}

func (ss *session) readLoop() {
	defer func() {
		ss.srv.mu.Lock()
		ss.closeLocked()
		ss.srv.mu.Unlock()
	}()
	for {
		_, b, err := ss.conn.ReadMessage()
		if err != nil {
			return
		}
		ss.srv.handle(ss, b)
	}
}

func (ss *session) writeLoop() {
	for b := range ss.out {
		_ = ss.conn.SetWriteDeadline(time.Now().Add(WriteTimeout))
		if err := ss.conn.WriteMessage(websocket.TextMessage, b); err != nil {
			_ = ss.conn.Close()
		}
	}
	_ = ss.conn.Close()
}

// closeLocked ends the session: the writer sends what is queued, then
// closes the connection, which ends the reader. Caller holds srv.mu.
func (ss *session) closeLocked() {
	if ss.gone {
		return
	}
	ss.gone = true
	delete(ss.srv.sessions, ss)
	close(ss.out)
}

// dropLocked closes the connection at once, without sending what is
// queued (a connection lost). Caller holds srv.mu.
func (ss *session) dropLocked() {
	_ = ss.conn.Close()
	ss.closeLocked()
}

// sendLocked queues one frame; a session whose queue is full is closed.
func (ss *session) sendLocked(frame any) {
	if ss.gone {
		return
	}
	b, err := json.Marshal(frame)
	if err != nil {
		return
	}
	select {
	case ss.out <- b:
	default:
		ss.dropLocked()
	}
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }
