package history

import (
	"context"
	"testing"

	"imlab/ref/defect"
)

func defects(t *testing.T, names ...string) func(*Config) {
	t.Helper()
	s, err := defect.Parse(names...)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *Config) { c.Defects = s }
}

func TestDocIndexDefectAddress(t *testing.T) {
	good, bad := Layout{Size: 100}, Layout{Size: 100, noMinusOne: true}
	for seq, want := range map[uint64][2]uint64{1: {0, 0}, 99: {0, 0}, 100: {0, 1}, 101: {1, 1}, 200: {1, 2}} {
		g, _ := good.DocIndex(seq)
		b, _ := bad.DocIndex(seq)
		if g != want[0] || b != want[1] {
			t.Errorf("seq %d: bucket %d / with the defect %d, want %v", seq, g, b, want)
		}
	}
}

// TestHistoryStoreDefects (FerretDB): with history-doc-index-off-by-one
// the pages of the writing server look right while the witness (the seed's
// positions) finds conv_seq 100 and 200 out of place; with
// history-insert-slot-shift the first message of a new bucket is
// overwritten by the next one: a hole in the pages and the witness. The
// correct store has every message at its position.
func TestHistoryStoreDefects(t *testing.T) {
	ctx := context.Background()
	conv := testGroup
	msgs := msgsFor(conv, 1, 250, 1, 2)
	write := func(f *fixture) {
		// The first message of each bucket alone (it creates the bucket,
		// as the history tier mostly writes one message at a time), the
		// rest of the bucket in one batch.
		for _, r := range [][2]int{{0, 1}, {1, 100}, {100, 101}, {101, 200}, {200, 201}, {201, 250}} {
			f.write(t, msgs[r[0]:r[1]])
		}
	}
	check := func(name string, f *fixture, wantPage, wantWitness func(seq uint64, it HistoryItem, ws WitnessSlot) bool) {
		t.Helper()
		for from := uint64(1); from <= 250; from += 100 {
			items := f.history(t, 1, conv, from, min(from+99, 250))
			for _, it := range items {
				if !wantPage(it.ConvSeq, it, WitnessSlot{}) {
					t.Errorf("%s: page item %+v", name, it)
				}
			}
		}
		w, err := f.svc.Witness(ctx, 1, conv, 1, 300)
		if err != nil {
			t.Fatalf("%s: witness: %v", name, err)
		}
		for _, ws := range w.Slots {
			if !wantWitness(ws.ConvSeq, HistoryItem{}, ws) {
				t.Errorf("%s: witness position %d: %+v", name, ws.ConvSeq, ws)
			}
		}
	}
	atPlace := func(seq uint64, ws WitnessSlot) bool {
		if seq > 250 {
			return ws.State == WitnessEmpty
		}
		return ws.State == WitnessFilled && ws.StoredSeq == seq && ws.MsgID == msgs[seq-1].MsgID
	}
	shown := func(seq uint64, it HistoryItem, _ WitnessSlot) bool {
		return !it.Tombstone && it.MsgID == msgs[seq-1].MsgID
	}

	f := newFixture(t, groupOf(conv, 1), nil, nil)
	write(f)
	check("correct store", f, shown, func(seq uint64, _ HistoryItem, ws WitnessSlot) bool { return atPlace(seq, ws) })

	f = newFixture(t, groupOf(conv, 1), defects(t, defect.HistoryDocIndexOffByOne), nil)
	write(f)
	check(defect.HistoryDocIndexOffByOne, f, shown, func(seq uint64, _ HistoryItem, ws WitnessSlot) bool {
		switch seq {
		case 100:
			return ws.State == WitnessEmpty // its message sits at 200's position
		case 200, 300:
			return ws.State == WitnessFilled && ws.StoredSeq == seq-100
		}
		return atPlace(seq, ws)
	})

	f = newFixture(t, groupOf(conv, 1), defects(t, defect.HistoryInsertSlotShift), nil)
	write(f)
	lost := func(seq uint64) bool { return seq == 1 || seq == 101 || seq == 201 }
	check(defect.HistoryInsertSlotShift, f, func(seq uint64, it HistoryItem, w WitnessSlot) bool {
		if lost(seq) {
			return it.Tombstone
		}
		return shown(seq, it, w)
	}, func(seq uint64, _ HistoryItem, ws WitnessSlot) bool {
		if lost(seq) {
			return ws.State == WitnessEmpty
		}
		return atPlace(seq, ws)
	})
}

// TestProjectionDefects (FerretDB): uid 1 revokes conv_seq 1, uid 3
// deletes conv_seq 2 for itself. A correct projection shows 1 revoked to
// everyone and hides 2 from uid 3 only; revoke-shown-to-revoker-only shows
// 1's content to uid 2; delete-hides-for-everyone hides 2 from uid 2.
func TestProjectionDefects(t *testing.T) {
	ctx := context.Background()
	conv := testGroup
	view := func(d ...string) map[uint64]string {
		f := newFixture(t, groupOf(conv, 1, 2, 3), defects(t, d...), nil)
		f.write(t, msgsFor(conv, 1, 3, 1, 2))
		if err := f.svc.Revoke(ctx, 1, conv, 1); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.Delete(ctx, 3, conv, 2); err != nil {
			t.Fatal(err)
		}
		out := map[uint64]string{}
		for _, uid := range []uint64{1, 2, 3} {
			out[uid] = describe(f.history(t, uid, conv, 1, 3))
		}
		return out
	}
	for _, c := range []struct {
		defect string
		want   map[uint64]string
	}{
		{"", map[uint64]string{1: "1:R 2 3", 2: "1:R 2 3", 3: "1:R 2:T 3"}},
		{defect.RevokeShownToRevokerOnly, map[uint64]string{1: "1:R 2 3", 2: "1 2 3", 3: "1 2:T 3"}},
		{defect.DeleteHidesForEveryone, map[uint64]string{1: "1:R 2:T 3", 2: "1:R 2:T 3", 3: "1:R 2:T 3"}},
	} {
		got := view(c.defect)
		for uid, want := range c.want {
			if got[uid] != want {
				t.Errorf("defect %q: uid %d sees %q, want %q", c.defect, uid, got[uid], want)
			}
		}
	}
}
