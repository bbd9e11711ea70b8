// Package faketarget is an in-memory server that speaks the lab's HTTP +
// WebSocket contract on loopback, for testing the load generator and the
// checker end to end. It can be told to break on purpose: drop one message
// in N after ACKing it, advance a device's stored cursor on every pull, or
// reuse an inbox seq now and then (overwriting the entry that held it).
//
// It is a test target, not a reference: one mutex guards all state, there
// is no persistence and no truncation past an unread threshold. It must not
// be used as a server under measurement.
package faketarget

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"
)

// Faults selects the deliberate bugs.
type Faults struct {
	// DropEvery N > 0: every Nth distinct send (the Nth, 2Nth, ... that the
	// fake accepts, counting deduplicated retries once) is ACKed but never
	// stored or pushed: a run of at least N sends that all reach the fake
	// drops exactly floor(sends/N).
	DropEvery int
	// AdvanceCursorOnPull: a pull moves the device's stored cursor to the
	// page's end, as if the device had acknowledged it.
	AdvanceCursorOnPull bool
	// ReuseSeqEvery N > 0: every Nth inbox append of a uid reuses the uid's
	// last seq, overwriting the message stored there.
	ReuseSeqEvery int
	// SlowFirstTryEvery N > 0: the first try of every Nth distinct send is
	// stored, then answered only after SlowFor (a client with a shorter
	// timeout retries it with the same client_msg_id).
	SlowFirstTryEvery int
	SlowFor           time.Duration
	// StoreRetries: a send whose client_msg_id was seen before is stored as
	// a new message (dedupe broken) instead of getting the first answer.
	StoreRetries bool
	// LateInbox > 0: not a defect but a queue: every message reaches its
	// recipients' inboxes (and pushes) LateInbox after its ACK, as a
	// queue's consumer would deliver it, and GET /v1/lab/lag/now (no
	// token) reports the messages still on their way as records of the
	// group "imlab-inbox", as the reference server does.
	LateInbox time.Duration
}

// Config of the fake.
type Config struct {
	Secret string
	Faults Faults
	// PullPerSec > 0 limits pulls per uid per second (429 + Retry-After).
	PullPerSec int
	// PushQueue bounds each connection's outgoing frames; a connection that
	// falls behind is closed with a reason.
	PushQueue int
	// Capacity models a server's limits on HTTP sends (zero: none).
	Capacity Capacity
}

// Capacity makes the fake behave as a server with limits, for testing a
// capacity search against a known answer. It applies to HTTP sends.
type Capacity struct {
	// SendsPerSec > 0: sends are served one after another at this rate,
	// each taking the next free slot (a single-server queue): below it a
	// send is answered at once, above it the queue and the latency grow
	// without bound.
	SendsPerSec float64
	// FailAbovePerSec > 0: sends beyond this many in one wall-clock second
	// are answered 503 without being stored.
	FailAbovePerSec int
	// MaxQueue bounds the queue of SendsPerSec: a send that would wait
	// longer is answered 503 at once (default 2s), so a backlog drains
	// within MaxQueue after the load stops.
	MaxQueue time.Duration
}

// DefaultConfig returns a correct server.
func DefaultConfig(secret string) Config { return Config{Secret: secret, PushQueue: 8192} }

// Counters of what the fake did.
type Counters struct {
	Sends, Dropped, Reused, Pulls, Throttled, SlowClosed int
	// Slowed counts first tries answered late; Resends the sends whose
	// client_msg_id the fake had seen before.
	Slowed, Resends int
	// DroppedMsgIDs lists the msg_id of every dropped send, in order.
	DroppedMsgIDs []uint64
}

type entry struct {
	seq uint64
	m   msg
}

type msg struct {
	MsgID     uint64 `json:"msg_id"`
	ConvID    uint64 `json:"conv_id"`
	ConvType  uint8  `json:"conv_type"`
	ConvSeq   uint64 `json:"conv_seq"`
	SenderUID uint64 `json:"sender_uid"`
	CreatedAt int64  `json:"created_at"`
	Content   string `json:"content"`
}

type inbox struct {
	last    uint64
	appends int
	entries []entry // ascending seq
}

type devKey struct {
	uid uint64
	did string
}

type conn struct {
	dev  devKey
	out  chan []byte
	once sync.Once
	done chan struct{}
}

