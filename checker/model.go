package checker

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"imlab/checker/conv"
	"imlab/checker/retention"
	"imlab/ledger"
)

// inboxLog is one uid's inbox as every observation saw it: (uid, seq) ->
// one message, each message at one seq. The first observation of a seq
// and of a message is kept; put reports the observation that disagrees.
type inboxLog struct {
	seqOf map[uint64]uint64    // msg_id -> first seq seen
	at    map[uint64]inboxSlot // seq -> first entry seen
}

// inboxSlot is what the inbox log knows of one seq: its message, its
// conversation, and the earliest time a read of the store showed it (a
// pulled delivery, a conversation pull; never: only witnesses or pushes
// showed it).
type inboxSlot struct {
	msg, conv uint64
	seen      time.Duration
}

// never is the seen time of an entry no timed read of the store showed.
const never = conv.Never

func newInboxLog() *inboxLog {
	return &inboxLog{seqOf: map[uint64]uint64{}, at: map[uint64]inboxSlot{}}
}

// put records msg_id m of conversation conv at seq, shown by a read of the
// store at seen (never: not a timed read). It returns the seq m was first
// seen at when that is another one (double: m is stored twice), and the
// msg_id seq first held when that is another one (conflict: seq reused).
func (l *inboxLog) put(seq, m, conv uint64, seen time.Duration) (firstSeq uint64, double bool, other uint64, conflict bool) {
	if first, ok := l.seqOf[m]; !ok {
		l.seqOf[m] = seq
	} else if first != seq {
		firstSeq, double = first, true
	}
	switch o, ok := l.at[seq]; {
	case !ok:
		l.at[seq] = inboxSlot{msg: m, conv: conv, seen: seen}
	case o.msg != m:
		other, conflict = o.msg, true
	case seen < o.seen:
		o.seen = seen
		l.at[seq] = o
	}
	return firstSeq, double, other, conflict
}

// deviceLog is what one device stored: the first copy of each message,
// and the last conv_seq of each conversation in its order.
type deviceLog struct {
	uid      uint64
	got      map[uint64]firstCopy // msg_id -> its first copy
	lastConv map[uint64]uint64    // conv_id -> last conv_seq (repeats dropped)
	// passes: conv_id -> the first copies' conv_seqs and times (kept on a
	// target with a delete log only: readBy).
	passes map[uint64]*conv.Passes
}

type firstCopy struct {
	seq uint64
	at  time.Duration
}

// How the ledger accounts for a message (explain).
const (
	byNothing = iota // no ACK and no send of unknown outcome: unexplained
	byAck            // its ACK
	byUnknown        // the send of unknown outcome its content names: recovered
	byFailed         // a send answered with a definite error: failed-but-stored
	byRetry          // a second message of a retried send on a target without idempotent send
)

// explanation is how the ledger accounts for one msg_id.
type explanation struct {
	by   int
	tick uint64   // the send
	rcpt []uint64 // whom it is for (by != byNothing)
	// Unexplained (by == byNothing): why (whyNoAck, whyOtherOfAcked,
	// whySecondOfSend), and other, the msg_id that already carries the
	// send, or the one its ACK names.
	why   int
	other uint64
}

// Anomalies the model's steps report; the rules turn them into findings.
type (
	// unexplained: a message the ledger cannot account for, or stored where
	// its explanation says it does not belong.
	unexplained struct {
		msg, tick, other uint64
		why              int // whyNoAck, whyOtherOfAcked, whySecondOfSend, whyNotRecipient, whyAckedTwice
		src              string
		id               uint64   // device or uid of the observation
		rcpt             []uint64 // whyNotRecipient: whom it was for
		seq              uint64   // the inbox seq it was seen at
		conv             uint64   // history observations: the conversation
	}
	// misplaced: an inbox log's put that disagreed (double-stored or
	// seq-conflict).
	misplaced struct {
		uid, seq, msg, first uint64 // first: the earlier seq (double) or msg_id (conflict)
		src                  string
		id                   uint64
	}
	// mismatch: an observation of an ACKed message elsewhere than its ACK.
	mismatch struct {
		msg, conv, convSeq uint64
		src                string
		id                 uint64
	}
	// outOfOrder: a conv_seq at or below the last one of its conversation.
	outOfOrder struct {
		msg, conv, convSeq, last uint64
		seq, lastSeq             uint64 // witnessed inboxes: the seqs
		src                      string // "device" or a witness
		id                       uint64
	}
	// strayMsg: a message of a failed send, or a second one of a retried
	// send (other: the first), and where it was seen first.
	strayMsg struct {
		msg, tick, other uint64
		at               seenAt
	}
	// missing: a recipient device that never stored a message.
	missing struct {
		msg, uid uint64
		dev      uint32
	}
)

