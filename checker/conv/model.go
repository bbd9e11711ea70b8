package conv

import (
	"iter"
	"maps"
	"math"
	"slices"
	"time"

	"imlab/ledger"
)

// Never is the time of what no timed read showed: the end of time.
const Never = time.Duration(math.MaxInt64)

// HistoryWitness names the history witness (the check package checker
// makes of it, and the source of what its slots show).
const HistoryWitness = "history-witness"

// Evidence is the ledger's conversation records as they said them:
// conversation pulls, history pages, the actions that change a view
// (effects), the history witness (slots, watermarks, heads) and the
// target's delete log. Package checker reads the ledger once and hands
// each record to Ingest; nothing here is judged.
type Evidence struct {
	Pulls      []ledger.ConvPull
	Pages      []ledger.HistoryPage
	effects    []effect // revokes, deletes, clears, reads, in ledger order
	Slots      []ledger.Slot
	Watermarks []ledger.Watermark
	Heads      []ledger.ConvHead
	DelRanges  []ledger.DelRange
}

// effect is a conversation action that may change what someone sees of
// the conversation's messages: a revoke (for everyone), a delete-for-me,
// a clear or a mark-read (for its uid), covering conv_seqs from..to.
type effect struct {
	act        ledger.Action
	conv       uint64
	dev        uint32
	from, to   uint64
	minSeq     uint64 // a clear's answer (OK only)
	start, end time.Duration
	outcome    ledger.Outcome
}

// Ingest takes one record if it is the conversation's (an action, the
// history witness, a delete range) and says whether it was (the Record is
// reused by the reader: what is kept is copied).
func (ev *Evidence) Ingest(r *ledger.Record) bool {
	switch r.Kind {
	case ledger.KindAction:
		ev.action(r)
	case ledger.KindHistory:
		switch r.HistoryPart {
		case ledger.PartSlot:
			ev.Slots = append(ev.Slots, r.Slot)
		case ledger.PartWatermark:
			ev.Watermarks = append(ev.Watermarks, r.Watermark)
		case ledger.PartHead:
			ev.Heads = append(ev.Heads, r.Head)
		}
	case ledger.KindDelRange:
		ev.DelRanges = append(ev.DelRanges, r.DelRange)
	default:
		return false
	}
	return true
}

// action takes a conversation action: pages and pulls as they are, the
// actions that change a view as effects.
func (ev *Evidence) action(r *ledger.Record) {
	x := r.Act()
	if x == nil {
		return
	}
	e := effect{act: r.Action, conv: x.ConvID, dev: x.Dev, start: x.Started, end: x.Ended, outcome: x.Outcome}
	switch r.Action {
	case ledger.ActConvPull:
		ev.Pulls = append(ev.Pulls, r.ConvPull)
		return
	case ledger.ActHistory:
		ev.Pages = append(ev.Pages, r.History)
		return
	case ledger.ActRevoke, ledger.ActDelete:
		e.from, e.to = r.MsgAction.ConvSeq, r.MsgAction.ConvSeq
	case ledger.ActClear:
		e.from, e.to, e.minSeq = 1, r.Clear.MinSeq, r.Clear.MinSeq
		if x.Outcome != ledger.OK {
			e.to = math.MaxUint64 // whatever watermark it may have set
		}
	case ledger.ActRead:
		e.from, e.to = r.Read.From, r.Read.To
	}
	ev.effects = append(ev.effects, e)
}

// Actions counts the effects by kind.
func (ev *Evidence) Actions() (revokes, deletes, clears, reads int) {
	for _, e := range ev.effects {
		switch e.act {
		case ledger.ActRevoke:
			revokes++
		case ledger.ActDelete:
			deletes++
		case ledger.ActClear:
			clears++
		case ledger.ActRead:
			reads++
		}
	}
	return revokes, deletes, clears, reads
}

// Ledger is what the conversation model asks of the ledger's account of
// messages, which package checker's model keeps (the ACKs, the sends of
// unknown outcome, what explains a msg_id).
type Ledger interface {
	// HistoryMsg keeps a message a history shows (a witness slot, a
	// page's item: src and id name it; tag is the send its content names)
	// that the ledger cannot account for, or that a refused or retried
	// send explains.
	HistoryMsg(msg, tag, conv uint64, src string, id uint64)
	// PulledMsg keeps an entry of a conversation pull by device dev of
	// uid on a target without an inbox: at another place than its ACK's,
	// unaccounted for, or addressed to others.
	PulledMsg(msg, conv, convSeq, uid uint64, src string, dev uint32)
	// ConvOf is the conversation the ledger puts msg in: its ACK's, or
	// where a copy of a recovered message put it.
	ConvOf(msg uint64) (uint64, bool)
	// Inbox lists, in seq order, the entries of uid's inbox log in
	// conversation conv (none on a target without an inbox).
	Inbox(uid, conv uint64) []InboxEntry
	// Retained says the server's retention deleted (uid, seq) by t.
	Retained(uid, seq uint64, t time.Duration) bool
	// Sends is every send of the run, in no order.
	Sends() iter.Seq[Send]
	// Unknown is every send of unknown outcome, in no order, each with
	// the messages found of it (Send.Found).
	Unknown() iter.Seq[Send]
}