// Server is a running fake.
type Server struct {
	cfg  Config
	ln   net.Listener
	srv  *fasthttp.Server
	wg   sync.WaitGroup
	up   websocket.FastHTTPUpgrader
	mu   sync.Mutex
	c    Counters
	next uint64
	// state
	dedupe  map[string]ack
	convSeq map[uint64]uint64
	groups  map[uint64][]uint64
	inboxes map[uint64]*inbox
	cursor  map[devKey]uint64
	served  map[devKey]uint64
	conns   map[uint64]map[*conn]bool
	rate    map[uint64][2]int64 // uid -> {second, count}
	// capacity model (qmu): the next free send slot, the current second's
	// send count, and the stall gate (closed: not stalled).
	qmu       sync.Mutex
	slot      time.Time
	failSec   int64
	failCount int
	unstalled chan struct{}
	closed    chan struct{}
	// late holds the messages on their way to the inboxes (Faults.LateInbox),
	// oldest first, under mu; the deliverer goroutine appends them when due.
	late []lateMsg
}

// lateMsg is a message ACKed but not yet in its recipients' inboxes.
type lateMsg struct {
	due  time.Time
	m    msg
	rcpt []uint64
}

// Start listens on 127.0.0.1:0 and serves until Close.
func Start(cfg Config) (*Server, error) {
	if len(cfg.Secret) < 16 {
		return nil, errors.New("faketarget: secret too short")
	}
	if cfg.PushQueue <= 0 {
		cfg.PushQueue = 8192
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faketarget: %w", err)
	}
	s := &Server{
		cfg: cfg, ln: ln, next: 1 << 40,
		dedupe: map[string]ack{}, convSeq: map[uint64]uint64{}, groups: map[uint64][]uint64{},
		inboxes: map[uint64]*inbox{}, cursor: map[devKey]uint64{}, served: map[devKey]uint64{},
		conns: map[uint64]map[*conn]bool{}, rate: map[uint64][2]int64{},
		unstalled: make(chan struct{}), closed: make(chan struct{}),
	}
	close(s.unstalled)
	s.up = websocket.FastHTTPUpgrader{CheckOrigin: func(*fasthttp.RequestCtx) bool { return true }}
	// Generous timeouts: tests run it on loaded machines, and a keep-alive
	// connection closed under a client's request turns a send into an
	// unknown outcome.
	s.srv = &fasthttp.Server{Handler: s.handle, Name: "faketarget", ReadTimeout: 5 * time.Minute, IdleTimeout: 5 * time.Minute}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); _ = s.srv.Serve(ln) }()
	if cfg.Faults.LateInbox > 0 {
		// The deliverer: owned by the server, stopped by Close (closed),
		// waited for by wg.
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.deliverLate() }()
	}
	return s, nil
}

// deliverLate appends the late messages whose time has come, every 10 ms,
// until Close.
func (s *Server) deliverLate() {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.closed:
			return
		case now := <-t.C:
			s.mu.Lock()
			n := 0
			for n < len(s.late) && !s.late[n].due.After(now) {
				for _, u := range s.late[n].rcpt {
					s.append(u, s.late[n].m)
				}
				n++
			}
			s.late = s.late[n:]
			s.mu.Unlock()
		}
	}
}

// lag answers GET /v1/lab/lag/now as the reference server does, with the
// late messages as the inbox group's records.
func (s *Server) lag(ctx *fasthttp.RequestCtx) {
	s.mu.Lock()
	n, age := len(s.late), 0.0
	if n > 0 {
		age = time.Since(s.late[0].due.Add(-s.cfg.Faults.LateInbox)).Seconds()
	}
	s.mu.Unlock()
	jsonOK(ctx, map[string]any{
		"records":         map[string]int{"imlab-inbox": n},
		"max_age_seconds": map[string]float64{"imlab-inbox": age},
		"outbox_backlog":  0,
	})
}

// URL is the base URL.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Counters returns what the fake did so far.
func (s *Server) Counters() Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.c
	c.DroppedMsgIDs = append([]uint64(nil), s.c.DroppedMsgIDs...)
	return c
}

// Stall makes every HTTP send wait (unanswered) until Stall(false) or
// Close: a server that stopped answering.
func (s *Server) Stall(on bool) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	select {
	case <-s.unstalled:
		if on {
			s.unstalled = make(chan struct{})
		}
	default:
		if !on {
			close(s.unstalled)
		}
	}
}

