package conv

import (
	"fmt"
	"maps"
	"slices"

	"imlab/ledger"
)

// This file holds conv-pull: a conversation pull against the inbox log of
// its device's uid (package checker's, through Ledger.Inbox), or, on a
// target without an inbox, against the conversation.

// ValidateConvPull: a conversation pull returns exactly the conversation's
// entries of the uid's inbox above its cursor, in seq order, at most its
// limit, with next_cursor its last seq, and leaves the device's sync
// cursor alone (pullView says how a page may not); on a target without an
// inbox, exactly the conversation above its conv_seq cursor (PullView).
func ValidateConvPull(m *Model, f Marker) {
	for i := range m.ev.Pulls {
		p := &m.ev.Pulls[i]
		if p.Outcome != ledger.OK {
			continue
		}
		view := m.pullView
		if !m.target.Inbox {
			view = m.PullView // the conversation read above a conv_seq
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
// inbox log of its device's uid (the ledger's Inbox): an entry at or below the cursor, out of
// seq order, past the limit, of another conversation; an entry the page
// leaves out that a read of the store showed before the page began and
// that retention had not deleted by its end; a next_cursor other than
// its last seq (the cursor when empty); the device's sync cursor moved.
func (m *Model) pullView(p *ledger.ConvPull, bad func(msg uint64, why string)) {
	uid := m.uidOf(p.Dev)
	got, last := m.PageShape(p, "seq", func(it ledger.PulledItem) uint64 { return it.Seq }, bad)
	if p.SyncRead && p.SyncAfter != p.SyncBefore {
		bad(0, fmt.Sprintf("the device's sync cursor went from %d to %d across the page", p.SyncBefore, p.SyncAfter))
	}
	top := last
	if !p.HasMore {
		top = ^uint64(0) // the page says nothing is left above it
	}
	for _, e := range m.ledger.Inbox(uid, p.ConvID) {
		if e.Seq > p.Cursor && e.Seq <= top && !got[e.Seq] && e.Seen < p.Started && !m.ledger.Retained(uid, e.Seq, p.Ended) {
			bad(e.Msg, fmt.Sprintf("leaves out seq %d (msg_id %d), read from the store before the page", e.Seq, e.Msg))
		}
	}
}

// PullView calls bad for every way a conversation pull p of a target
// without an inbox disagrees with the conversation, which the pull reads
// above a conv_seq cursor (Tinode's {get what:"data" since}): an entry at
// or below the cursor, out of conv_seq order, past the limit, of another
// conversation; a next_cursor other than its last conv_seq (the cursor
// when empty); an ACKed message above the cursor, up to the page's last
// conv_seq (or any, when the page says nothing is left), ACKed before the
// page began, left out though nothing the device's uid did (nor a delete
// for everyone) sent before the page ended may hide it from that uid
// (mayHide).
func (m *Model) PullView(p *ledger.ConvPull, bad func(msg uint64, why string)) {
	c, uid := m.conv(p.ConvID), m.uidOf(p.Dev)
	got, last := m.PageShape(p, "conv_seq", func(it ledger.PulledItem) uint64 { return it.ConvSeq }, bad)
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

// PageShape judges what a conversation pull's page says of itself, the
// sequence being seqOf of each item (named name: an inbox seq, or a
// conv_seq on a target without an inbox): an entry at or below the
// cursor, out of order, of another conversation; more entries than the
// limit; a next_cursor other than its last entry's (the cursor when
// empty). It returns the sequences the page holds and its last one.
func (m *Model) PageShape(p *ledger.ConvPull, name string, seqOf func(ledger.PulledItem) uint64, bad func(msg uint64, why string)) (map[uint64]bool, uint64) {
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
		if conv, ok := m.ledger.ConvOf(it.MsgID); ok && conv != p.ConvID {
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
