package schedule

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Iter turns a Shape into the sequence of intended send times over a run of
// a given duration: the next intended time is the previous one plus
// 1/rate at that time. It is not safe for concurrent use (the pacer owns it).
type Iter struct {
	shape Shape
	dur   float64
	t     float64 // ns from start of the next tick
	idx   uint64
	keep  func(idx uint64) bool
}

// idleStep is how far the iterator moves when the rate is zero.
const idleStep = float64(time.Millisecond)

// NewIter returns an iterator over [0, dur).
func NewIter(shape Shape, dur time.Duration) *Iter {
	return &Iter{shape: shape, dur: float64(dur)}
}

// Only makes the iterator yield just the ticks keep accepts, with their
// indexes and intended times unchanged: a part of a run (an execution
// segment) sees exactly its ticks of the whole schedule. keep must be
// deterministic in idx.
func (it *Iter) Only(keep func(idx uint64) bool) *Iter {
	it.keep = keep
	return it
}

// Next returns the next tick's index (from 1) and intended offset, or
// ok=false when the run's duration is exhausted.
func (it *Iter) Next() (idx uint64, at time.Duration, ok bool) {
	for {
		idx, at, ok = it.next()
		if !ok || it.keep == nil || it.keep(idx) {
			return idx, at, ok
		}
	}
}

func (it *Iter) next() (idx uint64, at time.Duration, ok bool) {
	for it.t < it.dur {
		r := it.shape.Rate(time.Duration(it.t))
		if r <= 0 {
			it.t += idleStep
			continue
		}
		at = time.Duration(it.t)
		it.t += 1e9 / r
		it.idx++
		return it.idx, at, true
	}
	return 0, 0, false
}

// Count returns how many ticks a shape yields over dur (it iterates).
func Count(shape Shape, dur time.Duration) uint64 {
	it := NewIter(shape, dur)
	var n uint64
	for {
		if _, _, ok := it.Next(); !ok {
			return n
		}
		n++
	}
}

// Config tunes the pacer.
type Config struct {
	// Workers started up front.
	Workers int
	// MaxWorkers bounds the pool; when every worker is busy and the pool is
	// at this size, the pacer waits and the following sends start late.
	MaxWorkers int
	// LateAfter: a send that starts more than this after its intended time
	// is counted late.
	LateAfter time.Duration
	// Grace: ticks that could not start before duration+Grace are not sent
	// and are counted missed.
	Grace time.Duration
	// SpinWindow: for the last SpinWindow before each tick the pacer does
	// not use the runtime's timers (about 1 ms late on a busy machine) but
	// yields once and sleeps in the kernel (spinSleep, within about 50 µs).
	// 0: the runtime's timers only.
	SpinWindow time.Duration
	// Senders, when > 0, is the queued mode: a fixed pool of Senders
	// goroutines, fed in order through a queue of at most MaxQueued sends.
	// The pacer starts each send at its intended time by putting it on
	// the queue (started, late and the handler's started offset are the
	// moment it was queued); a sender takes it when it is free, so the
	// time a send waits there is part of its response time, as the wait
	// for a free connection is in the pool mode. When the queue is full
	// the pacer waits and the following sends start late. Workers and
	// MaxWorkers are not used. 0: the pool of up to MaxWorkers goroutines,
	// one per send in flight.
	Senders int
	// MaxQueued bounds the queue of the queued mode (sends started and
	// not yet taken by a sender).
	MaxQueued int
}

// Bounds of the queued mode.
const (
	MaxSenders = 100_000
	MaxQueued  = 10_000_000
)

// DefaultConfig is sized for tens of thousands of sends per second.
func DefaultConfig() Config {
	return Config{
		Workers:    64,
		MaxWorkers: 20_000,
		LateAfter:  time.Millisecond,
		Grace:      5 * time.Second,
		SpinWindow: 2 * time.Millisecond,
	}
}