// admit applies the capacity model to one send: it waits while stalled
// and for the send's slot, and tells whether the send may be served.
func (s *Server) admit() bool {
	s.qmu.Lock()
	gate := s.unstalled
	s.qmu.Unlock()
	select {
	case <-gate:
	case <-s.closed:
		return false
	}
	c := s.cfg.Capacity
	now := time.Now()
	s.qmu.Lock()
	if c.FailAbovePerSec > 0 {
		if sec := now.Unix(); sec != s.failSec {
			s.failSec, s.failCount = sec, 0
		}
		s.failCount++
		if s.failCount > c.FailAbovePerSec {
			s.qmu.Unlock()
			return false
		}
	}
	var wait time.Duration
	if c.SendsPerSec > 0 {
		maxQ := c.MaxQueue
		if maxQ <= 0 {
			maxQ = 2 * time.Second
		}
		slot := later(s.slot, now).Add(time.Duration(float64(time.Second) / c.SendsPerSec))
		if wait = slot.Sub(now); wait > maxQ {
			s.qmu.Unlock()
			return false
		}
		s.slot = slot
	}
	s.qmu.Unlock()
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.closed:
		return false
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Close stops the server and its connections.
func (s *Server) Close() error {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	s.mu.Lock()
	for _, cs := range s.conns {
		for c := range cs {
			c.close()
		}
	}
	s.mu.Unlock()
	err := s.srv.Shutdown()
	s.wg.Wait()
	return err
}

func (c *conn) close() { c.once.Do(func() { close(c.done) }) }

func jsonErr(ctx *fasthttp.RequestCtx, status int, code, message string) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": message}})
	ctx.SetBody(b)
}

func jsonOK(ctx *fasthttp.RequestCtx, v any) {
	ctx.SetContentType("application/json")
	b, _ := json.Marshal(v)
	ctx.SetBody(b)
}