// Reasons a message is unexpected.
const (
	whyNoAck = iota
	whyOtherOfAcked
	whySecondOfSend
	whyNotRecipient
	whyAckedTwice
)

// model is the checker's picture of the run, built once from the
// evidence (buildModel) in a fixed order; the rules only read it.
type model struct {
	ev        *evidence
	inbox     map[uint64]*inboxLog  // uid -> its inbox log
	devs      map[uint32]*deviceLog // every device seen
	recovered map[uint64]uint64     // msg_id -> the send of unknown outcome it carries
	recTick   map[uint64]uint64     // tick -> its recovered msg_id
	witnessed map[uint64]*witnessed // msg_ids a witness saw
	stored    map[uint64]map[uint64]bool
	// What the steps reported, in the order they met it.
	unexpected []unexplained
	doubles    []misplaced
	conflicts  []misplaced
	mismatches []mismatch
	dupCopies  int
	dupMsgs    map[uint64]bool
	reorders   []outOfOrder
	missing    map[uint64][]missing // msg_id -> recipient devices without it
	okCount    int
	wEntries   map[uint64][]entry // uid -> pull witness entries
	sEntries   map[uint64][]entry // uid -> store witness entries
	endToEnd   *hdr.Histogram
	// The scope the evidence checks set (checks.go): the uids whose
	// store witness is judged (nil: the check is not made), and the ack
	// policy's promise (nil: read-after-ACK is not made, or the policy
	// promises nothing).
	storeJudged func(uid uint64) bool
	promise     *promise
	// Conversations (version 3): the conversation model (package conv).
	cv           *conv.Model
	recConv      map[uint64]convAt // recovered msg_id -> where its first copy put it
	failedStored []strayMsg        // messages of sends answered with a definite error
	retried      []strayMsg        // second messages of retried sends (no idempotent send)
	// Indexes built on first use: uid -> conv_id -> its inbox seqs.
	byConv map[uint64]map[uint64][]uint64
	// Retention (version 3: package retention); the scope the version 3
	// checks set is theirs (conv.Model.Judge, retention.Model.Judge).
	rt       *retention.Model
	liveness *Liveness // the run's heal time and bound (nil: none stated)
	delLog   bool      // the target keeps a delete log (ledger.DelRangeCapability)
}

// convAt is a place in a conversation.
type convAt struct{ conv, convSeq uint64 }

// witnessed is what the witnesses (pull and store) saw of one msg_id.
type witnessed struct {
	tick uint64   // the send its content names (0: none, or an older ledger)
	uids []uint64 // inboxes holding it
	src  []string // the witness of each uid entry
	at   convAt   // where the first entry put it
}

// entry is one witnessed inbox entry (order checks).
type entry struct{ seq, msgID, conv, convSeq uint64 }

// buildModel runs the model's steps over the evidence, in this order:
// every witness entry into its uid's
// inbox log (ledger order); which message each send of unknown outcome
// became (recover); every delivery into its device's log and its
// uid's inbox log (ledger order); the witnessed messages' explanations
// (by msg_id); the conversation order of each witnessed inbox (pull, then
// store witness, by uid); the conversations (buildConversations); which
// recipient devices miss each ACKed or recovered message. The witness entries and the deliveries are let go
// block by block as their steps take them (chunked.drain): what the rules
// read of them is in the logs.
func buildModel(ev *evidence) *model {
	m := &model{ev: ev, inbox: map[uint64]*inboxLog{}, devs: map[uint32]*deviceLog{},
		recovered: map[uint64]uint64{}, recTick: map[uint64]uint64{}, witnessed: map[uint64]*witnessed{},
		stored: map[uint64]map[uint64]bool{}, dupMsgs: map[uint64]bool{}, missing: map[uint64][]missing{},
		wEntries: map[uint64][]entry{}, sEntries: map[uint64][]entry{}, endToEnd: newLatencyHist(),
		recConv: map[uint64]convAt{},
		delLog:  ev.target.Offers(ledger.DelRangeCapability), rt: retention.NewModel(&ev.rt, ev.cursors, ev.uidDevs)}
	for id, uid := range ev.devUID {
		m.dev(id).uid = uid
	}
	for d := range ev.claims {
		m.dev(d)
	}
	for _, a := range ev.ackedTwice {
		m.unexpected = append(m.unexpected, unexplained{msg: a.msg, why: whyAckedTwice, tick: a.first, other: a.second})
	}
	ev.entries.Drain(m.witnessEntry)
	m.recover()
	ev.deliveries.Drain(m.delivery)
	for _, msg := range slices.Sorted(maps.Keys(m.witnessed)) {
		m.explainWitnessed(msg, m.witnessed[msg])
	}
	for _, uid := range slices.Sorted(maps.Keys(m.wEntries)) {
		m.inboxOrder(CheckPullWitness, uid, m.wEntries[uid])
	}
	for _, uid := range slices.Sorted(maps.Keys(m.sEntries)) {
		m.inboxOrder(CheckStoreWitness, uid, m.sEntries[uid])
	}
	for msg := range m.recovered {
		if x, ok := m.witnessed[msg]; ok {
			if _, known := m.recConv[msg]; !known && x.at.conv != 0 {
				m.recConv[msg] = x.at
			}
		}
	}
	m.buildConversations()
	m.deliveredTo()
	return m
}

