package conv

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"imlab/ledger"
)

// This file holds the rules of the conversation history: against the
// history witness (the store as stored) and against the pages devices
// read (the store as each user sees it).

// ValidateHistoryLost: an ACKed (or recovered) message whose conv_seq the
// history store holds nothing for, with no delete range over it and, on a
// target with a delete log, no deletion answered ok that the log left out
// (delete-log-dropped).
func ValidateHistoryLost(m *Model, f Marker) {
	delLog := m.delLog()
	for _, c := range m.judgedConvs() {
		for _, seq := range slices.Sorted(maps.Keys(c.msgs)) {
			if _, ok := c.slots[seq]; ok || c.deletedRange(seq, 0) || delLog && (c.deletedAny(seq) || m.droppedAt(c, seq)) {
				continue
			}
			f.Conv(c.id)
			f.Mark(c.msgs[seq].msg, 0, "msg_id %d (conv %d conv_seq %d) is not in the history store", c.msgs[seq].msg, c.id, seq)
		}
	}
}

// ValidateHistoryMismatch: a message the history store holds at its
// conv_seq with another sender or content, or in a state no answered or
// unanswered action explains; or a clear watermark no clear explains.
func ValidateHistoryMismatch(m *Model, f Marker) {
	for _, c := range m.judgedConvs() {
		for _, seq := range slices.Sorted(maps.Keys(c.slots)) {
			s, cm := c.slots[seq], c.msgs[seq]
			if s.Purged || cm.msg != s.MsgID {
				continue // purged, unknown to the model, or another message (history-overwritten)
			}
			for _, why := range m.slotState(c, s, cm) {
				f.Conv(c.id)
				f.Mark(cm.msg, 0, "conv %d conv_seq %d (msg_id %d) as stored: %s", c.id, seq, cm.msg, why)
			}
		}
		if m.target.Offers(ledger.DelRangeCapability) {
			continue // a clear is a delete range there, not a stored watermark
		}
		for _, uid := range c.clearers(m.devUID) {
			if why := m.watermarkState(c, uid); why != "" {
				f.Conv(c.id)
				f.Item(fmt.Sprintf("watermark %d %d", c.id, uid), "conv %d: uid %d's clear watermark as stored: %s", c.id, uid, why)
			}
		}
	}
}

// slotState says how a stored slot disagrees with the model at the time
// it was read.
func (m *Model) slotState(c *conversation, s *ledger.Slot, cm convMsg) []string {
	var out []string
	if s.Sender != cm.sender {
		out = append(out, fmt.Sprintf("sender uid %d, the send's is uid %d", s.Sender, cm.sender))
	}
	if s.Tag != 0 && cm.tag != 0 && s.Tag != cm.tag {
		out = append(out, fmt.Sprintf("its content names send %d, it is send %d's", s.Tag, cm.tag))
	}
	anyone := func(*effect) bool { return true }
	if w := c.holds(ledger.ActRevoke, s.ConvSeq, s.At, s.At, anyone); w == yes && !s.Revoked || w == no && s.Revoked {
		out = append(out, fmt.Sprintf("revoked %v, though a revoke %s", s.Revoked, certainty(w)))
	}
	if !m.target.Offers(ledger.DelRangeCapability) {
		// On a target with a delete log, deletes for a user are its
		// ranges, not a del_list.
		out = m.delListState(c, s, out)
	}
	// On a target with one read mark per user, a message is read once its
	// recipient's mark reaches it, which the recipient's own sends move
	// too: read without a mark-read is no fault there.
	readMark := m.target.Offers(ledger.ReadMarkCapability)
	if w := c.holds(ledger.ActRead, s.ConvSeq, s.At, s.At, m.notBy(cm.sender)); w == yes && !s.IsRead || w == no && s.IsRead && !readMark {
		out = append(out, fmt.Sprintf("is_read %v, though a mark-read by its recipient %s", s.IsRead, certainty(w)))
	}
	return out
}

// delListState adds to out how a slot's del_list disagrees with the
// deletes made.
func (m *Model) delListState(c *conversation, s *ledger.Slot, out []string) []string {
	for _, u := range s.DelList {
		if c.holds(ledger.ActDelete, s.ConvSeq, s.At, s.At, m.by(u)) == no {
			out = append(out, fmt.Sprintf("uid %d is in its del_list but never deleted it", u))
		}
	}
	for _, u := range c.doers(ledger.ActDelete, s.ConvSeq, m.devUID) {
		if c.holds(ledger.ActDelete, s.ConvSeq, s.At, s.At, m.by(u)) == yes && !slices.Contains(s.DelList, u) {
			out = append(out, fmt.Sprintf("uid %d deleted it (answered ok) but is not in its del_list", u))
		}
	}
	return out
}