// InboxEntry is an entry of a uid's inbox log: its seq, its message, and
// when a read of the store first showed it (Never: no timed read did).
type InboxEntry struct {
	Seq, Msg uint64
	Seen     time.Duration
}

// Placed is a message at its place in a conversation as the ledger puts
// it: by its ACK (Ack), or where a copy of a recovered message put it
// (Recovered).
type Placed struct {
	Msg, Conv, ConvSeq uint64
	Sender             uint64        // the uid of the sending device
	Tag                uint64        // the send its content names
	AckEnd             time.Duration // when the ACK came (Ack only)
}

// Model is the conversations as the model knows them, built once (Ack,
// Recovered, then Build) after package checker's inbox steps; the rules
// only read it.
type Model struct {
	ev        *Evidence
	target    ledger.Capabilities
	devUID    map[uint32]uint64
	ledger    Ledger
	convs     map[uint64]*conversation
	doubles   []misplaced // one msg_id at two conv_seqs
	conflicts []misplaced // one conv_seq holding two msg_ids
	// The scope package checker's history-witness check sets: the
	// conversations the history witness judges (nil: not made).
	judged    func(conv uint64) bool
	dropped   map[uint64][]droppedDel // conv -> deletions its delete log leaves out (droppedDels)
	drainedAt time.Duration           // DrainEnd, once computed (0: not yet)
	liveness  *liveness               // refused-after-heal's bound (nil: none stated)
}

// misplaced is a conversation log's put that disagreed.
type misplaced struct {
	conv, seq, msg, first uint64 // first: the earlier conv_seq (double) or msg_id (conflict)
	src                   string
	id                    uint64
}

// NewModel is an empty model of ev's conversations on target, whose
// devices are devUID's, asking l of the ledger's messages.
func NewModel(ev *Evidence, target ledger.Capabilities, devUID map[uint32]uint64, l Ledger) *Model {
	return &Model{ev: ev, target: target, devUID: devUID, ledger: l, convs: map[uint64]*conversation{}}
}

// delLog says the target keeps a delete log (Tinode).
func (m *Model) delLog() bool { return m.target.Offers(ledger.DelRangeCapability) }

// conv returns the model's conversation id, made on first use.
func (m *Model) conv(id uint64) *conversation {
	c := m.convs[id]
	if c == nil {
		c = newConversation(id)
		m.convs[id] = c
	}
	return c
}

// Ack puts an ACKed message at its conv_seq (into the conversation's log;
// the first of two ACKs at one conv_seq is the model's message there).
func (m *Model) Ack(p Placed) {
	c := m.conv(p.Conv)
	if _, taken := c.msgs[p.ConvSeq]; !taken { // two ACKs at one conv_seq: the log reports it
		c.msgs[p.ConvSeq] = convMsg{msg: p.Msg, sender: p.Sender, tag: p.Tag, acked: true, ackEnd: p.AckEnd}
	}
	m.putConv(c, p.ConvSeq, p.Msg, "ACK of send", p.Tag)
}

// Recovered puts a recovered message where its copies put it, unless a
// message is there already.
func (m *Model) Recovered(p Placed) {
	c := m.conv(p.Conv)
	if _, taken := c.msgs[p.ConvSeq]; !taken {
		c.msgs[p.ConvSeq] = convMsg{msg: p.Msg, sender: p.Sender, tag: p.Tag}
	}
}

// Build runs the rest of the conversation steps, after the messages
// (Ack, Recovered): the effects; the delete ranges; the history witness
// (its slots into the conversation logs); the history pages (their
// messages into the logs); on a target without an inbox, the conversation
// pulls (their entries into the logs; with an inbox, package checker puts
// them into its inbox logs after this).
func (m *Model) Build() {
	ev := m.ev
	readMark := m.target.Offers(ledger.ReadMarkCapability)
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
	for _, r := range ev.DelRanges {
		m.conv(r.ConvID).delRanges = append(m.conv(r.ConvID).delRanges, r)
	}
	m.witnessHistory()
	for i := range ev.Pages {
		m.page(&ev.Pages[i])
	}
	if m.target.Inbox {
		return
	}
	for i := range ev.Pulls {
		m.convPull(&ev.Pulls[i])
	}
}

