package retention

import (
	"testing"
	"time"

	"imlab/ledger"
)

// TestDeletedByWhen: what retention had deleted by a time, by seq and by
// msg_id, the earliest deletion of a row counting.
func TestDeletedByWhen(t *testing.T) {
	ev := &Evidence{}
	for _, d := range []ledger.Deletion{{UID: 1, Seq: 3, MsgID: 103, DeletedAt: 50}, {UID: 1, Seq: 3, MsgID: 103, DeletedAt: 40}, {UID: 2, Seq: 1, MsgID: 201, DeletedAt: 10}} {
		if !ev.Ingest(&ledger.Record{Kind: ledger.KindRetention, Deletion: d}) {
			t.Fatal("a retention record is retention's")
		}
	}
	if ev.Ingest(&ledger.Record{Kind: ledger.KindNote}) {
		t.Fatal("a note is not retention's")
	}
	m := NewModel(ev, nil, nil)
	for _, c := range []struct {
		uid, seq uint64
		at       time.Duration
		want     bool
	}{{1, 3, 39, false}, {1, 3, 40, true}, {1, 4, 99, false}, {2, 1, 10, true}, {1, 1, 99, false}} {
		if got := m.Retained(c.uid, c.seq, c.at); got != c.want {
			t.Fatalf("uid %d seq %d by %d: %v, want %v", c.uid, c.seq, c.at, got, c.want)
		}
	}
	if !m.RetainedMsg(1, 103) || m.RetainedMsg(1, 201) || !m.RetainedMsgBy(2, 201, 10) || m.RetainedMsgBy(1, 103, 39) {
		t.Fatal("by msg_id: uid 1 had 103 deleted (at 40), uid 2 had 201 (at 10)")
	}
}

// TestClaimedBy: a device's highest accepted or sent cursor by a time
// (its records in order), refused acknowledgements not counted.
func TestClaimedBy(t *testing.T) {
	cursors := map[uint32][]ledger.Cursor{0: {
		{Dev: 0, Seq: 2, Status: ledger.Accepted, At: 10},
		{Dev: 0, Seq: 9, Status: ledger.Refused, At: 20},
		{Dev: 0, Seq: 5, Status: ledger.Accepted, At: 30},
		{Dev: 0, Seq: 7, Status: ledger.Sent, At: 40},
	}}
	m := NewModel(&Evidence{}, cursors, nil)
	for _, c := range []struct {
		at   time.Duration
		want uint64
	}{{5, 0}, {10, 2}, {25, 2}, {30, 5}, {99, 7}} {
		if got := m.claimedBy(0, c.at); got != c.want {
			t.Fatalf("by %d: %d, want %d", c.at, got, c.want)
		}
	}
	if got := m.claimedBy(1, 99); got != 0 {
		t.Fatalf("a device without cursors claimed %d", got)
	}
}
