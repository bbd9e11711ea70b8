package checker

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"imlab/ledger"
)

// validateConvPull: a conversation pull returns exactly the conversation's
// entries of the uid's inbox above its cursor, in seq order, at most its
// limit, with next_cursor its last seq, and leaves the device's sync
// cursor alone (pullView says how a page may not).
func validateConvPull(m *model, f *marker) {
	for i := range m.ev.pulls {
		p := &m.ev.pulls[i]
		if p.Outcome != ledger.OK {
			continue
		}
		view := m.pullView
		if !m.ev.target.Inbox {
			view = m.convPullView
		}
		view(p, func(msg uint64, why string) {
			f.conv(p.ConvID)
			text := fmt.Sprintf("device %d's conv-pull of conv %d above %d (limit %d): %s", p.Dev, p.ConvID, p.Cursor, p.Limit, why)
			if msg != 0 {
				f.mark(msg, m.uidOf(p.Dev), "%s", text)
				return
			}
			f.item(fmt.Sprintf("%d %d", p.Dev, p.Started), "%s", text)
		})
	}
}

// pullView calls bad for every way conversation pull p disagrees with the
// inbox log of its device's uid: an entry at or below the cursor, out of
// seq order, past the limit, of another conversation; an entry the page
// leaves out that a read of the store showed before the page began and
// that retention had not deleted by its end; a next_cursor other than
// its last seq (the cursor when empty); the device's sync cursor moved.
func (m *model) pullView(p *ledger.ConvPull, bad func(msg uint64, why string)) {
	uid := m.uidOf(p.Dev)
	got, last := m.pageShape(p, "seq", func(it ledger.PulledItem) uint64 { return it.Seq }, bad)
	if p.SyncRead && p.SyncAfter != p.SyncBefore {
		bad(0, fmt.Sprintf("the device's sync cursor went from %d to %d across the page", p.SyncBefore, p.SyncAfter))
	}
	top := last
	if !p.HasMore {
		top = ^uint64(0) // the page says nothing is left above it
	}
	l := m.inbox[uid]
	if l == nil {
		return
	}
	for _, seq := range m.convSeqs(uid, p.ConvID) {
		e := l.at[seq]
		if seq > p.Cursor && seq <= top && !got[seq] && e.seen < p.Started && !m.retained(uid, seq, p.Ended) {
			bad(e.msg, fmt.Sprintf("leaves out seq %d (msg_id %d), read from the store before the page", seq, e.msg))
		}
	}
}

// convPullView is pullView on a target without an inbox, whose
// conversation pull reads the conversation itself above a conv_seq cursor
// (Tinode's {get what:"data" since}): an entry at or below the cursor, out
// of conv_seq order, past the limit, of another conversation; a
// next_cursor other than its last conv_seq (the cursor when empty); an
// ACKed message above the cursor, up to the page's last conv_seq (or any,
// when the page says nothing is left), ACKed before the page began, left
// out though nothing the device's uid did (nor a delete for everyone) sent
// before the page ended may hide it from that uid (mayHide).
func (m *model) convPullView(p *ledger.ConvPull, bad func(msg uint64, why string)) {
	c, uid := m.conv(p.ConvID), m.uidOf(p.Dev)
	got, last := m.pageShape(p, "conv_seq", func(it ledger.PulledItem) uint64 { return it.ConvSeq }, bad)
	top := last
	if !p.HasMore {
		top = ^uint64(0)
	}
	for _, seq := range slices.Sorted(maps.Keys(c.msgs)) {
		cm := c.msgs[seq]
		if seq > p.Cursor && seq <= top && !got[seq] && cm.acked && cm.ackEnd < p.Started && !m.mayHide(c, uid, seq, p.Started, p.Ended) {
			bad(cm.msg, fmt.Sprintf("leaves out conv_seq %d (msg_id %d), ACKed before the page", seq, cm.msg))
		}
	}
}

