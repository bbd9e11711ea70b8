package send

import (
	"context"
	"sync"
	"time"
)

// claims keeps, for the strict policy, the uids whose seq_fence rows a
// batch in flight writes, and which batch that is. Before a committer
// commits a gathered batch it claims the batch's uids:
//
//   - Few conflicts (the usual case: another committer's batch in flight
//     holds a recipient of fewer than half of the messages): those messages,
//     and every later one of their conversations, are left for this
//     committer's next batch. So batches of one process do not wait on each
//     other's fence rows, and a uid's seq proposals reach its fence in the
//     order they were taken, which is what the guarded fence raise bets on.
//   - Many conflicts (a hot uid, a bot, a big group's active members: most
//     messages share a recipient with the batch in flight): leaving them
//     would serialise the committers, so the whole batch is taken and
//     ordered behind the batches it shares uids with (its ticket's deps):
//     its proposals are taken after theirs, and its fence step waits (at
//     most fenceOrderWait) until theirs ran, so MySQL then makes it wait for
//     their COMMIT on the shared rows while its own first statements have
//     already run beside theirs. Each batch takes the hot row once for all
//     its messages for it.
//
// Order: a conversation's messages are all in one committer's queue; once
// one of them is left for later, every later one of that conversation in
// the same round is left too, so a conversation is never reordered.
//
// Fairness: a committer that left a message for a uid another holds marks
// the uid wanted; the holder then leaves its own messages for that uid until
// the one that wanted it has taken it (or shares it, in the many-conflicts
// case), so no committer starves.
//
// The claims only shape and order batches: MySQL's row locks still guard
// the fence (another process, a shutdown drain, a wait that timed out), so
// a wrong claim costs a lock wait or a guard miss, never a promise.
type claims struct {
	mu      sync.Mutex
	owner   map[uint64]*ticket  // uid -> the latest batch in flight holding it
	wanted  map[uint64]int      // uid -> committer that left a message for it
	mine    [][]uint64          // per committer: the uids it marked wanted
	changed chan struct{}       // closed (and replaced) by every release
	convs   map[uint64]struct{} // claim's scratch: conversations with a message that waits
	waits   []bool              // claim's scratch: which messages of the batch wait
	deps    map[*ticket]struct{}
}

// fenceOrderWait bounds how long a batch's fence step waits for the fence
// steps of the batches it is ordered behind (a batch held up elsewhere, e.g.
// by another process's locks, must not hold this one for longer: the guard
// then may miss, which the locking read repairs).
const fenceOrderWait = 50 * time.Millisecond

// ticket is one claimed batch: its committer, the batches in flight it is
// ordered behind, and the signals the batches ordered behind it wait for.
type ticket struct {
	committer int
	deps      []*ticket
	proposed  chan struct{} // closed once its seq proposals are taken, or never will be
	fenced    chan struct{} // closed once its fence step ran, or never will
	pOnce     sync.Once
	fOnce     sync.Once
}

func newTicket(c int) *ticket {
	return &ticket{committer: c, proposed: make(chan struct{}), fenced: make(chan struct{})}
}

// doneProposing and doneFencing are idempotent; a nil ticket is a batch
// without claims.
func (t *ticket) doneProposing() {
	if t != nil {
		t.pOnce.Do(func() { close(t.proposed) })
	}
}

func (t *ticket) doneFencing() {
	if t != nil {
		t.fOnce.Do(func() { close(t.fenced) })
	}
}

// end releases whatever t's batch did not signal (an attempt that failed
// early, a batch that never reached its fence step).
func (t *ticket) end() {
	t.doneProposing()
	t.doneFencing()
}

// awaitProposed waits until every dep took its proposals (or ctx ends).
func (t *ticket) awaitProposed(ctx context.Context) {
	if t == nil {
		return
	}
	for _, d := range t.deps {
		select {
		case <-d.proposed:
		case <-ctx.Done():
			return
		}
	}
}