// Validate checks the limits.
func (c Config) Validate() error {
	switch {
	case c.Senders < 0 || c.Senders > MaxSenders:
		return fmt.Errorf("%w: senders %d must be in 0..%d", ErrInvalid, c.Senders, MaxSenders)
	case c.Senders > 0 && (c.MaxQueued < 1 || c.MaxQueued > MaxQueued):
		return fmt.Errorf("%w: max_queued %d must be in 1..%d with senders", ErrInvalid, c.MaxQueued, MaxQueued)
	case c.Senders == 0 && (c.Workers < 1 || c.Workers > c.MaxWorkers):
		return fmt.Errorf("%w: workers %d must be in 1..max_workers", ErrInvalid, c.Workers)
	case c.MaxWorkers > 1_000_000:
		return fmt.Errorf("%w: max_workers %d above 1000000", ErrInvalid, c.MaxWorkers)
	case c.LateAfter <= 0:
		return fmt.Errorf("%w: late_after must be > 0", ErrInvalid)
	case c.Grace < 0:
		return fmt.Errorf("%w: grace must be >= 0", ErrInvalid)
	case c.SpinWindow < 0 || c.SpinWindow > 50*time.Millisecond:
		return fmt.Errorf("%w: spin_window must be in 0..50ms", ErrInvalid)
	}
	return nil
}

// Tick is one intended send.
type Tick struct {
	Idx      uint64
	Intended time.Duration // offset from the run start
}

// Handler performs one send. worker identifies the calling goroutine
// (0 ≤ worker < MaxWorkers); started is the offset at which the worker took
// the tick. The handler runs on the worker goroutine and may block.
type Handler func(worker int, t Tick, started time.Duration)

// Stats counts what the pacer did.
//
// Its JSON keys are snake_case like the rest of the load summary; files
// written before the tags (keys "Scheduled", "Started", ...) still read,
// since encoding/json matches keys case-insensitively.
type Stats struct {
	Scheduled uint64 `json:"scheduled"` // ticks the shape produced (started + missed)
	Started   uint64 `json:"started"`   // ticks handed to a worker
	Late      uint64 `json:"late"`      // started more than LateAfter after intended
	Direct    uint64 `json:"direct"`    // started by a worker that took a due tick itself on finishing a send (the rest were handed over by the pacer)
	Missed    uint64 `json:"missed"`    // never started: past duration+Grace, or the run was cancelled
	Canceled  bool   `json:"canceled"`  // ctx ended before the schedule did
	Workers   int    `json:"workers"`   // pool size at the end (the queued mode: Senders)
	// QueuePeak: the queued mode's most sends waiting for a sender at once.
	QueuePeak int64 `json:"queue_peak,omitempty"`
}

// Live counters readable while Run is going.
type Live struct {
	Started atomic.Uint64
	Late    atomic.Uint64
	Direct  atomic.Uint64
	Missed  atomic.Uint64
	Workers atomic.Int64
	// Queued: sends waiting for a sender now (the queued mode).
	Queued atomic.Int64
}

// feed hands out the iterator's ticks in order to the pacer and to workers
// that finish a send while a tick is due. It is safe for concurrent use.
type feed struct {
	mu   sync.Mutex
	it   *Iter
	next Tick
	have bool
}

func (f *feed) fillLocked() {
	if f.have {
		return
	}
	idx, at, ok := f.it.Next()
	if ok {
		f.next, f.have = Tick{Idx: idx, Intended: at}, true
	}
}

// peek returns the next tick without taking it; ok=false when none is left.
func (f *feed) peek() (Tick, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fillLocked()
	return f.next, f.have
}

// takeDue takes the next tick if it is due at offset now.
func (f *feed) takeDue(now time.Duration) (Tick, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fillLocked()
	if !f.have || f.next.Intended > now {
		return Tick{}, false
	}
	f.have = false
	return f.next, true
}

// drain takes every tick left and returns how many there were.
func (f *feed) drain() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n uint64
	if f.have {
		f.have = false
		n++
	}
	for {
		if _, _, ok := f.it.Next(); !ok {
			return n
		}
		n++
	}
}