// witnessHistory takes the history witness: each slot into its
// conversation (and the message it holds into the log), each watermark
// and head.
func (m *Model) witnessHistory() {
	ev := m.ev
	for i := range ev.Slots {
		s := &ev.Slots[i]
		c := m.conv(s.ConvID)
		c.slots[s.ConvSeq] = s
		if !s.Purged && s.MsgID != 0 {
			m.putConv(c, s.ConvSeq, s.MsgID, HistoryWitness, 0)
			m.ledger.HistoryMsg(s.MsgID, s.Tag, s.ConvID, HistoryWitness, 0)
		}
	}
	for _, w := range ev.Watermarks {
		m.conv(w.ConvID).marks[w.UID] = w.MinSeq
	}
	for _, h := range ev.Heads {
		c := m.conv(h.ConvID)
		c.head = max(c.head, h.MaxSeq)
	}
}

// page takes a history page a device read: the messages it shows into
// their conversation's log, and when each was first shown.
func (m *Model) page(p *ledger.HistoryPage) {
	if p.Outcome != ledger.OK {
		return
	}
	c := m.conv(p.ConvID)
	for _, it := range p.Items {
		if it.Tombstone || it.MsgID == 0 {
			continue
		}
		m.putConv(c, it.ConvSeq, it.MsgID, "history page of device", uint64(p.Dev))
		m.ledger.HistoryMsg(it.MsgID, it.Tag, p.ConvID, "history page of device", uint64(p.Dev))
		if at, ok := c.shown[it.ConvSeq]; !ok || p.Ended < at {
			c.shown[it.ConvSeq] = p.Ended
		}
	}
}

// putConv puts msg at conv_seq seq of c's log, keeping what put reports.
func (m *Model) putConv(c *conversation, seq, msg uint64, src string, id uint64) {
	first, double, other, conflict := c.log.put(seq, msg)
	if double {
		m.doubles = append(m.doubles, misplaced{conv: c.id, seq: seq, msg: msg, first: first, src: src, id: id})
	}
	if conflict {
		m.conflicts = append(m.conflicts, misplaced{conv: c.id, seq: seq, msg: msg, first: other, src: src, id: id})
	}
}

// convPull takes a conversation pull of a target without an inbox (its
// cursor and entries are conv_seqs): each entry into the conversation's
// log, and to the ledger (PulledMsg).
func (m *Model) convPull(p *ledger.ConvPull) {
	if p.Outcome != ledger.OK {
		return
	}
	const src = "conv-pull of device"
	uid := m.devUID[p.Dev]
	c := m.conv(p.ConvID)
	for _, it := range p.Items {
		if it.MsgID == 0 {
			continue
		}
		m.putConv(c, it.ConvSeq, it.MsgID, src, uint64(p.Dev))
		m.ledger.PulledMsg(it.MsgID, p.ConvID, it.ConvSeq, uid, src, p.Dev)
	}
}

// convLog is one conversation as a log: conv_seq -> one message, each message
// at one conv_seq. Built from the ACKs, the history witness, the pages and
// the pulls; put reports a conv_seq holding a second message and a message
// at a second conv_seq.
type convLog struct {
	bySeq map[uint64]uint64 // conv_seq -> first msg_id
	seqOf map[uint64]uint64 // msg_id -> first conv_seq
}

func newConvLog() *convLog { return &convLog{bySeq: map[uint64]uint64{}, seqOf: map[uint64]uint64{}} }

func (l *convLog) put(seq, m uint64) (firstSeq uint64, double bool, other uint64, conflict bool) {
	if first, ok := l.seqOf[m]; !ok {
		l.seqOf[m] = seq
	} else if first != seq {
		firstSeq, double = first, true
	}
	if o, ok := l.bySeq[seq]; !ok {
		l.bySeq[seq] = m
	} else if o != m {
		other, conflict = o, true
	}
	return firstSeq, double, other, conflict
}

// Judge sets the conversations the history witness judges (package
// checker's history-witness check, when it is made).
func (m *Model) Judge(judged func(conv uint64) bool) { m.judged = judged }

// Judging says the history witness is judged.
func (m *Model) Judging() bool { return m.judged != nil }

// HiddenFrom says something sent before t may hide conv_seq seq of conv
// from uid from a read at t (false for a conversation the model does not
// know).
func (m *Model) HiddenFrom(conv, uid, seq uint64, t time.Duration) bool {
	c := m.convs[conv]
	return c != nil && m.mayHide(c, uid, seq, t, t)
}

// judgedConvs lists, in order, the conversations the history witness
// judges.
func (m *Model) judgedConvs() []*conversation {
	if m.judged == nil {
		return nil
	}
	var out []*conversation
	for _, id := range slices.Sorted(maps.Keys(m.convs)) {
		if m.judged(id) {
			out = append(out, m.convs[id])
		}
	}
	return out
}
