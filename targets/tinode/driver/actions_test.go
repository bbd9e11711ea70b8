package driver

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"imlab/targets"
)

// TestTargetActions: the client mix's actions through the targets
// interface against the fake, with Tinode's semantics: the conversation
// pull reads above a conv_seq cursor in pages; a revoke (hard delete)
// hides the message from both parties, a delete (soft) from its user
// only, a clear everything up to the topic's seq for its user; a read
// note moves the user's read mark, which the witness turns into is_read;
// a revoke by a group member without Tinode's D permission is refused by
// the driver (Tinode would delete for that member only and answer ok).
func TestTargetActions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := fakeServer(t)
	tg := openTarget(t, srv.URL(), map[string]string{OptAPIKey: fakeKey})
	pop := targets.Population{Prefix: "run-a", Users: []uint64{7, 8, 9}, Groups: []targets.Group{{ID: 50, Members: []uint64{7, 8, 9}}}}
	if err := tg.Provision(ctx, pop); err != nil {
		t.Fatal(err)
	}
	s7, _ := tg.Session(ctx, 7, "d0")
	s8, _ := tg.Session(ctx, 8, "d0")
	s9, _ := tg.Session(ctx, 9, "d0")
	var conv uint64
	for i := range 4 {
		ack, err := s7.Send(ctx, &targets.SendReq{ClientMsgID: "run-a-" + string(rune('1'+i)), ConvType: targets.ConvSingle, ToUID: 8, Content: "m"})
		if err != nil {
			t.Fatal(err)
		}
		conv = ack.ConvID
	}
	pg, err := s8.ConvPull(ctx, targets.ConvPullOpts{ConvID: conv, Cursor: 1, Limit: 2})
	if err != nil || len(pg.Msgs) != 2 || pg.Msgs[0].ConvSeq != 2 || pg.NextCursor != 3 || !pg.HasMore || pg.Msgs[0].SenderUID != 7 || pg.Msgs[0].Seq != 0 {
		t.Fatalf("pull above 1: %+v, %v", pg, err)
	}
	if pg, err = s8.ConvPull(ctx, targets.ConvPullOpts{ConvID: conv, Cursor: 3, Limit: 2}); err != nil || len(pg.Msgs) != 1 || pg.NextCursor != 4 || pg.HasMore {
		t.Fatalf("pull above 3: %+v, %v", pg, err)
	}
	if _, err := s9.ConvPull(ctx, targets.ConvPullOpts{ConvID: conv, Cursor: 0, Limit: 2}); !errors.Is(err, targets.ErrInvalid) {
		t.Fatalf("a pull by a user who is no party: %v", err)
	}
	seqs := func(s targets.Session) []uint64 {
		t.Helper()
		items, err := s.History(ctx, targets.HistoryOpts{ConvID: conv, From: 1, To: 4})
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, it := range items {
			out = append(out, it.ConvSeq)
		}
		return out
	}
	if err := s7.Revoke(ctx, conv, 1); err != nil {
		t.Fatal(err)
	}
	if err := s8.Delete(ctx, conv, 2); err != nil {
		t.Fatal(err)
	}
	if got7, got8 := seqs(s7), seqs(s8); !slices.Equal(got7, []uint64{2, 3, 4}) || !slices.Equal(got8, []uint64{3, 4}) {
		t.Fatalf("after revoke 1 and uid 8's delete of 2: uid 7 sees %v, uid 8 %v", got7, got8)
	}
	if err := s8.MarkRead(ctx, conv, 3, 3); err != nil {
		t.Fatal(err)
	}
	min, err := s8.Clear(ctx, conv)
	if err != nil || min != 4 {
		t.Fatalf("clear: %d, %v", min, err)
	}
	if got7, got8 := seqs(s7), seqs(s8); len(got8) != 0 || !slices.Equal(got7, []uint64{2, 3, 4}) {
		t.Fatalf("after uid 8's clear: uid 7 sees %v, uid 8 %v", got7, got8)
	}
	// A group member lacks D: the driver refuses the revoke, nothing done.
	g, err := s8.Send(ctx, &targets.SendReq{ClientMsgID: "run-a-9", ConvType: targets.ConvGroup, GroupID: 50, Content: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s8.Revoke(ctx, g.ConvID, g.ConvSeq); targets.Classify(err) != targets.Failed || !errors.Is(err, ErrNoDelete) {
		t.Fatalf("revoke without D: %v", err)
	}
	// The witness: uid 8's read mark makes 7's messages up to 3 read; the
	// revoke is a range for everyone, uid 8's delete and clear ranges of
	// its own.
	w := tg.Driver().ReadWitness(ctx, func() time.Duration { return time.Second })
	if len(w.Failed) > 0 {
		t.Fatalf("witness failed: %v", w.Failed)
	}
	read := map[uint64]bool{}
	for _, s := range w.Slots {
		if s.ConvID == conv {
			read[s.ConvSeq] = s.IsRead
		}
	}
	if !read[2] || !read[3] || read[4] || len(read) != 3 {
		t.Errorf("is_read by conv_seq %v: want 2 and 3 read, 4 not, 1 absent", read)
	}
	var everyone, of8 []uint64
	for _, r := range w.Ranges {
		if r.ConvID != conv {
			continue
		}
		for s := r.From; s <= r.To; s++ {
			switch r.UID {
			case 0:
				everyone = append(everyone, s)
			case 8:
				of8 = append(of8, s)
			default:
				t.Errorf("range of uid %d: %+v", r.UID, r)
			}
		}
	}
	if !slices.Equal(everyone, []uint64{1}) || !slices.Equal(of8, []uint64{2, 3, 4}) {
		t.Errorf("delete ranges: for everyone %v, for uid 8 %v", everyone, of8)
	}
}
