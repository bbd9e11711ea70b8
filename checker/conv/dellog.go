package conv

import (
	"fmt"
	"maps"
	"slices"

	"imlab/ledger"
)

// This file holds delete-log-dropped: a target's delete log (Tinode) that
// leaves out a deletion it answered ok.

// droppedDel is one conv_seq a deletion answered ok covers that the delete
// log does not hold for the uid it applies to (uid 0: a revoke, missing
// from some member's log).
type droppedDel struct {
	seq, uid uint64
	act      ledger.Action
	dev      uint32
}

// droppedDels lists, per judged conversation, the conv_seqs deletions
// answered ok before the history witness read the log cover and the log
// leaves out: a delete for oneself (its uid's log), a clear (its uid's
// log, the messages at conv_seqs up to the min_seq answered), a revoke
// (every member's log: a range for everyone). Computed once.
func (m *Model) droppedDels() map[uint64][]droppedDel {
	if m.dropped != nil || !m.delLog() || m.judged == nil {
		return m.dropped
	}
	m.dropped = map[uint64][]droppedDel{}
	read := m.DrainEnd()
	for i := range m.ev.effects {
		e := &m.ev.effects[i]
		c := m.convs[e.conv]
		if c == nil || !m.judged(e.conv) || e.outcome != ledger.OK || e.end >= read {
			continue
		}
		uid := m.uidOf(e.dev)
		var seqs []uint64
		switch e.act {
		case ledger.ActRevoke:
			uid, seqs = 0, []uint64{e.from}
		case ledger.ActDelete:
			seqs = []uint64{e.from}
		case ledger.ActClear:
			// The messages it covers (a conv_seq with none is no message
			// to hide).
			for _, seq := range slices.Sorted(maps.Keys(c.msgs)) {
				if seq <= e.minSeq {
					seqs = append(seqs, seq)
				}
			}
		default:
			continue
		}
		for _, seq := range seqs {
			if !c.deletedRange(seq, uid) {
				m.dropped[e.conv] = append(m.dropped[e.conv], droppedDel{seq: seq, uid: uid, act: e.act, dev: e.dev})
			}
		}
	}
	return m.dropped
}

// droppedAt says a deletion the log left out covers seq of c.
func (m *Model) droppedAt(c *conversation, seq uint64) bool {
	return slices.ContainsFunc(m.droppedDels()[c.id], func(d droppedDel) bool { return d.seq == seq })
}

// ValidateDeleteLogDropped: a deletion answered ok that the target's
// delete log leaves out.
func ValidateDeleteLogDropped(m *Model, f Marker) {
	dropped := m.droppedDels()
	for _, conv := range slices.Sorted(maps.Keys(dropped)) {
		c := m.convs[conv]
		for _, d := range dropped[conv] {
			whose := fmt.Sprintf("uid %d's delete log", d.uid)
			if d.uid == 0 {
				whose = "the delete log of some member"
			}
			why := fmt.Sprintf("conv %d conv_seq %d: device %d's %s answered ok, yet %s does not hold it", conv, d.seq, d.dev, d.act, whose)
			f.Conv(conv)
			if cm, ok := c.msgs[d.seq]; ok {
				f.Mark(cm.msg, d.uid, "msg_id %d, %s", cm.msg, why)
				continue
			}
			f.Item(fmt.Sprintf("%d %d %d", conv, d.seq, d.uid), "%s", why)
		}
	}
}
