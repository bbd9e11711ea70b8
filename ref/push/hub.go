// Package push owns WebSocket delivery to online devices, transport-free: a
// Hub of per-device subscriptions, each with a bounded queue of pre-encoded
// JSON frames, fed by the write path's CommitHook (Committed). The api layer
// upgrades the connection and copies Subscription.C to the socket.
//
// Guarantees: Committed never blocks (a full queue closes that subscription
// with reason "slow_consumer"; the device recovers by pulling); per uid,
// frames go out in seq order — hooks of different commit batches may arrive
// out of order, so an entry whose PrevSeq is not the last pushed seq waits
// in a bounded per-uid buffer for at most ReorderWindow, then everything up
// to it is flushed in seq order. A frame older than what was already pushed
// is dropped (counted): every frame carries prev_seq, so a client acks only
// up to its contiguous chain and pulls to fill a gap.
//
// It must not block the write path, touch storage, or decide what a device
// has acknowledged (ref/pull does, through MarkServed and Ack).
package push

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"imlab/ref/model"
)

// Reasons a subscription ends (Subscription.Reason).
const (
	ReasonClosed       = "closed"        // Close was called (client went away)
	ReasonSlowConsumer = "slow_consumer" // its queue was full
	ReasonReplaced     = "replaced"      // a newer connection of the same device
	ReasonTooMany      = "too_many_connections"
	ReasonShutdown     = "shutdown" // Hub.Close
)

// Reasons a frame is not delivered (imlab_ws_dropped_total{reason}, besides
// the connection reasons above).
const (
	DropLateFrame = "late_frame" // seq <= last pushed for the uid
)

// Config tunes the hub.
type Config struct {
	// QueueSize bounds each subscription's frame queue.
	QueueSize int
	// ReorderWindow is how long an out-of-chain entry waits for its
	// predecessors before being flushed anyway.
	ReorderWindow time.Duration
	// ReorderMax bounds the entries waiting per uid; past it the buffer is
	// flushed at once.
	ReorderMax int
	// MaxConnsPerDevice: a newer subscription of the same (uid, did) closes
	// the oldest past this count ("replaced").
	MaxConnsPerDevice int
	// MaxConnsPerUser: a newer subscription of the uid closes its oldest
	// past this count ("too_many_connections").
	MaxConnsPerUser int
}

// DefaultConfig returns sensible defaults.
func DefaultConfig() Config {
	return Config{
		QueueSize:         256,
		ReorderWindow:     50 * time.Millisecond,
		ReorderMax:        1024,
		MaxConnsPerDevice: 1,
		MaxConnsPerUser:   16,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.QueueSize < 1 || c.QueueSize > 1<<20:
		return fmt.Errorf("%w: push: QueueSize must be in 1..%d", model.ErrInvalid, 1<<20)
	case c.ReorderWindow <= 0 || c.ReorderWindow > 10*time.Second:
		return fmt.Errorf("%w: push: ReorderWindow must be in (0, 10s]", model.ErrInvalid)
	case c.ReorderMax < 1 || c.ReorderMax > 1<<20:
		return fmt.Errorf("%w: push: ReorderMax must be in 1..%d", model.ErrInvalid, 1<<20)
	case c.MaxConnsPerDevice < 1:
		return fmt.Errorf("%w: push: MaxConnsPerDevice must be >= 1", model.ErrInvalid)
	case c.MaxConnsPerUser < c.MaxConnsPerDevice:
		return fmt.Errorf("%w: push: MaxConnsPerUser must be >= MaxConnsPerDevice", model.ErrInvalid)
	}
	return nil
}

const nShards = 64

// Hub routes committed entries to subscriptions. Safe for concurrent use.
// Its only goroutines are reorder timers (time.AfterFunc), stopped by Close.
type Hub struct {
	cfg     Config
	shards  [nShards]shard
	closed  atomic.Bool
	conns   prometheus.Gauge
	dropped *prometheus.CounterVec
	frames  prometheus.Counter
}

type shard struct {
	mu    sync.Mutex
	users map[uint64]*user
}

type pending struct {
	e        model.InboxEntry
	deadline time.Time
}

type user struct {
	uid     uint64
	subs    []*Subscription // oldest first
	last    uint64          // highest seq pushed in order; valid when started
	started bool
	wait    []pending // sorted by seq, all > last
	timer   *time.Timer
}

// New builds a hub. reg may be nil.
func New(cfg Config, reg prometheus.Registerer) (*Hub, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Hub{
		cfg: cfg,
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "imlab_ws_connections", Help: "Open push subscriptions (WebSocket connections).",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imlab_ws_dropped_total", Help: "Push connections closed by the server, and frames not pushed, by reason.",
		}, []string{"reason"}),
		frames: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "imlab_ws_frames_total", Help: "Frames queued to push subscriptions.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{h.conns, h.dropped, h.frames} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("push: register metrics: %w", err)
			}
		}
	}
	for i := range h.shards {
		h.shards[i].users = make(map[uint64]*user)
	}
	return h, nil
}