func (m *model) dev(id uint32) *deviceLog {
	d := m.devs[id]
	if d == nil {
		d = &deviceLog{got: map[uint64]firstCopy{}, lastConv: map[uint64]uint64{}, passes: map[uint64]*conv.Passes{}}
		m.devs[id] = d
	}
	return d
}

// observe puts msg_id msg of conversation conv at (uid, seq) into the
// uid's inbox log, keeping what put reports (src and id name the
// observation; seen is when a read of the store showed it, or never). A
// target without a per-user inbox has no inbox log.
func (m *model) observe(uid, seq, msg, conv uint64, seen time.Duration, src string, id uint64) {
	if !m.ev.target.Inbox {
		return // no inbox log: deliveries carry no inbox seq
	}
	l := m.inbox[uid]
	if l == nil {
		l = newInboxLog()
		m.inbox[uid] = l
	}
	first, double, other, conflict := l.put(seq, msg, conv, seen)
	if double {
		m.doubles = append(m.doubles, misplaced{uid: uid, seq: seq, msg: msg, first: first, src: src, id: id})
	}
	if conflict {
		m.conflicts = append(m.conflicts, misplaced{uid: uid, seq: seq, msg: msg, first: other, src: src, id: id})
	}
}

// matchAck keeps an observation of an ACKed msg_id that disagrees with
// its ACK's conversation or conv_seq.
func (m *model) matchAck(msg, conv, convSeq uint64, src string, id uint64) {
	if a, ok := m.ev.acks[msg]; ok && (a.conv != conv || a.convSeq != convSeq) {
		m.mismatches = append(m.mismatches, mismatch{msg: msg, conv: conv, convSeq: convSeq, src: src, id: id})
	}
}

// witnessEntry takes one witness entry.
func (m *model) witnessEntry(e *inboxEntry) {
	w, src := e.w, e.src()
	m.observe(w.UID, w.Seq, w.MsgID, w.ConvID, never, src, w.UID)
	m.matchAck(w.MsgID, w.ConvID, w.ConvSeq, src+" of uid", w.UID)
	x := m.witnessed[w.MsgID]
	if x == nil {
		x = &witnessed{}
		m.witnessed[w.MsgID] = x
	}
	if w.Tick != 0 {
		x.tick = w.Tick
	}
	if len(x.uids) == 0 {
		x.at = convAt{w.ConvID, w.ConvSeq}
	}
	x.uids = append(x.uids, w.UID)
	x.src = append(x.src, src)
	en := entry{w.Seq, w.MsgID, w.ConvID, w.ConvSeq}
	if !e.stored {
		m.wEntries[w.UID] = append(m.wEntries[w.UID], en)
		return
	}
	m.sEntries[w.UID] = append(m.sEntries[w.UID], en)
	if m.stored[w.UID] == nil {
		m.stored[w.UID] = map[uint64]bool{}
	}
	m.stored[w.UID][w.MsgID] = true
}

