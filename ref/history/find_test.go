package history

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"imlab/ref/model"
	"imlab/ref/msgid"
)

// idAt is a msg_id whose time field is t (node 1, sequence n).
func idAt(t time.Time, n uint64) uint64 {
	return uint64(t.Sub(msgid.Epoch()).Milliseconds())<<(msgid.NodeBits+msgid.SeqBits) | 1<<msgid.SeqBits | n
}

// TestFindMessage: a message is found by (conv_id, msg_id) alone in any
// bucket of a conversation (first, middle, the partial last one); an
// unknown msg_id, an unknown conversation and a purged slot are not found;
// bad input is refused.
func TestFindMessage(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, newDB(t, nil), nil)
	msgs := msgsFor(testGroup, 1, 350, 1, 2)
	if err := s.WriteBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 100, 101, 250, 301, 350} {
		want := msgs[seq-1]
		got, ok, err := s.FindMessage(ctx, testGroup, want.MsgID)
		if err != nil || !ok {
			t.Fatalf("seq %d: found %v, err %v", seq, ok, err)
		}
		if got.MsgID != want.MsgID || got.ConvSeq != seq || got.ConvID != testGroup || got.Content != want.Content ||
			got.SenderUID != want.SenderUID || got.ClientMsgID != want.ClientMsgID || !got.CreatedAt.Equal(want.CreatedAt) ||
			got.ConvType != model.ConvGroup {
			t.Fatalf("seq %d: got %+v, want %+v", seq, got, want)
		}
	}
	if _, ok, err := s.FindMessage(ctx, testGroup, 999_999_999); err != nil || ok {
		t.Fatalf("unknown msg_id: found %v, err %v", ok, err)
	}
	if _, ok, err := s.FindMessage(ctx, testGroup+1, msgs[0].MsgID); err != nil || ok {
		t.Fatalf("unknown conversation: found %v, err %v", ok, err)
	}
	if err := s.purge(ctx, testGroup, 120); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.FindMessage(ctx, testGroup, msgs[119].MsgID); err != nil || ok {
		t.Fatalf("purged slot: found %v, err %v", ok, err)
	}
	if _, _, err := s.FindMessage(ctx, 0, 1); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("conv_id 0: %v", err)
	}
	if _, _, err := s.FindMessage(ctx, testGroup, 0); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("msg_id 0: %v", err)
	}
}

// TestFindMessageReadsOnlyIDs: every read FindMessage makes is an exact _id
// lookup (find commands only, no aggregate over the collection), bounded by
// the probes plus the buckets scanned; the newest-first scan stops at the
// first bucket whose newest message is older than the target's id time
// minus the clock skew.
func TestFindMessageReadsOnlyIDs(t *testing.T) {
	ctx := context.Background()
	s, cc := countedStore(t)
	conv := testGroup + 7
	old := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Millisecond)
	var msgs []model.Message
	for seq := uint64(1); seq <= 1050; seq++ { // 11 buckets, all two hours old
		msgs = append(msgs, model.Message{MsgID: idAt(old, seq), ConvID: conv, ConvType: model.ConvGroup, ConvSeq: seq,
			SenderUID: 1, ClientMsgID: fmt.Sprintf("c%d", seq), Content: "x", CreatedAt: old})
	}
	if err := s.WriteBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	// An old message deep down is found.
	cc.reset()
	got, ok, err := s.FindMessage(ctx, conv, msgs[4].MsgID)
	if err != nil || !ok || got.ConvSeq != 5 {
		t.Fatalf("old message: %+v %v %v", got, ok, err)
	}
	// Probes: 0,1,3,7,15 then bisect 7..15 (11, 9, 10): 8 lookups; then
	// the 11 buckets newest first.
	if f, a := cc.get("find"), cc.get("aggregate"); f > 8+11 || a != 0 {
		t.Fatalf("old message: %d finds, %d aggregates", f, a)
	}
	// A message sent now that the history does not hold: the scan stops
	// after the newest bucket (two hours old) instead of reading all 11.
	cc.reset()
	if _, ok, err := s.FindMessage(ctx, conv, idAt(time.Now(), 1)); err != nil || ok {
		t.Fatalf("recent unknown message: found %v, err %v", ok, err)
	}
	if f := cc.get("find"); f > 8+1 {
		t.Fatalf("recent unknown message: %d finds, want at most 9 (probes + one bucket)", f)
	}
}
