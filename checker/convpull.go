package checker

import (
	"fmt"
	"slices"

	"imlab/ledger"
)

// validateConvPull: a conversation pull returns exactly the conversation's
// entries of the uid's inbox above its cursor, in seq order, at most its
// limit, with next_cursor its last seq, and leaves the device's sync
// cursor alone (pullView says how a page may not); on a target without an
// inbox, exactly the conversation above its conv_seq cursor (the
// conversation model's PullView).
func validateConvPull(m *model, f *marker) {
	for i := range m.ev.cv.Pulls {
		p := &m.ev.cv.Pulls[i]
		if p.Outcome != ledger.OK {
			continue
		}
		view := m.pullView
		if !m.ev.target.Inbox {
			view = m.cv.PullView // the conversation read above a conv_seq
		}
		view(p, func(msg uint64, why string) {
			f.Conv(p.ConvID)
			text := fmt.Sprintf("device %d's conv-pull of conv %d above %d (limit %d): %s", p.Dev, p.ConvID, p.Cursor, p.Limit, why)
			if msg != 0 {
				f.Mark(msg, m.uidOf(p.Dev), "%s", text)
				return
			}
			f.Item(fmt.Sprintf("%d %d", p.Dev, p.Started), "%s", text)
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
	got, last := m.cv.PageShape(p, "seq", func(it ledger.PulledItem) uint64 { return it.Seq }, bad)
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
		if seq > p.Cursor && seq <= top && !got[seq] && e.seen < p.Started && !m.rt.Retained(uid, seq, p.Ended) {
			bad(e.msg, fmt.Sprintf("leaves out seq %d (msg_id %d), read from the store before the page", seq, e.msg))
		}
	}
}

// ConvOf is the conversation the ledger puts a message in: its ACK's, or
// where a copy of a recovered message put it (the conversation model asks).
func (m *model) ConvOf(msg uint64) (uint64, bool) {
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