// delivery takes one stored message, in its device's order (a device's
// records are all in one shard, in order).
func (m *model) delivery(d *ledger.Delivery) {
	ds := m.dev(d.Dev)
	seen := never
	if d.Via == ledger.Pull {
		seen = d.At
	}
	m.observe(ds.uid, d.Seq, d.MsgID, d.ConvID, seen, "device", uint64(d.Dev))
	m.matchAck(d.MsgID, d.ConvID, d.ConvSeq, "device", uint64(d.Dev))
	if first, seen := ds.got[d.MsgID]; seen {
		if first.seq == d.Seq {
			m.dupCopies++
			m.dupMsgs[d.MsgID] = true
		} // else: double-stored, reported by the inbox log
		return
	}
	ds.got[d.MsgID] = firstCopy{seq: d.Seq, at: d.At}
	if m.delLog {
		p := ds.passes[d.ConvID]
		if p == nil {
			p = &conv.Passes{}
			ds.passes[d.ConvID] = p
		}
		p.Add(d.ConvSeq, d.At)
	}
	if a, ok := m.ev.acks[d.MsgID]; ok {
		m.endToEnd.RecordValue(us(d.At - a.intended))
	}
	x := m.explain(d.MsgID, d.Tick)
	if _, known := m.recConv[d.MsgID]; x.by == byUnknown && !known {
		m.recConv[d.MsgID] = convAt{d.ConvID, d.ConvSeq}
	}
	m.stray(x, d.MsgID, seenAt{src: "device", id: uint64(d.Dev)})
	switch {
	case x.by == byNothing:
		m.unexpected = append(m.unexpected, unexplained{msg: d.MsgID, tick: d.Tick, other: x.other, why: x.why, src: "device", id: uint64(d.Dev), seq: d.Seq})
	case !slices.Contains(x.rcpt, ds.uid):
		m.unexpected = append(m.unexpected, unexplained{msg: d.MsgID, why: whyNotRecipient, src: "device", id: uint64(d.Dev), rcpt: x.rcpt, other: ds.uid})
	}
	if last, ok := ds.lastConv[d.ConvID]; ok && d.ConvSeq <= last {
		m.reorders = append(m.reorders, outOfOrder{msg: d.MsgID, conv: d.ConvID, convSeq: d.ConvSeq, last: last, src: "device", id: uint64(d.Dev)})
		return
	}
	ds.lastConv[d.ConvID] = d.ConvSeq
}

// recover decides which message each send of unknown outcome became:
// the first msg_id no ACK names whose content names the send, over the
// deliveries in ledger order, then the witnessed messages by msg_id, then
// the history witness's slots and the history pages in ledger order.
func (m *model) recover() {
	take := func(msg, tick uint64) {
		if _, acked := m.ev.acks[msg]; acked || tick == 0 {
			return
		}
		if _, ok := m.ev.unknown[tick]; !ok {
			return
		}
		if _, seen := m.recTick[tick]; !seen {
			m.recTick[tick], m.recovered[msg] = msg, tick
		}
	}
	m.ev.deliveries.Each(func(d *ledger.Delivery) { take(d.MsgID, d.Tick) })
	for _, msg := range slices.Sorted(maps.Keys(m.witnessed)) {
		take(msg, m.witnessed[msg].tick)
	}
	for _, s := range m.ev.cv.Slots {
		if !s.Purged {
			take(s.MsgID, s.Tag)
		}
	}
	for _, p := range m.ev.cv.Pages {
		for _, it := range p.Items {
			take(it.MsgID, it.Tag)
		}
	}
}

// explain says how the ledger accounts for msg_id msg whose content names
// send tick (0: none): by its ACK; by the send of unknown outcome it
// recovers (recover); by a send answered with a definite error (failed,
// yet stored); by a send retried on a target without idempotent send (a
// second message of it); or not at all: a second msg_id for a send of
// unknown outcome, another msg_id than the one the send's ACK names (on a
// target whose send is idempotent, or a send tried once), or a message no
// send names.
func (m *model) explain(msg, tick uint64) explanation {
	ev := m.ev
	if a, ok := ev.acks[msg]; ok {
		return explanation{by: byAck, tick: a.tick, rcpt: ev.recipients(ev.sends[a.tick])}
	}
	if t, ok := m.recovered[msg]; ok {
		return explanation{by: byUnknown, tick: t, rcpt: ev.recipients(ev.unknown[t])}
	}
	if tick == 0 {
		return explanation{}
	}
	retried := !ev.target.IdempotentSend && ev.sends[tick].tries > 1
	if prev, ok := m.recTick[tick]; ok {
		if retried {
			return explanation{by: byRetry, tick: tick, other: prev, rcpt: ev.recipients(ev.sends[tick])}
		}
		return explanation{tick: tick, why: whySecondOfSend, other: prev}
	}
	if other, acked := ev.ackByTick[tick]; acked {
		if retried {
			return explanation{by: byRetry, tick: tick, other: other, rcpt: ev.recipients(ev.sends[tick])}
		}
		return explanation{tick: tick, why: whyOtherOfAcked, other: other}
	}
	if s, ok := ev.failed[tick]; ok {
		return explanation{by: byFailed, tick: tick, rcpt: ev.recipients(s)}
	}
	return explanation{}
}

