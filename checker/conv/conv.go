package conv

import (
	"time"

	"imlab/ledger"
)

// conversation is one conversation as the model knows it: its log
// (conv_seq -> message: the ACKs, then the messages of sends of unknown
// outcome found at a conv_seq), the actions that may change how each user
// sees it, and the history witness's reading of it.
type conversation struct {
	id   uint64
	log  *convLog
	msgs map[uint64]convMsg // conv_seq -> the message the model puts there
	// Effects (revoke, delete, read) by the conv_seqs they cover; wide:
	// clears, and the reads over more than maxIndexed conv_seqs.
	bySeq map[uint64][]*effect
	wide  []*effect
	// The history witness.
	slots map[uint64]*ledger.Slot
	marks map[uint64]uint64 // uid -> its stored clear watermark
	head  uint64            // the highest conv_seq the server says it allocated
	// shown: conv_seq -> the earliest end of a history page showing its
	// message (a read marks only what the history holds at the time).
	shown map[uint64]time.Duration
	// deleted ranges of the target's delete log, for everyone (uid 0) or
	// for one uid.
	delRanges []ledger.DelRange
}

// convMsg is a message at its conv_seq.
type convMsg struct {
	msg    uint64
	sender uint64 // the uid of the sending device
	tag    uint64 // the send its content names
	acked  bool   // by an ACK (else: a send of unknown outcome's, found there)
	ackEnd time.Duration
}

// maxIndexed bounds the conv_seqs one effect is indexed under (a read of
// a wider range is kept in wide and scanned).
const maxIndexed = 4096

func newConversation(id uint64) *conversation {
	return &conversation{id: id, log: newConvLog(), msgs: map[uint64]convMsg{}, bySeq: map[uint64][]*effect{},
		slots: map[uint64]*ledger.Slot{}, marks: map[uint64]uint64{}, shown: map[uint64]time.Duration{}}
}

// maybe is how sure the model is that an effect holds at a read.
type maybe uint8

// Certainties, in order.
const (
	no      maybe = iota // no action could have done it by then
	perhaps              // an unanswered action, or one concurrent with the read
	yes                  // an action answered 2xx ended before the read began
)

func (x maybe) String() string { return [...]string{"no", "perhaps", "yes"}[x] }

// holds says whether an effect of kind a matching who holds at conv_seq
// seq for a read over [rs, re]: yes if an action answered OK ended before
// rs; perhaps if one answered OK, or unanswered (unknown), started by re;
// no otherwise (a refused action did nothing; one started after re cannot
// show). A read marks only messages already in the history: a mark-read
// holds for sure only if some page showed the message before the mark
// began.
func (c *conversation) holds(a ledger.Action, seq uint64, rs, re time.Duration, who func(e *effect) bool) maybe {
	out := no
	check := func(e *effect) {
		if e.act != a || seq < e.from || seq > e.to || !who(e) || e.outcome == ledger.Fail || e.start > re {
			return
		}
		if e.outcome == ledger.OK && e.end < rs && (a != ledger.ActRead || c.shownBefore(seq, e.start)) {
			out = yes
		} else if out == no {
			out = perhaps
		}
	}
	for _, e := range c.bySeq[seq] {
		check(e)
	}
	for _, e := range c.wide {
		check(e)
	}
	return out
}

// shownBefore says a history page showed the message at seq before t.
func (c *conversation) shownBefore(seq uint64, t time.Duration) bool {
	at, ok := c.shown[seq]
	return ok && at < t
}

// watermark is the highest min_seq the clears by uid answered OK before
// t, and whether some other clear (unanswered, or concurrent) may have set
// more.
func (c *conversation) watermark(uid uint64, uidOf func(uint32) uint64, rs, re time.Duration) (sure uint64, more bool) {
	for _, e := range c.wide {
		if e.act != ledger.ActClear || uidOf(e.dev) != uid || e.outcome == ledger.Fail || e.start > re {
			continue
		}
		if e.outcome == ledger.OK && e.end < rs {
			sure = max(sure, e.minSeq)
		} else {
			more = true
		}
	}
	return sure, more
}

// deletedRange says the target's delete log covers seq for uid (or for
// everyone).
func (c *conversation) deletedRange(seq, uid uint64) bool {
	for _, r := range c.delRanges {
		if seq >= r.From && seq <= r.To && (r.UID == 0 || r.UID == uid) {
			return true
		}
	}
	return false
}

// deletedAny says a range of the target's delete log covers seq for
// everyone or for some uid: the history witness reads a conversation as
// one of its members, from whom the target hides that member's own
// deletes.
func (c *conversation) deletedAny(seq uint64) bool {
	for _, r := range c.delRanges {
		if seq >= r.From && seq <= r.To {
			return true
		}
	}
	return false
}
