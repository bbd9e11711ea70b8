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

// marks is a Marker that keeps what it was told.
type marks struct {
	msgs  []uint64
	pairs int
}

func (m *marks) Mark(msg, _ uint64, _ string, _ ...any) { m.msgs = append(m.msgs, msg) }
func (m *marks) Pair()                                  { m.pairs++ }

// TestUnpulledCountsKnownDevices: a row deleted before a device of its
// uid acknowledged it is unpulled only if the records show the target had
// heard of that device by the deletion: a first contact, a delivery, an
// accepted or sent acknowledgement, an answered conversation pull; not a
// refused acknowledgement, nor anything after the deletion.
func TestUnpulledCountsKnownDevices(t *testing.T) {
	del := ledger.Record{Kind: ledger.KindRetention, Deletion: ledger.Deletion{UID: 1, Seq: 5, MsgID: 105, CreatedAt: 0, DeletedAt: 100, Reason: ledger.RetentionPulled}}
	set := ledger.Record{Kind: ledger.KindRetention, IsSettings: true, Settings: ledger.RetentionSettings{MaxAge: time.Hour, PulledMinAge: 10}}
	pull := ledger.Record{Kind: ledger.KindAction, Action: ledger.ActConvPull}
	pull.ConvPull.Dev, pull.ConvPull.Ended, pull.ConvPull.Outcome = 1, 90, ledger.OK
	failedPull := pull
	failedPull.ConvPull.Outcome = ledger.Unknown
	for _, c := range []struct {
		name  string
		shows *ledger.Record // what the ledger says of device 1 (nil: nothing)
		taken bool           // Ingest takes it
		want  int            // (row, device) pairs marked
	}{
		{"never heard of", nil, false, 0},
		{"first contact before", &ledger.Record{Kind: ledger.KindContact, Contact: ledger.Contact{Dev: 1, At: -50}}, true, 1},
		{"first contact at the deletion", &ledger.Record{Kind: ledger.KindContact, Contact: ledger.Contact{Dev: 1, At: 100}}, true, 1},
		{"first contact after", &ledger.Record{Kind: ledger.KindContact, Contact: ledger.Contact{Dev: 1, At: 101}}, true, 0},
		{"delivery before", &ledger.Record{Kind: ledger.KindDelivery, Delivery: ledger.Delivery{Dev: 1, At: 99}}, false, 1},
		{"delivery after", &ledger.Record{Kind: ledger.KindDelivery, Delivery: ledger.Delivery{Dev: 1, At: 101}}, false, 0},
		{"acknowledgement accepted", &ledger.Record{Kind: ledger.KindCursor, Cursor: ledger.Cursor{Dev: 1, Seq: 4, Status: ledger.Accepted, At: 50}}, false, 1},
		{"acknowledgement sent", &ledger.Record{Kind: ledger.KindCursor, Cursor: ledger.Cursor{Dev: 1, Seq: 4, Status: ledger.Sent, At: 50}}, false, 1},
		{"acknowledgement refused", &ledger.Record{Kind: ledger.KindCursor, Cursor: ledger.Cursor{Dev: 1, Seq: 4, Status: ledger.Refused, At: 50}}, false, 0},
		{"conversation pull answered", &pull, false, 1},
		{"conversation pull unanswered", &failedPull, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := &Evidence{}
			for _, r := range []*ledger.Record{&del, &set, c.shows} {
				if r == nil {
					continue
				}
				if taken := ev.Ingest(r); taken != (r.Kind == ledger.KindRetention || c.taken) {
					t.Fatalf("kind %d taken %v", r.Kind, taken)
				}
			}
			// Device 0 of uid 1 is known from the start and acknowledged
			// the row; device 1 acknowledged nothing.
			ev.known(0, 0)
			m := NewModel(ev, map[uint32][]ledger.Cursor{0: {{Dev: 0, Seq: 5, Status: ledger.Accepted, At: 80}}}, map[uint64][]uint32{1: {0, 1}})
			m.Judge()
			var f marks
			ValidateRetentionUnpulled(m, &f)
			if f.pairs != c.want {
				t.Fatalf("pairs %d, want %d (marked %v)", f.pairs, c.want, f.msgs)
			}
		})
	}
}
