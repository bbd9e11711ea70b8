package loadgen

import (
	"sync"
	"time"
)

// e2eShards is the number of independently locked shards of the tracker.
const e2eShards = 16

// e2eTracker makes the end_to_end histogram count what the checker's does:
// the first copy a recipient device stores of an ACKed send, from the
// send's intended time. A device may store a message before its sender has
// the ACK (push is faster than the answer); such a sample waits here for
// the send's outcome, and is dropped when the send failed or its outcome
// stays unknown (the checker counts those as recovered, not in end_to_end).
//
// Every send goroutine and every device goroutine calls it; the shard
// mutexes serialise them. Memory: one map entry per send of the run, plus
// the samples of sends still without an outcome.
type e2eTracker struct {
	shards [e2eShards]struct {
		mu    sync.Mutex
		state map[uint64]bool            // tick -> ACKed (present: outcome known)
		wait  map[uint64][]time.Duration // tick -> samples before the outcome
	}
}

func newE2ETracker() *e2eTracker {
	t := &e2eTracker{}
	for i := range t.shards {
		t.shards[i].state = map[uint64]bool{}
		t.shards[i].wait = map[uint64][]time.Duration{}
	}
	return t
}

// stored is a device's first copy of send tick, d after its intended time:
// it is recorded in l when the send is ACKed, kept until its outcome when
// that is not known yet, dropped otherwise.
func (t *e2eTracker) stored(l *lane, tick uint64, d time.Duration) {
	s := &t.shards[tick%e2eShards]
	s.mu.Lock()
	acked, known := s.state[tick]
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
	s.state[tick] = ok
	waiting := s.wait[tick]
	delete(s.wait, tick)
	s.mu.Unlock()
	if ok {
		for _, d := range waiting {
			l.record(hE2E, d)
		}
	}
}
