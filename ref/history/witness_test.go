package history

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"go.mongodb.org/mongo-driver/bson"

	"imlab/ref/model"
)

// TestWitnessAsStored: the witness reports every position of a range as
// MongoDB holds it (filled, empty, purged, revoked, deleted for some uids
// in the del_list and past it in deletion records, is_read), every user's
// clear watermark, the highest seq written, and a misplaced or corrupt
// element as such instead of failing; nothing is projected for the caller.
func TestWitnessAsStored(t *testing.T) {
	ctx := context.Background()
	conv := testGroup
	f := newFixture(t, groupOf(conv, 1, 2, 3, 4, 5), func(c *Config) { c.DelListMax = 2 }, func(d *Deps) { d.ConvSeqs = fixedSeqs(150) })
	msgs := msgsFor(conv, 1, 150, 1, 2)
	f.write(t, append(msgs[:4:4], msgs[5:]...)) // seq 5 never written
	if err := f.svc.Revoke(ctx, 1, conv, 3); err != nil {
		t.Fatal(err)
	}
	for _, u := range []uint64{3, 4, 5} { // 3 and 4 in del_list, 5 in a record
		if err := f.svc.Delete(ctx, u, conv, 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.svc.PhysicalDelete(ctx, conv, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Clear(ctx, 4, conv); err != nil {
		t.Fatal(err)
	}
	// Seq 140's message stored in the slot of seq 141; slot of 142 corrupt.
	if _, err := f.store.msgs.UpdateOne(ctx, bson.D{{Key: "_id", Value: DocIDOf(conv, 1)}}, bson.D{{Key: "$set", Value: bson.D{
		{Key: "msgs.40.msg", Value: toMsgDoc(msgs[139])},
		{Key: "msgs.41", Value: int32(7)},
	}}}); err != nil {
		t.Fatal(err)
	}

	// uid 4 cleared everything and deleted seq 2: the witness still shows it all.
	w, err := f.svc.Witness(ctx, 4, conv, 1, 150)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Slots) != 150 || w.FromSeq != 1 || w.ToSeq != 150 || w.BucketSize != 100 || w.ConvID != conv {
		t.Fatalf("witness header %+v with %d slots", w, len(w.Slots))
	}
	if w.MaxSeq != 150 || !w.TopBucketCounted || w.TopBucket != 1 {
		t.Errorf("max seq %d top %d (%v), want 150 in bucket 1", w.MaxSeq, w.TopBucket, w.TopBucketCounted)
	}
	if !reflect.DeepEqual(w.Buckets, []WitnessBucket{{Idx: 0, Exists: true, Slots: 100, MaxSeq: 100}, {Idx: 1, Exists: true, Slots: 100, MaxSeq: 150}}) {
		t.Errorf("buckets %+v", w.Buckets)
	}
	if !reflect.DeepEqual(w.Clears, []Clear{{UID: 4, MinSeq: 150}}) {
		t.Errorf("clears %+v", w.Clears)
	}
	for i, s := range w.Slots {
		seq := uint64(i + 1)
		if s.ConvSeq != seq {
			t.Fatalf("slot %d is seq %d", i, s.ConvSeq)
		}
		switch seq {
		case 5:
			if s.State != WitnessEmpty || s.MsgID != 0 {
				t.Errorf("seq 5 %+v", s)
			}
		case 7:
			if s.State != WitnessPurged {
				t.Errorf("seq 7 %+v", s)
			}
		case 141:
			if s.State != WitnessFilled || s.StoredSeq != 140 || s.MsgID != msgs[139].MsgID {
				t.Errorf("misplaced seq 141 %+v", s)
			}
		case 142:
			if s.State != WitnessInvalid || s.Detail == "" {
				t.Errorf("corrupt seq 142 %+v", s)
			}
		default:
			m := msgs[seq-1]
			if s.State != WitnessFilled || s.StoredSeq != seq || s.MsgID != m.MsgID || s.SenderUID != m.SenderUID ||
				s.Content != m.Content || !s.CreatedAt.Equal(m.CreatedAt) || s.ConvType != model.ConvGroup {
				t.Errorf("seq %d %+v, stored %+v", seq, s, m)
			}
		}
		switch seq {
		case 2:
			if !reflect.DeepEqual(s.DelList, []uint64{3, 4}) || !reflect.DeepEqual(s.DelRecords, []uint64{5}) || s.Revoke != nil {
				t.Errorf("seq 2 deletions %v / %v", s.DelList, s.DelRecords)
			}
		case 3:
			if s.Revoke == nil || s.Revoke.UserID != 1 || s.Revoke.Role != roleSender || s.Revoke.At.IsZero() || s.Content != msgs[2].Content || s.Version != 1 {
				t.Errorf("seq 3 revoke %+v (content kept as stored)", s)
			}
		default:
			if s.Revoke != nil || len(s.DelList) != 0 || len(s.DelRecords) != 0 {
				t.Errorf("seq %d has tags %+v", seq, s)
			}
		}
	}
	// A sub-range starting inside a bucket, past what is written.
	w, err = f.svc.Witness(ctx, 1, conv, 149, 260)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Slots) != 112 || w.Slots[0].ConvSeq != 149 || w.Slots[1].State != WitnessFilled || w.Slots[2].State != WitnessEmpty {
		t.Fatalf("sub-range %+v", w.Slots[:3])
	}
	if len(w.Buckets) != 2 || w.Buckets[1].Exists || w.MaxSeq != 150 {
		t.Errorf("sub-range buckets %+v max %d", w.Buckets, w.MaxSeq)
	}
	// Nothing at or above the range.
	if w, err = f.svc.Witness(ctx, 1, conv, 901, 1000); err != nil || w.TopBucketCounted || w.MaxSeq != 0 || len(w.Slots) != 100 {
		t.Errorf("range past the end: %+v %v", w.Buckets, err)
	}

	for name, c := range map[string]struct {
		uid, from, to uint64
		want          error
	}{
		"non-member": {9, 1, 10, model.ErrForbidden},
		"from 0":     {1, 0, 10, model.ErrInvalid},
		"reversed":   {1, 10, 9, model.ErrInvalid},
		"too long":   {1, 1, MaxWitnessRange + 1, model.ErrInvalid},
	} {
		if _, err := f.svc.Witness(ctx, c.uid, conv, c.from, c.to); !errors.Is(err, c.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := f.svc.Witness(ctx, 1, conv, 1, MaxWitnessRange); err != nil {
		t.Errorf("a range of MaxWitnessRange: %v", err)
	}
}

// TestWitnessOneToOne: a party reads a 1:1 conversation with its is_read
// flags; the other conversation's watermarks are not listed.
func TestWitnessOneToOne(t *testing.T) {
	ctx := context.Background()
	conv, _ := model.SingleConvID(1, 2)
	other, _ := model.SingleConvID(1, 20)
	f := newFixture(t, fakeMembers{}, nil, func(d *Deps) { d.ConvSeqs = fixedSeqs(4) })
	f.write(t, append(msgsFor(conv, 1, 4, 1, 2), msgsFor(other, 1, 2, 1, 20)...))
	if err := f.svc.MarkRead(ctx, 2, conv, 1, 4); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ uid, conv uint64 }{{1, conv}, {2, conv}, {1, other}} {
		if _, err := f.svc.Clear(ctx, c.uid, c.conv); err != nil {
			t.Fatal(err)
		}
	}
	w, err := f.svc.Witness(ctx, 2, conv, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range w.Slots {
		if s.IsRead != (s.SenderUID == 1) || s.ConvType != model.ConvSingle {
			t.Errorf("seq %d sent by %d: is_read %v", s.ConvSeq, s.SenderUID, s.IsRead)
		}
	}
	if !reflect.DeepEqual(w.Clears, []Clear{{UID: 1, MinSeq: 4}, {UID: 2, MinSeq: 4}}) {
		t.Errorf("clears %+v", w.Clears)
	}
	if _, err := f.svc.Witness(ctx, 3, conv, 1, 4); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("not a party: %v", err)
	}
}