// watermarkState says how uid's stored clear watermark disagrees with the
// clears the uid made ("": it agrees).
func (m *Model) watermarkState(c *conversation, uid uint64) string {
	at := Never - 1
	sure, more := c.watermark(uid, m.uidOf, at, at)
	stored := c.marks[uid]
	switch {
	case stored < sure:
		return fmt.Sprintf("%d, below the min_seq %d a clear was answered", stored, sure)
	case !more && stored > sure:
		return fmt.Sprintf("%d, above every min_seq a clear was answered (%d) with no unanswered clear", stored, sure)
	}
	return ""
}

// certainty words what the model says of an action at a read.
func certainty(w maybe) string {
	switch w {
	case yes:
		return "was answered ok before"
	case perhaps:
		return "may have happened"
	}
	return "never happened"
}

// by matches the effects of uid's devices; notBy those of every other uid.
func (m *Model) by(uid uint64) func(*effect) bool {
	return func(e *effect) bool { return m.uidOf(e.dev) == uid }
}

func (m *Model) notBy(uid uint64) func(*effect) bool {
	return func(e *effect) bool { return m.uidOf(e.dev) != uid }
}

func (m *Model) uidOf(dev uint32) uint64 { return m.devUID[dev] }

// doers lists the uids with an action a on seq, in order.
func (c *conversation) doers(a ledger.Action, seq uint64, devUID map[uint32]uint64) []uint64 {
	set := map[uint64]bool{}
	for _, e := range c.bySeq[seq] {
		if e.act == a {
			set[devUID[e.dev]] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// clearers lists the uids with a clear or a stored watermark, in order.
func (c *conversation) clearers(devUID map[uint32]uint64) []uint64 {
	set := map[uint64]bool{}
	for _, e := range c.wide {
		if e.act == ledger.ActClear {
			set[devUID[e.dev]] = true
		}
	}
	for u := range c.marks {
		set[u] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// ValidateHistoryOverwritten: one (conversation, conv_seq) seen holding two
// msg_ids across the ACKs, the history witness and the pages read. Both
// are listed.
func ValidateHistoryOverwritten(m *Model, f Marker) {
	for _, x := range m.conflicts {
		f.Conv(x.conv)
		f.Mark(x.msg, 0, "conv %d conv_seq %d held msg_id %d, then msg_id %d (%s %d)", x.conv, x.seq, x.first, x.msg, x.src, x.id)
		f.Add(x.first)
	}
}

// ValidateHistoryDuplicated: one msg_id seen at two conv_seqs of its
// conversation across the ACKs, the history witness and the pages read.
func ValidateHistoryDuplicated(m *Model, f Marker) {
	for _, x := range m.doubles {
		f.Conv(x.conv)
		f.Mark(x.msg, 0, "msg_id %d at conv_seq %d and at conv_seq %d of conv %d (%s %d)", x.msg, x.first, x.seq, x.conv, x.src, x.id)
	}
}

// ValidateHistoryView: every history page a device read shows the model
// as that user sees it at the time (pageView says how it may not).
func ValidateHistoryView(m *Model, f Marker) {
	for i := range m.ev.Pages {
		p := &m.ev.Pages[i]
		if p.Outcome != ledger.OK {
			continue
		}
		m.pageView(p, func(msg, seq uint64, why string) {
			f.Conv(p.ConvID)
			text := fmt.Sprintf("device %d's page of conv %d [%d..%d] at conv_seq %d: %s", p.Dev, p.ConvID, p.From, p.To, seq, why)
			if msg != 0 {
				f.Mark(msg, m.uidOf(p.Dev), "%s", text)
				return
			}
			f.Item(fmt.Sprintf("%d %d %d", p.Dev, p.Started, seq), "%s", text)
		})
	}
}

// pageView calls bad for every way page p disagrees with the model as its
// device's uid sees the conversation over [p.Started, p.Ended]: items out
// of conv_seq order or outside the range asked; a message shown that the
// uid cleared or deleted, or with the wrong sender, content, revoke or
// read state; a message hidden (a tombstone, or left out between shown
// ones) that was ACKed before the page began and that nothing the uid did
// (nor a purge, nor a delete range) can hide.
func (m *Model) pageView(p *ledger.HistoryPage, bad func(msg, seq uint64, why string)) {
	c, uid := m.conv(p.ConvID), m.uidOf(p.Dev)
	shown := map[uint64]bool{}
	var last uint64
	for i, it := range p.Items {
		switch {
		case it.ConvSeq < p.From || it.ConvSeq > p.To:
			bad(it.MsgID, it.ConvSeq, "outside the range asked")
		case i > 0 && it.ConvSeq <= last:
			bad(it.MsgID, it.ConvSeq, fmt.Sprintf("after conv_seq %d (out of order)", last))
		}
		last = max(last, it.ConvSeq)
		if it.Tombstone {
			continue
		}
		shown[it.ConvSeq] = true
		for _, why := range m.itemView(c, uid, p, it) {
			bad(it.MsgID, it.ConvSeq, why)
		}
	}
	if len(p.Items) == 0 {
		return // nothing written yet as far as this page knows
	}
	for seq := p.From; seq <= last; seq++ {
		if cm, ok := c.msgs[seq]; ok && !shown[seq] && cm.acked && cm.ackEnd < p.Started && !m.mayHide(c, uid, seq, p.Started, p.Ended) {
			bad(cm.msg, seq, fmt.Sprintf("msg_id %d hidden, though ACKed before the page and neither deleted nor cleared by uid %d", cm.msg, uid))
		}
	}
}

// mayHide says something may hide conv_seq seq from uid over [rs, re]:
// the uid's delete or clear, a revoke on a target where it is a delete for
// everyone, each sent before re; a purge. A range of the target's delete
// log is no excuse by itself: it says the conv_seq was deleted by the end
// of the run, not that it was by re (the action that made it must have
// been sent by then).
func (m *Model) mayHide(c *conversation, uid, seq uint64, rs, re time.Duration) bool {
	if s, ok := c.slots[seq]; ok && s.Purged {
		return true
	}
	if c.holds(ledger.ActDelete, seq, rs, re, m.by(uid)) != no {
		return true
	}
	if m.target.Offers(ledger.DelRangeCapability) && c.holds(ledger.ActRevoke, seq, rs, re, func(*effect) bool { return true }) != no {
		return true // a revoke is a delete for everyone there
	}
	sure, more := c.watermark(uid, m.uidOf, rs, re)
	return seq <= sure || more
}

// itemView says how a shown item disagrees with the model as uid sees it.
func (m *Model) itemView(c *conversation, uid uint64, p *ledger.HistoryPage, it ledger.PageItem) []string {
	cm, ok := c.msgs[it.ConvSeq]
	if !ok || cm.msg != it.MsgID {
		return nil // not in the model, or another message: history-overwritten, unexpected
	}
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if sure, _ := c.watermark(uid, m.uidOf, p.Started, p.Ended); it.ConvSeq <= sure {
		add("shown, though uid %d cleared the conversation up to %d before the page", uid, sure)
	}
	if c.holds(ledger.ActDelete, it.ConvSeq, p.Started, p.Ended, m.by(uid)) == yes {
		add("shown, though uid %d deleted it before the page", uid)
	}
	if it.Sender != cm.sender {
		add("sender uid %d, the send's is uid %d", it.Sender, cm.sender)
	}
	w := c.holds(ledger.ActRevoke, it.ConvSeq, p.Started, p.Ended, func(*effect) bool { return true })
	switch {
	case w == yes && !it.Revoked, w == no && it.Revoked:
		add("revoked %v, though a revoke %s", it.Revoked, certainty(w))
	case it.Revoked && it.Tag != 0:
		add("revoked, yet its content (send %d) is shown", it.Tag)
	case !it.Revoked && it.Tag != 0 && cm.tag != 0 && it.Tag != cm.tag:
		add("its content names send %d, it is send %d's", it.Tag, cm.tag)
	}
	if it.Read != ledger.ReadAbsent {
		r := c.holds(ledger.ActRead, it.ConvSeq, p.Started, p.Ended, m.notBy(cm.sender))
		if r == yes && it.Read == ledger.ReadNo || r == no && it.Read == ledger.ReadYes {
			add("is_read %v, though a mark-read by its recipient %s", it.Read == ledger.ReadYes, certainty(r))
		}
	}
	return out
}