// convOf is the conversation the ledger puts a message in: its ACK's, or
// where a copy of a recovered message put it.
func (m *model) convOf(msg uint64) (uint64, bool) {
	if a, ok := m.ev.acks[msg]; ok {
		return a.conv, true
	}
	at, ok := m.recConv[msg]
	return at.conv, ok
}

// convSeqs lists, in order, the seqs of uid's inbox log in conversation
// conv (indexed on first use).
func (m *model) convSeqs(uid, conv uint64) []uint64 {
	if m.byConv == nil {
		m.byConv = map[uint64]map[uint64][]uint64{}
	}
	idx, ok := m.byConv[uid]
	if !ok {
		idx = map[uint64][]uint64{}
		for seq, e := range m.inbox[uid].at {
			idx[e.conv] = append(idx[e.conv], seq)
		}
		for _, seqs := range idx {
			slices.Sort(seqs)
		}
		m.byConv[uid] = idx
	}
	return idx[conv]
}

// retained says retention deleted (uid, seq) by t: a conversation pull
// after that cannot show it.
func (m *model) retained(uid, seq uint64, t time.Duration) bool {
	if m.deleted == nil {
		m.deleted = map[[2]uint64]time.Duration{}
		for _, d := range m.ev.deletions {
			k := [2]uint64{d.UID, d.Seq}
			if at, ok := m.deleted[k]; !ok || d.DeletedAt < at {
				m.deleted[k] = d.DeletedAt
			}
		}
	}
	at, ok := m.deleted[[2]uint64{uid, seq}]
	return ok && at <= t
}

// retainedMsgBy says retention deleted uid's inbox row of msg by t.
func (m *model) retainedMsgBy(uid, msg uint64, t time.Duration) bool {
	for _, d := range m.ev.deletions {
		if d.UID == uid && d.MsgID == msg && d.DeletedAt <= t {
			return true
		}
	}
	return false
}

// retainedMsg says retention deleted uid's inbox row of msg (at any time).
func (m *model) retainedMsg(uid, msg uint64) bool {
	if m.deletedMsg == nil {
		m.deletedMsg = map[[2]uint64]bool{}
		for _, d := range m.ev.deletions {
			m.deletedMsg[[2]uint64{d.UID, d.MsgID}] = true
		}
	}
	return m.deletedMsg[[2]uint64{uid, msg}]
}

// pageShape judges what a conversation pull's page says of itself, the
// sequence being seqOf of each item (named name: an inbox seq, or a
// conv_seq on a target without an inbox): an entry at or below the
// cursor, out of order, of another conversation; more entries than the
// limit; a next_cursor other than its last entry's (the cursor when
// empty). It returns the sequences the page holds and its last one.
func (m *model) pageShape(p *ledger.ConvPull, name string, seqOf func(ledger.PulledItem) uint64, bad func(msg uint64, why string)) (map[uint64]bool, uint64) {
	got := map[uint64]bool{}
	last := p.Cursor
	for i, it := range p.Items {
		seq := seqOf(it)
		switch {
		case seq <= p.Cursor:
			bad(it.MsgID, fmt.Sprintf("%s %d at or below the cursor", name, seq))
		case i > 0 && seq <= last:
			bad(it.MsgID, fmt.Sprintf("%s %d after %s %d (out of order)", name, seq, name, last))
		}
		if conv, ok := m.convOf(it.MsgID); ok && conv != p.ConvID {
			bad(it.MsgID, fmt.Sprintf("msg_id %d at %s %d is of conv %d", it.MsgID, name, seq, conv))
		}
		got[seq], last = true, max(last, seq)
	}
	if p.Limit > 0 && len(p.Items) > int(p.Limit) {
		bad(0, fmt.Sprintf("%d entries, past the limit", len(p.Items)))
	}
	if p.NextCursor != last {
		bad(0, fmt.Sprintf("next_cursor %d, its last %s is %d", p.NextCursor, name, last))
	}
	return got, last
}