// Run paces it from start and calls h for every tick on a pool of worker
// goroutines. It returns when every tick was started or counted missed and
// every handler returned. live, if not nil, is updated as it goes.
//
// Two paths start a tick. The pacer goroutine waits for each tick and hands
// it to an idle worker (or a new one while the pool is below MaxWorkers).
// A worker that finishes a send takes the next tick itself if it is already
// due, without waiting to be handed one: on a loaded machine the pacer is one
// goroutine among many waiting for a CPU, while a worker that has just
// finished is running.
func Run(ctx context.Context, cfg Config, it *Iter, start time.Time, live *Live, h Handler) (Stats, error) {
	if err := cfg.Validate(); err != nil {
		return Stats{}, err
	}
	if live == nil {
		live = &Live{}
	}
	if cfg.Senders > 0 {
		return runQueued(ctx, cfg, it, start, live, h)
	}
	p := &pool{ctx: ctx, cfg: cfg, start: start, hardOff: time.Duration(it.dur) + cfg.Grace,
		f: &feed{it: it}, ch: make(chan Tick), live: live, h: h}
	for range cfg.Workers {
		p.spawn(nil)
	}
	var st Stats
	st.Canceled = p.pace()
	close(p.ch)
	p.wg.Wait()
	st.Started = live.Started.Load()
	st.Late = live.Late.Load()
	st.Direct = live.Direct.Load()
	st.Missed = live.Missed.Load()
	st.Scheduled = st.Started + st.Missed
	st.Workers = p.workers
	return st, nil
}

// pool is Run's worker pool: the goroutines that call the handler, and
// the pacer that hands them ticks and grows the pool up to MaxWorkers.
type pool struct {
	ctx     context.Context
	cfg     Config
	start   time.Time
	hardOff time.Duration // offset past which no tick starts
	f       *feed
	ch      chan Tick // the pacer's hand-over to an idle worker
	live    *Live
	h       Handler
	wg      sync.WaitGroup
	workers int // spawned so far; only the pacer goroutine touches it
}

// spawn starts one more worker, first (if not nil) its first tick.
func (p *pool) spawn(first *Tick) {
	p.wg.Add(1)
	go p.work(p.workers, first)
	p.workers++
	p.live.Workers.Store(int64(p.workers))
}

// do starts t on worker id.
func (p *pool) do(id int, t Tick) {
	started := time.Since(p.start)
	p.live.Started.Add(1)
	if started-t.Intended > p.cfg.LateAfter {
		p.live.Late.Add(1)
	}
	p.h(id, t, started)
}

// work is worker id's loop until the pacer closes its channel: a tick the
// pacer hands over, else a due tick taken from the feed directly.
func (p *pool) work(id int, first *Tick) {
	defer p.wg.Done()
	if first != nil {
		p.do(id, *first)
	}
	for {
		// A tick the pacer already holds is older than any still in
		// the feed: take it first.
		select {
		case t, ok := <-p.ch:
			if !ok {
				return
			}
			p.do(id, t)
			continue
		default:
		}
		if p.ctx.Err() == nil {
			if now := time.Since(p.start); now < p.hardOff {
				if t, ok := p.f.takeDue(now); ok {
					p.live.Direct.Add(1)
					p.do(id, t)
					continue
				}
			}
		}
		t, ok := <-p.ch
		if !ok {
			return
		}
		p.do(id, t)
	}
}

// pace waits for each tick and hands it to an idle worker or a new one,
// until the schedule ends, the hard end passes or ctx ends; every tick not
// started by then counts missed. It says whether ctx ended first.
func (p *pool) pace() (canceled bool) {
	hard := p.start.Add(p.hardOff)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	missRest := func() {
		p.live.Missed.Add(p.f.drain())
	}
	for {
		next, ok := p.f.peek()
		if !ok {
			return false
		}
		if !waitUntil(p.ctx, timer, p.start.Add(next.Intended), p.cfg.SpinWindow) {
			missRest()
			return true
		}
		if !time.Now().Before(hard) {
			missRest()
			return false
		}
		tick, ok := p.f.takeDue(time.Since(p.start))
		if !ok {
			continue // a worker took it
		}
		select {
		case p.ch <- tick:
			continue
		default:
		}
		if p.workers < p.cfg.MaxWorkers {
			p.spawn(&tick)
			continue
		}
		timer.Reset(time.Until(hard))
		select {
		case p.ch <- tick:
		case <-timer.C:
			p.live.Missed.Add(1)
			missRest()
			return false
		case <-p.ctx.Done():
			p.live.Missed.Add(1)
			missRest()
			return true
		}
	}
}
