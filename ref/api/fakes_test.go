package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"imlab/ref/auth"
	"imlab/ref/model"
)

// fakeSender records calls and answers with a scripted result or error.
type fakeSender struct {
	mu      sync.Mutex
	sends   []model.SendRequest
	groups  [][]uint64
	err     error
	panicky bool
	res     model.SendResult
}

func (f *fakeSender) Send(_ context.Context, req model.SendRequest) (model.SendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.panicky {
		panic("fake send panic")
	}
	f.sends = append(f.sends, req)
	if f.err != nil {
		return model.SendResult{}, f.err
	}
	r := f.res
	r.ConvID = req.ConvID()
	return r, nil
}

func (f *fakeSender) CreateGroup(_ context.Context, groupID uint64, members []uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups = append(f.groups, append([]uint64{groupID}, members...))
	return f.err
}

func (f *fakeSender) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sends) + len(f.groups)
}

type pullCall struct {
	kind   string
	uid    uint64
	did    string
	cursor *uint64
	conv   uint64
	seq    uint64
	limit  int
	full   bool
}

// fakePuller records calls; served is the served high-water per (uid,did)
// and refuses acks past it, like the real service.
type fakePuller struct {
	mu     sync.Mutex
	calls  []pullCall
	res    model.PullResult
	err    error
	served map[string]uint64
	cursor map[string]uint64
	// registered lists the devices Register was called for ("uid/did");
	// registerErr fails it.
	registered  []string
	registerErr error
}

func (f *fakePuller) Register(_ context.Context, uid uint64, did string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.registerErr != nil {
		return f.registerErr
	}
	f.registered = append(f.registered, key(uid, did))
	return nil
}

func (f *fakePuller) registrations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.registered...)
}

func key(uid uint64, did string) string { return fmt.Sprintf("%d/%s", uid, did) }

func (f *fakePuller) Pull(_ context.Context, uid uint64, did string, cursor *uint64, limit int, full bool) (model.PullResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, pullCall{kind: "pull", uid: uid, did: did, cursor: cursor, limit: limit, full: full})
	return f.res, f.err
}

func (f *fakePuller) ConvPull(_ context.Context, uid uint64, did string, convID, cursor uint64, limit int) (model.PullResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := cursor
	f.calls = append(f.calls, pullCall{kind: "conv", uid: uid, did: did, conv: convID, cursor: &c, limit: limit})
	return f.res, f.err
}

func (f *fakePuller) Ack(_ context.Context, uid uint64, did string, seq uint64) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, pullCall{kind: "ack", uid: uid, did: did, seq: seq})
	if f.err != nil {
		return 0, f.err
	}
	k := key(uid, did)
	if seq > f.served[k] {
		return 0, model.ErrCursorAhead
	}
	if seq > f.cursor[k] {
		f.cursor[k] = seq
	}
	return f.cursor[k], nil
}

func (f *fakePuller) MarkServed(_ context.Context, uid uint64, did string, seq uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, pullCall{kind: "served", uid: uid, did: did, seq: seq})
	k := key(uid, did)
	if seq > f.served[k] {
		f.served[k] = seq
	}
	return nil
}

func (f *fakePuller) MarkServedAck(ctx context.Context, uid uint64, did string, seq uint64) (uint64, error) {
	if err := f.MarkServed(ctx, uid, did, seq); err != nil {
		return 0, err
	}
	return f.Ack(ctx, uid, did, seq)
}

func (f *fakePuller) snapshot() []pullCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]pullCall(nil), f.calls...)
}

// fakeSub is a push subscription the test feeds by hand.
type fakeSub struct {
	c         chan []byte
	once      sync.Once
	mu        sync.Mutex
	reason    string
	maxPushed uint64
	closed    chan struct{}
}

func newFakeSub() *fakeSub {
	return &fakeSub{c: make(chan []byte, 16), closed: make(chan struct{})}
}

func (s *fakeSub) Frames() <-chan []byte { return s.c }
func (s *fakeSub) Reason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}
func (s *fakeSub) MaxPushed() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxPushed
}
func (s *fakeSub) push(seq uint64, frame string) {
	s.mu.Lock()
	s.maxPushed = seq
	s.mu.Unlock()
	s.c <- []byte(frame)
}
func (s *fakeSub) end(reason string) {
	s.once.Do(func() {
		s.mu.Lock()
		s.reason = reason
		s.mu.Unlock()
		close(s.c)
		close(s.closed)
	})
}
func (s *fakeSub) Close() { s.end("closed") }

type fakeHub struct {
	mu   sync.Mutex
	subs []*fakeSub
	who  []Caller
	err  error
	got  chan *fakeSub
}

func (h *fakeHub) Subscribe(uid uint64, did string) (Subscription, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return nil, h.err
	}
	s := newFakeSub()
	h.subs = append(h.subs, s)
	h.who = append(h.who, Caller{UID: uid, DID: did})
	if h.got != nil {
		h.got <- s
	}
	return s, nil
}

const testSecret = "api-test-secret-0123456789"

type harness struct {
	t      *testing.T
	srv    *Server
	url    string
	auth   *auth.Authority
	send   *fakeSender
	pull   *fakePuller
	hub    *fakeHub
	reg    *prometheus.Registry
	client *http.Client
}

func newHarness(t *testing.T, mutate func(*Config, *Deps)) *harness {
	t.Helper()
	acfg := auth.DefaultConfig()
	acfg.Secret = testSecret
	a, err := auth.New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{
		t:    t,
		auth: a,
		send: &fakeSender{res: model.SendResult{MsgID: 99, ConvSeq: 3, ServerTime: time.UnixMilli(1_700_000_000_123)}},
		pull: &fakePuller{served: map[string]uint64{}, cursor: map[string]uint64{}},
		hub:  &fakeHub{got: make(chan *fakeSub, 16)},
		reg:  prometheus.NewRegistry(),
	}
	cfg := DefaultConfig()
	cfg.WS.CloseGrace = 200 * time.Millisecond
	deps := Deps{Auth: a, Send: h.send, Pull: h.pull, Hub: h.hub, Registry: h.reg}
	if mutate != nil {
		mutate(&cfg, &deps)
	}
	srv, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	h.srv = srv
	h.url = "http://" + ln.Addr().String()
	h.client = &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		h.client.CloseIdleConnections()
	})
	return h
}

func (h *harness) token(uid uint64, did string) string {
	h.t.Helper()
	tok, err := h.auth.Mint(uid, did, time.Hour)
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

// nopHandler is the server's handler alone over no-op services, with a
// token for uid 2: the API layer's own per-request work, no connection.
func nopHandler(tb testing.TB) (h fasthttp.RequestHandler, token string) {
	tb.Helper()
	acfg := auth.DefaultConfig()
	acfg.Secret = testSecret
	a, err := auth.New(acfg)
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := New(DefaultConfig(), Deps{Auth: a, Send: &nopSender{}, Pull: &nopPuller{}, Registry: prometheus.NewRegistry()})
	if err != nil {
		tb.Fatal(err)
	}
	token, err = a.Mint(2, "phone", time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	return srv.Handler(), token
}

// sendRequest sets rc up as POST /v1/msg/send of body with token.
func sendRequest(rc *fasthttp.RequestCtx, token string, body []byte) {
	rc.Request.Header.SetMethod("POST")
	rc.Request.SetRequestURI("/v1/msg/send")
	rc.Request.Header.Set("Authorization", "Bearer "+token)
	rc.Request.SetBody(body)
}
