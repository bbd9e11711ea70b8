package loadgen

import (
	"sync"
	"time"
)

// e2eShards is the number of independently locked shards of the tracker.
const e2eShards = 16

// e2eDenseTicks bounds the ticks the tracker keeps in its bit sets (a
// schedule numbers its sends from 0, so a run's ticks are dense below
// it); a tick at or past it is kept in a map. 1<<32 ticks cost at most
// 2 × 32 MiB of bits per shard, reached only by a run of 4 billion sends.
const e2eDenseTicks = 1 << 32

// e2eTracker makes the end_to_end histogram count what the checker's does:
// the first copy a recipient device stores of an ACKed send, from the
// send's intended time. A device may store a message before its sender has
// the ACK (push is faster than the answer); such a sample waits here for
// the send's outcome, and is dropped when the send failed or its outcome
// stays unknown (the checker counts those as recovered, not in end_to_end).
//
// Every send goroutine and every device goroutine calls it; the shard
// mutexes serialise them. Memory: two bits per send of the run (a map
// with an entry per send cost a hash lookup with its cache misses per
// send and per stored copy, and rehashed as it grew), plus the samples
// of sends still without an outcome.
type e2eTracker struct {
	shards [e2eShards]e2eShard
}

// e2eShard holds the ticks t with t % e2eShards == its index, at bit
// t / e2eShards.
type e2eShard struct {
	mu     sync.Mutex
	known  []uint64                   // outcome known
	acked  []uint64                   // ... and ACKed
	sparse map[uint64]bool            // ticks past e2eDenseTicks: tick -> ACKed
	wait   map[uint64][]time.Duration // tick -> samples before the outcome
}

func newE2ETracker() *e2eTracker {
	t := &e2eTracker{}
	for i := range t.shards {
		t.shards[i].sparse = map[uint64]bool{}
		t.shards[i].wait = map[uint64][]time.Duration{}
	}
	return t
}

// state returns whether tick's outcome is known and whether it was ACKed.
// Callers hold s.mu.
func (s *e2eShard) state(tick uint64) (acked, known bool) {
	if tick >= e2eDenseTicks {
		acked, known = s.sparse[tick]
		return acked, known
	}
	i := tick / e2eShards
	w, b := i/64, uint64(1)<<(i%64)
	if w >= uint64(len(s.known)) {
		return false, false
	}
	return s.acked[w]&b != 0, s.known[w]&b != 0
}

// settle records tick's outcome. Callers hold s.mu.
func (s *e2eShard) settle(tick uint64, ok bool) {
	if tick >= e2eDenseTicks {
		s.sparse[tick] = ok
		return
	}
	i := tick / e2eShards
	w, b := i/64, uint64(1)<<(i%64)
	if n := w + 1; n > uint64(len(s.known)) {
		n = max(n, 2*uint64(len(s.known)))
		s.known = append(s.known, make([]uint64, n-uint64(len(s.known)))...)
		s.acked = append(s.acked, make([]uint64, n-uint64(len(s.acked)))...)
	}
	s.known[w] |= b
	if ok {
		s.acked[w] |= b
	}
}

// stored is a device's first copy of send tick, d after its intended time:
// it is recorded in l when the send is ACKed, kept until its outcome when
// that is not known yet, dropped otherwise.
func (t *e2eTracker) stored(l *lane, tick uint64, d time.Duration) {
	s := &t.shards[tick%e2eShards]
	s.mu.Lock()
	acked, known := s.state(tick)
	if !known {
		s.wait[tick] = append(s.wait[tick], d)
	}
	s.mu.Unlock()
	if acked {
		l.record(hE2E, d)
	}
}

// outcome settles send tick (ok: ACKed) and records in l the samples that
// were waiting for it.
func (t *e2eTracker) outcome(l *lane, tick uint64, ok bool) {
	s := &t.shards[tick%e2eShards]
	s.mu.Lock()
	s.settle(tick, ok)
	waiting, had := s.wait[tick]
	if had {
		delete(s.wait, tick)
	}
	s.mu.Unlock()
	if ok {
		for _, d := range waiting {
			l.record(hE2E, d)
		}
	}
}