// stray keeps a message that a failed send or a retry explains, for
// failed-but-stored and retry-duplicate; at says where it was seen.
func (m *model) stray(x explanation, msg uint64, at seenAt) {
	switch x.by {
	case byFailed:
		m.failedStored = append(m.failedStored, strayMsg{msg: msg, tick: x.tick, at: at})
	case byRetry:
		m.retried = append(m.retried, strayMsg{msg: msg, tick: x.tick, other: x.other, at: at})
	}
}

// seenAt names an observation: a device, a uid's inbox in a witness, or a
// conversation's history (src and id).
type seenAt struct {
	src      string
	id, conv uint64
}

func (s seenAt) String() string {
	switch {
	case s.src == "device":
		return fmt.Sprintf("device %d", s.id)
	case s.conv != 0:
		return fmt.Sprintf("conv %d's history (%s %d)", s.conv, s.src, s.id)
	}
	return fmt.Sprintf("uid %d's inbox (%s)", s.id, s.src)
}

// explainWitnessed explains a msg_id a witness saw, and keeps it if it is
// in the inbox of a uid it is not addressed to.
func (m *model) explainWitnessed(msg uint64, x *witnessed) {
	e := m.explain(msg, x.tick)
	m.stray(e, msg, seenAt{src: x.src[0], id: x.uids[0]})
	if e.by == byNothing {
		m.unexpected = append(m.unexpected, unexplained{msg: msg, tick: x.tick, other: e.other, why: e.why, src: x.src[0]})
		return
	}
	for i, u := range x.uids {
		if !slices.Contains(e.rcpt, u) {
			m.unexpected = append(m.unexpected, unexplained{msg: msg, why: whyNotRecipient, src: x.src[i], id: u, rcpt: e.rcpt, other: u})
			return
		}
	}
}

// inboxOrder keeps, within one witnessed inbox and one conversation, a
// conv_seq that does not strictly increase in seq order (repeated msg_ids
// dropped).
func (m *model) inboxOrder(src string, uid uint64, es []entry) {
	sort.Slice(es, func(i, j int) bool { return es[i].seq < es[j].seq })
	seen := map[uint64]bool{}
	last := map[uint64]entry{}
	for _, e := range es {
		if seen[e.msgID] {
			continue
		}
		seen[e.msgID] = true
		if l, ok := last[e.conv]; ok && e.convSeq <= l.convSeq {
			m.reorders = append(m.reorders, outOfOrder{msg: e.msgID, conv: e.conv, convSeq: e.convSeq, last: l.convSeq, seq: e.seq, lastSeq: l.seq, src: src, id: uid})
			continue
		}
		last[e.conv] = e
	}
}

// deliveredTo finds, for every ACKed or recovered message, the recipient
// devices that never stored it, and counts the ACKed ones every recipient
// device stored (ok).
//
// On a target with a delete log a message deleted for a user (revoked, or
// deleted or cleared by that user) is absent from what the user's devices
// read afterwards: a device may never store it if the delete was sent
// before the read that should have carried it to that device (readBy).
func (m *model) deliveredTo() {
	check := func(msg uint64, s send) bool {
		complete := true
		at, hideable := m.msgAt(msg)
		hideable = hideable && m.delLog
		for _, u := range m.ev.recipients(s) {
			for _, dv := range m.ev.uidDevs[u] {
				if _, ok := m.devs[dv].got[msg]; !ok {
					if m.rt.GoneBeforeKnown(u, msg, dv) || hideable && m.cv.HiddenFrom(at.conv, u, at.convSeq, m.readBy(dv, at.conv, at.convSeq)) {
						continue
					}
					complete = false
					m.missing[msg] = append(m.missing[msg], missing{msg: msg, uid: u, dev: dv})
				}
			}
		}
		return complete
	}
	for msg, a := range m.ev.acks {
		if check(msg, m.ev.sends[a.tick]) {
			m.okCount++
		}
	}
	for msg, tick := range m.recovered {
		check(msg, m.ev.unknown[tick])
	}
}

// msgAt is where the ledger puts a message: its ACK's conversation and
// conv_seq, or where a copy of a recovered message put it.
func (m *model) msgAt(msg uint64) (convAt, bool) {
	if a, ok := m.ev.acks[msg]; ok {
		return convAt{a.conv, a.convSeq}, true
	}
	at, ok := m.recConv[msg]
	return at, ok
}
