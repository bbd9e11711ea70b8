package send

import "sync"

// claims keeps, for the strict policy, the uids whose seq_fence rows a
// batch in flight writes, and which committer's batch that is. A committer
// takes into its batch only the messages none of whose recipients another
// committer holds (claim), and leaves the others for its next batch; it
// gives its uids back after the batch is answered (release). So batches of
// one process never wait on each other's fence rows in MySQL, and the seq
// proposals of a uid reach its fence in the order they were taken, which
// is what the guarded fence raise bets on.
//
// Order: a conversation's messages are all in one committer's queue; once
// one of them is left for later, every later one of that conversation in
// the same round is left too, so a conversation is never reordered.
//
// Fairness: a committer that left a message for a uid another holds marks
// the uid wanted; the holder then leaves its own messages for that uid until
// the one that wanted it has taken it. So a hot uid (a bot, a big group's
// active members) goes from committer to committer, each batch taking all
// its queued messages for the uid at once, and no committer starves.
//
// The claims only shape batches: MySQL's row locks still guard the fence
// (another process, a shutdown drain), so a wrong claim costs a lock wait,
// never a promise.
type claims struct {
	mu      sync.Mutex
	owner   map[uint64]int // uid -> committer whose batch holds it
	wanted  map[uint64]int // uid -> committer that left a message for it
	mine    [][]uint64     // per committer: the uids it marked wanted
	changed chan struct{}  // closed (and replaced) by every release
	convs   map[uint64]struct{}
}

func newClaims(committers int) *claims {
	return &claims{
		owner:   make(map[uint64]int),
		wanted:  make(map[uint64]int),
		mine:    make([][]uint64, committers),
		changed: make(chan struct{}),
		convs:   make(map[uint64]struct{}),
	}
}

// claim splits batch (committer c's candidates, oldest first) into take
// (appended to take, its uids now held by c) and left (appended to left, to
// be tried again in c's next batch, before anything newer). changed is
// closed at the next release by any committer: a committer left with
// nothing to take waits for it.
func (cl *claims) claim(c int, batch, take, left []*Pending) (taken, kept []*Pending, changed <-chan struct{}) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, u := range cl.mine[c] {
		if cl.wanted[u] == c {
			delete(cl.wanted, u)
		}
	}
	cl.mine[c] = cl.mine[c][:0]
	clear(cl.convs)
	for _, p := range batch {
		if _, later := cl.convs[p.Msg.ConvID]; later || !cl.free(c, p.Recipients) {
			cl.convs[p.Msg.ConvID] = struct{}{}
			left = append(left, p)
			for _, u := range p.Recipients {
				if o, held := cl.owner[u]; held && o != c {
					if _, ok := cl.wanted[u]; !ok {
						cl.wanted[u] = c
						cl.mine[c] = append(cl.mine[c], u)
					}
				}
			}
			continue
		}
		for _, u := range p.Recipients {
			cl.owner[u] = c
		}
		take = append(take, p)
	}
	return take, left, cl.changed
}

// free tells whether committer c may take a message for uids: none is held
// by another committer or wanted by one.
func (cl *claims) free(c int, uids []uint64) bool {
	for _, u := range uids {
		if o, held := cl.owner[u]; held && o != c {
			return false
		}
		if w, ok := cl.wanted[u]; ok && w != c {
			return false
		}
	}
	return true
}

// release gives back the uids of batch (taken by committer c) and wakes
// the committers waiting for a change.
func (cl *claims) release(c int, batch []*Pending) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, p := range batch {
		for _, u := range p.Recipients {
			if cl.owner[u] == c {
				delete(cl.owner, u)
			}
		}
	}
	close(cl.changed)
	cl.changed = make(chan struct{})
}
