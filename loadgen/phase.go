package loadgen

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Phases of a run, in order, as the live line names them.
const (
	PhaseSending = "sending" // the schedule is running
	PhaseSettle  = "settle"  // waiting Settle after the last send
	PhaseDrain   = "drain"   // every device pulls to the end (then drain rounds while the server still appends)
	PhaseWitness = "witness" // one whole-inbox pull per user
)

// progress is the run's current phase and how far it has come, for the
// live line. Run's goroutine enters phases; device and witness goroutines
// step; the reporter reads.
type progress struct {
	mu    sync.Mutex
	phase string
	round int
	since time.Time
	total int
	done  atomic.Int64
}

// enter starts phase (round > 0: a repeated drain round) with total items.
func (p *progress) enter(phase string, round, total int) {
	p.mu.Lock()
	p.phase, p.round, p.since, p.total = phase, round, time.Now(), total
	p.done.Store(0)
	p.mu.Unlock()
}

// step counts one item of the current phase done.
func (p *progress) step() { p.done.Add(1) }

// line describes the current phase for the live line: its name, how far
// (items done of total, time spent of its bound) — "" while sending (the
// send line says that).
func (p *progress) line(cfg *Config) string {
	p.mu.Lock()
	phase, round, since, total := p.phase, p.round, p.since, p.total
	p.mu.Unlock()
	el := time.Since(since).Round(100 * time.Millisecond)
	done := p.done.Load()
	switch phase {
	case PhaseSettle:
		return fmt.Sprintf("%s %s of %s", phase, el, cfg.Settle)
	case PhaseDrain:
		name := phase
		if round > 0 {
			name = fmt.Sprintf("%s round %d", phase, round+1)
		}
		return fmt.Sprintf("%s: %d/%d devices at the end, %s (bound %s for the whole drain)", name, done, total, el, cfg.DrainTimeout)
	case PhaseWitness:
		return fmt.Sprintf("%s: %d/%d users' inboxes read, %s", phase, done, total, el)
	}
	return ""
}