func (s *Server) auth(ctx *fasthttp.RequestCtx) (devKey, bool) {
	h := string(ctx.Request.Header.Peek("Authorization"))
	if len(h) < 8 || h[:7] != "Bearer " {
		jsonErr(ctx, 401, "unauthorized", "missing bearer token")
		return devKey{}, false
	}
	var cl struct {
		UID uint64 `json:"uid"`
		DID string `json:"did"`
		jwt.RegisteredClaims
	}
	_, err := jwt.ParseWithClaims(h[7:], &cl, func(*jwt.Token) (any, error) { return []byte(s.cfg.Secret), nil },
		jwt.WithValidMethods([]string{"HS256"}))
	if err != nil || cl.UID == 0 || cl.DID == "" {
		jsonErr(ctx, 401, "unauthorized", "bad token")
		return devKey{}, false
	}
	return devKey{cl.UID, cl.DID}, true
}

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	if string(ctx.Path()) == "/healthz" { // liveness, no token: as the contract's
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"status":"ok"}`)
		return
	}
	if string(ctx.Path()) == "/v1/lab/lag/now" && s.cfg.Faults.LateInbox > 0 { // no token: as the reference's
		s.lag(ctx)
		return
	}
	dev, ok := s.auth(ctx)
	if !ok {
		return
	}
	switch string(ctx.Path()) {
	case "/v1/msg/send":
		var r sendReq
		if err := json.Unmarshal(ctx.PostBody(), &r); err != nil {
			jsonErr(ctx, 400, "invalid", err.Error())
			return
		}
		if !s.admit() {
			jsonErr(ctx, 503, "unavailable", "over the fake's capacity")
			return
		}
		a, status, slow, err := s.send(dev.uid, r)
		if err != nil {
			jsonErr(ctx, status, "invalid", err.Error())
			return
		}
		if slow {
			time.Sleep(s.cfg.Faults.SlowFor)
		}
		jsonOK(ctx, a)
	case "/v1/group/create":
		var r struct {
			GroupID uint64   `json:"group_id"`
			Members []uint64 `json:"members"`
		}
		if err := json.Unmarshal(ctx.PostBody(), &r); err != nil || r.GroupID == 0 || len(r.Members) == 0 || len(r.Members) > 500 {
			jsonErr(ctx, 400, "invalid", "bad group")
			return
		}
		m := append([]uint64(nil), r.Members...)
		sort.Slice(m, func(i, j int) bool { return m[i] < m[j] })
		s.mu.Lock()
		s.groups[r.GroupID] = m
		s.mu.Unlock()
		jsonOK(ctx, struct{}{})
	case "/v1/sync/pull":
		s.pull(ctx, dev)
	case "/v1/sync/ack":
		var r struct {
			PullSeq uint64 `json:"pull_seq"`
		}
		if err := json.Unmarshal(ctx.PostBody(), &r); err != nil {
			jsonErr(ctx, 400, "invalid", err.Error())
			return
		}
		cur, ok := s.ack(dev, r.PullSeq)
		if !ok {
			jsonErr(ctx, 409, "cursor_beyond_served", "pull_seq beyond what this device was served")
			return
		}
		jsonOK(ctx, map[string]uint64{"pull_seq": cur})
	case "/v1/ws":
		err := s.up.Upgrade(ctx, func(ws *websocket.Conn) { s.serveWS(dev, ws) })
		if err != nil {
			return
		}
	default:
		jsonErr(ctx, 404, "not_found", "no such route")
	}
}

type sendReq struct {
	ClientMsgID string `json:"client_msg_id"`
	ConvType    uint8  `json:"conv_type"`
	ToUID       uint64 `json:"to_uid"`
	GroupID     uint64 `json:"group_id"`
	Content     string `json:"content"`
}

func singleConv(a, b uint64) uint64 {
	if a > b {
		a, b = b, a
	}
	return 1<<63 | a<<31 | b
}

// send stores one message; slow says its answer is to be held back.
func (s *Server) send(uid uint64, r sendReq) (a ack, status int, slow bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strconv.FormatUint(uid, 10) + "/" + r.ClientMsgID
	if r.ClientMsgID == "" {
		return ack{}, 400, false, errors.New("client_msg_id required")
	}
	if a, ok := s.dedupe[key]; ok {
		s.c.Resends++
		if !s.cfg.Faults.StoreRetries {
			return a, 200, false, nil
		}
	}
	a, status, err = s.store(uid, r, key)
	if f := s.cfg.Faults; err == nil && f.SlowFirstTryEvery > 0 && s.c.Sends%f.SlowFirstTryEvery == 0 {
		s.c.Slowed++
		slow = true
	}
	return a, status, slow, err
}

// store makes a new message of r (s.mu held).
func (s *Server) store(uid uint64, r sendReq, key string) (ack, int, error) {
	var conv uint64
	var rcpt []uint64
	switch r.ConvType {
	case 1:
		if r.ToUID == 0 || r.ToUID == uid {
			return ack{}, 400, errors.New("bad to_uid")
		}
		conv = singleConv(uid, r.ToUID)
		rcpt = []uint64{min(uid, r.ToUID), max(uid, r.ToUID)}
	case 2:
		m, ok := s.groups[r.GroupID]
		if !ok {
			return ack{}, 404, errors.New("no such group")
		}
		i := sort.Search(len(m), func(i int) bool { return m[i] >= uid })
		if i == len(m) || m[i] != uid {
			return ack{}, 403, errors.New("not a member")
		}
		conv, rcpt = r.GroupID, m
	default:
		return ack{}, 400, errors.New("bad conv_type")
	}
	s.next++
	s.convSeq[conv]++
	s.c.Sends++
	a := ack{MsgID: s.next, ConvID: conv, ConvSeq: s.convSeq[conv], ServerTime: time.Now().UnixMilli()}
	s.dedupe[key] = a
	if s.cfg.Faults.DropEvery > 0 && s.c.Sends%s.cfg.Faults.DropEvery == 0 {
		s.c.Dropped++
		s.c.DroppedMsgIDs = append(s.c.DroppedMsgIDs, a.MsgID)
		return a, 200, nil
	}
	m := msg{MsgID: a.MsgID, ConvID: conv, ConvType: r.ConvType, ConvSeq: a.ConvSeq, SenderUID: uid, CreatedAt: a.ServerTime, Content: r.Content}
	if d := s.cfg.Faults.LateInbox; d > 0 {
		s.late = append(s.late, lateMsg{due: time.Now().Add(d), m: m, rcpt: rcpt})
		return a, 200, nil
	}
	for _, u := range rcpt {
		s.append(u, m)
	}
	return a, 200, nil
}