func (h *Hub) shard(uid uint64) *shard { return &h.shards[(uid*0x9E3779B97F4A7C15)>>58] }

// Subscription is one device connection's queue. The api layer writes every
// frame of C to the socket until C is closed (Done is closed at the same
// time); Reason says why it ended.
type Subscription struct {
	C    <-chan []byte
	Done <-chan struct{}

	UID uint64
	DID string

	hub       *Hub
	c         chan []byte
	done      chan struct{}
	reason    atomic.Value // string
	maxPushed atomic.Uint64
	ended     bool // guarded by the shard lock
}

// Reason is why the subscription ended ("" while open).
func (s *Subscription) Reason() string {
	r, _ := s.reason.Load().(string)
	return r
}

// MaxPushed is the highest seq queued to this subscription. The api layer
// marks served at most min(acked, MaxPushed()) before acking a pushed seq.
func (s *Subscription) MaxPushed() uint64 { return s.maxPushed.Load() }

// Close ends the subscription (idempotent).
func (s *Subscription) Close() { s.hub.end(s, ReasonClosed) }

// Subscribe opens a subscription for a device.
func (h *Hub) Subscribe(uid uint64, did string) (*Subscription, error) {
	if uid == 0 {
		return nil, fmt.Errorf("%w: push: uid 0", model.ErrInvalid)
	}
	if did == "" || len(did) > model.MaxDeviceIDLen {
		return nil, fmt.Errorf("%w: push: device id must be 1..%d bytes", model.ErrInvalid, model.MaxDeviceIDLen)
	}
	c := make(chan []byte, h.cfg.QueueSize)
	done := make(chan struct{})
	s := &Subscription{C: c, Done: done, UID: uid, DID: did, hub: h, c: c, done: done}
	sh := h.shard(uid)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if h.closed.Load() {
		return nil, fmt.Errorf("%w: push: hub closed", model.ErrUnavailable)
	}
	u := sh.users[uid]
	if u == nil {
		u = &user{uid: uid}
		sh.users[uid] = u
	}
	same := 0
	for _, o := range u.subs {
		if o.DID == did {
			same++
		}
	}
	for same >= h.cfg.MaxConnsPerDevice {
		for _, o := range u.subs {
			if o.DID == did {
				h.endLocked(sh, u, o, ReasonReplaced)
				same--
				break
			}
		}
	}
	if len(u.subs) >= h.cfg.MaxConnsPerUser {
		h.endLocked(sh, u, u.subs[0], ReasonTooMany)
	}
	// endLocked may have dropped the user state when its last sub went.
	if sh.users[uid] != u {
		sh.users[uid] = u
	}
	u.subs = append(u.subs, s)
	h.conns.Inc()
	return s, nil
}

