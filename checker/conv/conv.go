package checker

import (
	"maps"
	"slices"
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

// conv returns the model's conversation id, made on first use.
func (m *model) conv(id uint64) *conversation {
	c := m.conversations[id]
	if c == nil {
		c = newConversation(id)
		m.conversations[id] = c
	}
	return c
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

// buildConversations runs the conversation steps of the model, after the
// inbox steps: each ACKed message at its conv_seq (into the conversation's
// log, by msg_id), then each recovered
// message where its copies put it; the effects; the history witness (its
// slots into the conversation logs); the history pages (their messages
// into the logs); the conversation pulls (their entries into the inbox
// logs).
func (m *model) buildConversations() {
	ev := m.ev
	for _, msg := range slices.Sorted(maps.Keys(ev.acks)) {
		a := ev.acks[msg]
		c := m.conv(a.conv)
		if _, taken := c.msgs[a.convSeq]; !taken { // two ACKs at one conv_seq: the log reports it
			c.msgs[a.convSeq] = convMsg{msg: msg, sender: ev.devUID[a.dev], tag: a.tick, acked: true, ackEnd: a.ended}
		}
		m.putConv(c, a.convSeq, msg, "ACK of send", a.tick)
	}
	for _, msg := range slices.Sorted(maps.Keys(m.recConv)) {
		at, tick := m.recConv[msg], m.recovered[msg]
		c := m.conv(at.conv)
		if _, taken := c.msgs[at.convSeq]; !taken {
			c.msgs[at.convSeq] = convMsg{msg: msg, sender: ev.devUID[ev.unknown[tick].dev], tag: tick}
		}
	}
	readMark := ev.target.Offers(ledger.ReadMarkCapability)
	for i := range ev.effects {
		e := &ev.effects[i]
		if readMark && e.act == ledger.ActRead {
			e.from = 1 // one mark per user: everything up to it is read
		}
		c := m.conv(e.conv)
		if e.act == ledger.ActClear || e.to-e.from >= maxIndexed {
			c.wide = append(c.wide, e)
			continue
		}
		for seq := e.from; seq <= e.to; seq++ {
			c.bySeq[seq] = append(c.bySeq[seq], e)
		}
	}
	for _, r := range ev.delRanges {
		m.conv(r.ConvID).delRanges = append(m.conv(r.ConvID).delRanges, r)
	}
	m.witnessHistory()
	for i := range ev.pages {
		m.page(&ev.pages[i])
	}
	for i := range ev.pulls {
		m.convPull(&ev.pulls[i])
	}
}

// witnessHistory takes the history witness: each slot into its
// conversation (and the message it holds into the log), each watermark
// and head.
func (m *model) witnessHistory() {
	ev := m.ev
	for i := range ev.slots {
		s := &ev.slots[i]
		c := m.conv(s.ConvID)
		c.slots[s.ConvSeq] = s
		if !s.Purged && s.MsgID != 0 {
			m.putConv(c, s.ConvSeq, s.MsgID, CheckHistoryWitness, 0)
			m.explainHistory(s.MsgID, s.Tag, s.ConvID, CheckHistoryWitness, 0)
		}
	}
	for _, w := range ev.watermarks {
		m.conv(w.ConvID).marks[w.UID] = w.MinSeq
	}
	for _, h := range ev.heads {
		c := m.conv(h.ConvID)
		c.head = max(c.head, h.MaxSeq)
	}
}

// page takes a history page a device read: the messages it shows into
// their conversation's log, and when each was first shown.
func (m *model) page(p *ledger.HistoryPage) {
	if p.Outcome != ledger.OK {
		return
	}
	c := m.conv(p.ConvID)
	for _, it := range p.Items {
		if it.Tombstone || it.MsgID == 0 {
			continue
		}
		m.putConv(c, it.ConvSeq, it.MsgID, "history page of device", uint64(p.Dev))
		m.explainHistory(it.MsgID, it.Tag, p.ConvID, "history page of device", uint64(p.Dev))
		if at, ok := c.shown[it.ConvSeq]; !ok || p.Ended < at {
			c.shown[it.ConvSeq] = p.Ended
		}
	}
}

// putConv puts msg at conv_seq seq of c's log, keeping what put reports.
func (m *model) putConv(c *conversation, seq, msg uint64, src string, id uint64) {
	first, double, other, conflict := c.log.put(seq, msg)
	if double {
		m.convDoubles = append(m.convDoubles, misplaced{uid: c.id, seq: seq, msg: msg, first: first, src: src, id: id})
	}
	if conflict {
		m.convConflicts = append(m.convConflicts, misplaced{uid: c.id, seq: seq, msg: msg, first: other, src: src, id: id})
	}
}

// explainHistory keeps a message the history holds that the ledger cannot
// account for.
func (m *model) explainHistory(msg, tag, conv uint64, src string, id uint64) {
	x := m.explain(msg, tag)
	m.stray(x, msg, seenAt{src: src, id: id, conv: conv})
	if x.by == byNothing {
		m.unexpected = append(m.unexpected, unexplained{msg: msg, tick: tag, other: x.other, why: x.why, src: src, id: id, conv: conv})
	}
}

// convPull takes a conversation pull's answer: each entry is an
// observation of the device's uid's inbox, read from the store at the
// page's end.
func (m *model) convPull(p *ledger.ConvPull) {
	if p.Outcome != ledger.OK {
		return
	}
	uid := m.ev.devUID[p.Dev]
	const src = "conv-pull of device"
	if !m.ev.target.Inbox {
		m.convPullLog(p, uid, src)
		return
	}
	for _, it := range p.Items {
		m.observe(uid, it.Seq, it.MsgID, p.ConvID, p.Ended, src, uint64(p.Dev))
		m.matchAck(it.MsgID, p.ConvID, it.ConvSeq, src, uint64(p.Dev))
		switch x := m.explain(it.MsgID, 0); {
		case x.by == byNothing:
			m.unexpected = append(m.unexpected, unexplained{msg: it.MsgID, why: x.why, src: src, id: uint64(p.Dev), seq: it.Seq})
		case !slices.Contains(x.rcpt, uid):
			m.unexpected = append(m.unexpected, unexplained{msg: it.MsgID, why: whyNotRecipient, src: src, id: uint64(p.Dev), rcpt: x.rcpt, other: uid})
		}
	}
}

// convPullLog takes a conversation pull of a target without an inbox (its
// cursor and entries are conv_seqs): each entry into the conversation's
// log, a message no send explains unexpected, one of a conversation uid is
// no party to unexpected too.
func (m *model) convPullLog(p *ledger.ConvPull, uid uint64, src string) {
	c := m.conv(p.ConvID)
	for _, it := range p.Items {
		if it.MsgID == 0 {
			continue
		}
		m.putConv(c, it.ConvSeq, it.MsgID, src, uint64(p.Dev))
		m.matchAck(it.MsgID, p.ConvID, it.ConvSeq, src, uint64(p.Dev))
		switch x := m.explain(it.MsgID, 0); {
		case x.by == byNothing:
			m.unexpected = append(m.unexpected, unexplained{msg: it.MsgID, why: x.why, src: src, id: uint64(p.Dev), conv: p.ConvID})
		case !slices.Contains(x.rcpt, uid):
			m.unexpected = append(m.unexpected, unexplained{msg: it.MsgID, why: whyNotRecipient, src: src, id: uint64(p.Dev), rcpt: x.rcpt, other: uid, conv: p.ConvID})
		}
	}
}
