package history

import (
	"context"
	"testing"
)

// TestOpeningWriteBetsOnInsert: a write that opens a bucket this Store has
// not seen inserts first; when the bucket exists after all (a replay after a
// restart, a purge in advance) the duplicate key steps back to the update,
// nothing is lost or changed, and a purged slot stays purged. A bucket the
// Store has seen is updated first.
func TestOpeningWriteBetsOnInsert(t *testing.T) {
	ctx := context.Background()
	var cc cmdCounter
	db := newDB(t, cc.monitor())
	s := newStore(t, db, nil)
	msgs := msgsFor(testGroup, 1, 250, 1, 2)
	if err := s.WriteBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	before := rawBuckets(t, s, testGroup, 3)
	restarted := newStore(t, db, nil)
	// Each bucket's group opens it at its first slot: insert (duplicate),
	// then the update.
	if u, i := cc.write(t, restarted, msgs); u != 3 || i != 3 {
		t.Errorf("replay on a fresh Store: %d updates, %d inserts; want 3 and 3", u, i)
	}
	checkBucketsUnchanged(t, s, before, "replay")
	if u, i := cc.write(t, restarted, msgs); u != 3 || i != 0 {
		t.Errorf("second replay: %d updates, %d inserts; want 3 and 0 (the buckets are known now)", u, i)
	}

	conv := testGroup + 1
	if err := s.purge(ctx, conv, 1); err != nil { // in advance: creates bucket 0
		t.Fatal(err)
	}
	if err := s.WriteBatch(ctx, msgsFor(conv, 1, 3, 1, 2)); err != nil {
		t.Fatal(err)
	}
	rr, err := s.ReadSlots(ctx, conv, []uint64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Slots[1].State != SlotPurged || rr.Slots[2].State != SlotFilled || rr.Slots[3].State != SlotFilled {
		t.Errorf("after a purge in advance of seq 1: %+v", rr.Slots)
	}
}

func TestBucketTopsBounded(t *testing.T) {
	var tops bucketTops
	if tops.known(1, 0) {
		t.Fatal("empty map knows a bucket")
	}
	tops.saw(1, 3)
	tops.saw(1, 2) // never lowers
	if !tops.known(1, 3) || !tops.known(1, 0) || tops.known(1, 4) || tops.known(2, 0) {
		t.Fatal("known after saw(1, 3) is wrong")
	}
	for c := uint64(2); c < maxBucketTops+1; c++ {
		tops.saw(c, 0)
	}
	if len(tops.m) != maxBucketTops {
		t.Fatalf("%d remembered, want %d", len(tops.m), maxBucketTops)
	}
	tops.saw(maxBucketTops+5, 0)
	if len(tops.m) != 1 || tops.known(1, 0) || !tops.known(maxBucketTops+5, 0) {
		t.Fatalf("past the bound: %d remembered, want only the last one", len(tops.m))
	}
}
