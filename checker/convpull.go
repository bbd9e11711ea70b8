package checker

import (
	"slices"
	"time"

	"imlab/checker/conv"
)

// ConvOf is the conversation the ledger puts a message in (msgAt; the
// conversation model asks).
func (m *model) ConvOf(msg uint64) (uint64, bool) { at, ok := m.msgAt(msg); return at.conv, ok }

// Inbox lists, in seq order, the entries of uid's inbox log in
// conversation id (the conversation model's conv-pull asks).
func (m *model) Inbox(uid, id uint64) []conv.InboxEntry {
	l := m.inbox[uid]
	if l == nil {
		return nil
	}
	var out []conv.InboxEntry
	for _, seq := range m.convSeqs(uid, id) {
		e := l.at[seq]
		out = append(out, conv.InboxEntry{Seq: seq, Msg: e.msg, Seen: e.seen})
	}
	return out
}

// Retained says the server's retention deleted (uid, seq) by t (the
// conversation model's conv-pull asks).
func (m *model) Retained(uid, seq uint64, t time.Duration) bool { return m.rt.Retained(uid, seq, t) }

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