// awaitFenced waits until every dep ran its fence step, at most
// fenceOrderWait in all (or until ctx ends).
func (t *ticket) awaitFenced(ctx context.Context) {
	if t == nil || len(t.deps) == 0 {
		return
	}
	timer := time.NewTimer(fenceOrderWait)
	defer timer.Stop()
	for _, d := range t.deps {
		select {
		case <-d.fenced:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func newClaims(committers int) *claims {
	return &claims{
		owner:   make(map[uint64]*ticket),
		wanted:  make(map[uint64]int),
		mine:    make([][]uint64, committers),
		changed: make(chan struct{}),
		convs:   make(map[uint64]struct{}),
		deps:    make(map[*ticket]struct{}),
	}
}

// claim splits batch (committer c's candidates, oldest first) into take
// (appended to take, its uids now held by the returned ticket) and left
// (appended to left, to be tried again in c's next batch, before anything
// newer). changed is closed at the next release by any committer: a
// committer left with nothing to take waits for it. The ticket is nil when
// nothing was taken.
func (cl *claims) claim(c int, batch, take, left []*Pending) (taken, kept []*Pending, t *ticket, changed <-chan struct{}) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, u := range cl.mine[c] {
		if cl.wanted[u] == c {
			delete(cl.wanted, u)
		}
	}
	cl.mine[c] = cl.mine[c][:0]
	// Which messages must wait: a recipient held or wanted by another
	// committer, or an earlier message of the conversation waits. Taking a
	// message changes nothing the others are judged by (c's own holds and
	// marks do not count against c), so this is decided once.
	clear(cl.convs)
	cl.waits = cl.waits[:0]
	conflicts := 0
	for _, p := range batch {
		_, later := cl.convs[p.Msg.ConvID]
		w := later || !cl.free(c, p.Recipients)
		if w {
			cl.convs[p.Msg.ConvID] = struct{}{}
			conflicts++
		}
		cl.waits = append(cl.waits, w)
	}
	t = newTicket(c)
	if conflicts > 0 && 2*conflicts >= len(batch) {
		// Many conflicts: share, ordered behind the holders.
		clear(cl.deps)
		for _, p := range batch {
			for _, u := range p.Recipients {
				if o, held := cl.owner[u]; held && o.committer != c {
					if _, seen := cl.deps[o]; !seen {
						cl.deps[o] = struct{}{}
						t.deps = append(t.deps, o)
					}
				}
				cl.owner[u] = t
			}
		}
		return append(take, batch...), left, t, cl.changed
	}
	for i, p := range batch {
		if cl.waits[i] {
			left = append(left, p)
			cl.markWanted(c, p.Recipients)
			continue
		}
		for _, u := range p.Recipients {
			cl.owner[u] = t
		}
		take = append(take, p)
	}
	if len(take) == 0 {
		t = nil
	}
	return take, left, t, cl.changed
}

// free tells whether committer c may take a message for uids: none is held
// by another committer or wanted by one.
func (cl *claims) free(c int, uids []uint64) bool {
	for _, u := range uids {
		if o, held := cl.owner[u]; held && o.committer != c {
			return false
		}
		if w, ok := cl.wanted[u]; ok && w != c {
			return false
		}
	}
	return true
}

// markWanted marks, for committer c, the uids another committer holds.
func (cl *claims) markWanted(c int, uids []uint64) {
	for _, u := range uids {
		if o, held := cl.owner[u]; held && o.committer != c {
			if _, ok := cl.wanted[u]; !ok {
				cl.wanted[u] = c
				cl.mine[c] = append(cl.mine[c], u)
			}
		}
	}
}

// release gives back the uids of batch (taken under t) that t still holds
// (a later sharing batch may hold some now), ends t, and wakes the
// committers waiting for a change.
func (cl *claims) release(t *ticket, batch []*Pending) {
	t.end()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, p := range batch {
		for _, u := range p.Recipients {
			if cl.owner[u] == t {
				delete(cl.owner, u)
			}
		}
	}
	close(cl.changed)
	cl.changed = make(chan struct{})
}