func (h *Hub) end(s *Subscription, reason string) {
	sh := h.shard(s.UID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	u := sh.users[s.UID]
	h.endLocked(sh, u, s, reason)
}

// endLocked closes s (once) and removes it from u; when u has no
// subscription left its state goes too. Caller holds sh.mu.
func (h *Hub) endLocked(sh *shard, u *user, s *Subscription, reason string) {
	if s.ended {
		return
	}
	s.ended = true
	s.reason.Store(reason)
	close(s.c)
	close(s.done)
	h.conns.Dec()
	if reason != ReasonClosed {
		h.dropped.WithLabelValues(reason).Inc()
	}
	if u == nil {
		return
	}
	for i, o := range u.subs {
		if o == s {
			u.subs = append(u.subs[:i], u.subs[i+1:]...)
			break
		}
	}
	if len(u.subs) == 0 {
		if u.timer != nil {
			u.timer.Stop()
			u.timer = nil
		}
		u.wait = nil // nobody to deliver to; a reconnect catches up by pulling
		if sh.users[u.uid] == u {
			delete(sh.users, u.uid)
		}
	}
}

// Committed is the write path's hook. It never blocks: it encodes each entry
// once and offers the frame to every subscription of entry.UID without
// waiting.
func (h *Hub) Committed(_ context.Context, entries []model.InboxEntry) {
	if h.closed.Load() {
		return
	}
	now := time.Now()
	for i := 0; i < len(entries); {
		uid := entries[i].UID
		j := i + 1
		for j < len(entries) && entries[j].UID == uid {
			j++
		}
		h.offer(uid, entries[i:j], now)
		i = j
	}
}

func (h *Hub) offer(uid uint64, es []model.InboxEntry, now time.Time) {
	sh := h.shard(uid)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	u := sh.users[uid]
	if u == nil || len(u.subs) == 0 || h.closed.Load() {
		return
	}
	for _, e := range es {
		switch {
		case !u.started && len(u.wait) == 0:
			// First entry seen for this uid: it starts the chain.
			u.started = true
			h.deliver(sh, u, e)
		case u.started && e.Seq <= u.last:
			h.dropped.WithLabelValues(DropLateFrame).Inc()
		case u.started && e.PrevSeq == u.last:
			h.deliver(sh, u, e)
		default:
			u.insertWait(pending{e: e, deadline: now.Add(h.cfg.ReorderWindow)})
		}
	}
	h.drainChain(sh, u)
	if len(u.wait) > h.cfg.ReorderMax {
		h.flush(sh, u, u.wait[len(u.wait)-1].e.Seq)
	}
	h.arm(sh, u)
}

func (u *user) insertWait(p pending) {
	i := sort.Search(len(u.wait), func(i int) bool { return u.wait[i].e.Seq >= p.e.Seq })
	if i < len(u.wait) && u.wait[i].e.Seq == p.e.Seq {
		return // the same entry offered twice
	}
	u.wait = append(u.wait, pending{})
	copy(u.wait[i+1:], u.wait[i:])
	u.wait[i] = p
}

// drainChain delivers waiting entries while they extend the chain.
func (h *Hub) drainChain(sh *shard, u *user) {
	for len(u.wait) > 0 && len(u.subs) > 0 {
		p := u.wait[0]
		if u.started && p.e.Seq <= u.last {
			u.wait = u.wait[1:]
			h.dropped.WithLabelValues(DropLateFrame).Inc()
			continue
		}
		if u.started && p.e.PrevSeq != u.last {
			return
		}
		u.wait = u.wait[1:]
		u.started = true
		h.deliver(sh, u, p.e)
	}
}

// flush delivers, in seq order, every waiting entry with seq <= upTo, gap or
// not, then whatever chains on.
func (h *Hub) flush(sh *shard, u *user, upTo uint64) {
	for len(u.wait) > 0 && u.wait[0].e.Seq <= upTo && len(u.subs) > 0 {
		p := u.wait[0]
		u.wait = u.wait[1:]
		if u.started && p.e.Seq <= u.last {
			h.dropped.WithLabelValues(DropLateFrame).Inc()
			continue
		}
		u.started = true
		h.deliver(sh, u, p.e)
	}
	h.drainChain(sh, u)
	if len(u.subs) == 0 {
		u.wait = nil
	}
}

// arm makes sure a timer fires at the earliest waiting deadline.
func (h *Hub) arm(sh *shard, u *user) {
	if len(u.wait) == 0 || len(u.subs) == 0 {
		if u.timer != nil {
			u.timer.Stop()
			u.timer = nil
		}
		return
	}
	if u.timer != nil {
		return
	}
	earliest := u.wait[0].deadline
	for _, p := range u.wait[1:] {
		if p.deadline.Before(earliest) {
			earliest = p.deadline
		}
	}
	uid := u.uid
	u.timer = time.AfterFunc(max(time.Until(earliest), time.Millisecond), func() { h.expire(uid, u) })
}

func (h *Hub) expire(uid uint64, u *user) {
	sh := h.shard(uid)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if h.closed.Load() || sh.users[uid] != u {
		return
	}
	u.timer = nil
	now := time.Now()
	var upTo uint64
	for _, p := range u.wait {
		if !p.deadline.After(now) && p.e.Seq > upTo {
			upTo = p.e.Seq
		}
	}
	if upTo > 0 {
		h.flush(sh, u, upTo)
	}
	h.arm(sh, u)
}

// deliver pushes e to every subscription of u; a full queue ends that
// subscription. Caller holds sh.mu.
func (h *Hub) deliver(sh *shard, u *user, e model.InboxEntry) {
	u.last = e.Seq
	frame := EncodeEntry(e)
	for i := 0; i < len(u.subs); {
		s := u.subs[i]
		select {
		case s.c <- frame:
			s.maxPushed.Store(e.Seq)
			h.frames.Inc()
			i++
		default:
			h.endLocked(sh, u, s, ReasonSlowConsumer)
			// endLocked removed u.subs[i]; do not advance.
		}
	}
}

// Close ends every subscription ("shutdown") and stops the timers. Later
// Subscribe calls fail; later Committed calls do nothing.
func (h *Hub) Close() {
	if h.closed.Swap(true) {
		return
	}
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.Lock()
		for _, u := range sh.users {
			if u.timer != nil {
				u.timer.Stop()
				u.timer = nil
			}
			for len(u.subs) > 0 {
				h.endLocked(sh, u, u.subs[0], ReasonShutdown)
			}
		}
		sh.users = make(map[uint64]*user)
		sh.mu.Unlock()
	}
}
