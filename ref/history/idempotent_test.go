package history

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"imlab/ref/model"
)

type committedSeqs struct{ n atomic.Uint64 }

func (c *committedSeqs) MaxConvSeq(context.Context, uint64) (uint64, error) { return c.n.Load(), nil }

// TestMutationsIdempotentAndHonest (FerretDB): revoke, delete, clear and
// mark-read answer the same to a retry and change nothing more; a conv_seq
// the send path committed but the history tier has not written yet is
// ErrUnavailable (retry) and changes nothing, where a seq that will never
// hold a message (a hole below what is written, past the committed end) is
// ErrNotFound for revoke and delete and skipped by mark-read.
func TestMutationsIdempotentAndHonest(t *testing.T) {
	ctx := context.Background()
	conv, _ := model.SingleConvID(1, 2)
	committed := &committedSeqs{}
	committed.n.Store(8)
	f := newFixture(t, fakeMembers{}, nil, func(d *Deps) { d.ConvSeqs = committed })
	msgs := msgsFor(conv, 1, 6, 1, 2)       // odd seqs from 1, even from 2
	f.write(t, append(msgs[:4:4], msgs[5])) // 5 is a hole below 6; 7 and 8 are not written yet

	for name, call := range map[string]func() error{
		"revoke pending":    func() error { return f.svc.Revoke(ctx, 1, conv, 7) },
		"delete pending":    func() error { return f.svc.Delete(ctx, 2, conv, 8) },
		"read over pending": func() error { return f.svc.MarkRead(ctx, 2, conv, 1, 8) },
	} {
		if err := call(); !errors.Is(err, model.ErrUnavailable) {
			t.Errorf("%s: %v, want unavailable", name, err)
		}
	}
	for name, call := range map[string]func() error{
		"revoke hole":       func() error { return f.svc.Revoke(ctx, 1, conv, 5) },
		"delete hole":       func() error { return f.svc.Delete(ctx, 2, conv, 5) },
		"revoke past end":   func() error { return f.svc.Revoke(ctx, 1, conv, 9) },
		"delete past end":   func() error { return f.svc.Delete(ctx, 2, conv, 9) },
		"revoke not sender": func() error { return f.svc.Revoke(ctx, 2, conv, 1) },
	} {
		if err := call(); !errors.Is(err, model.ErrNotFound) && !errors.Is(err, model.ErrForbidden) {
			t.Errorf("%s: %v", name, err)
		}
	}
	w, err := f.svc.Witness(ctx, 1, conv, 1, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range w.Slots {
		if s.IsRead || s.Revoke != nil || len(s.DelList) != 0 || s.Version != 0 {
			t.Fatalf("a refused call changed seq %d: %+v", s.ConvSeq, s)
		}
	}

	for i := 0; i < 2; i++ {
		if err := f.svc.Revoke(ctx, 1, conv, 1); err != nil {
			t.Fatalf("revoke #%d: %v", i, err)
		}
		if err := f.svc.Delete(ctx, 2, conv, 3); err != nil {
			t.Fatalf("delete #%d: %v", i, err)
		}
		if err := f.svc.MarkRead(ctx, 2, conv, 1, 6); err != nil { // the hole is skipped
			t.Fatalf("read #%d: %v", i, err)
		}
		if min, err := f.svc.Clear(ctx, 2, conv); err != nil || min != 8 {
			t.Fatalf("clear #%d: %d %v", i, min, err)
		}
	}
	f.clock.add(DefaultRevokeWindow + time.Minute)
	if err := f.svc.Revoke(ctx, 1, conv, 1); err != nil {
		t.Fatalf("a revoke retried past the window: %v", err)
	}
	if err := f.svc.Revoke(ctx, 1, conv, 3); !errors.Is(err, model.ErrForbidden) {
		t.Fatalf("a first revoke past the window: %v", err)
	}
	committed.n.Store(10)
	if min, err := f.svc.Clear(ctx, 2, conv); err != nil || min != 10 {
		t.Fatalf("clear after more messages: %d %v", min, err)
	}
	w, err = f.svc.Witness(ctx, 1, conv, 1, 6)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range w.Slots {
		wantRead := s.State == WitnessFilled && s.SenderUID == 1
		switch {
		case s.IsRead != wantRead:
			t.Errorf("seq %d read %v", s.ConvSeq, s.IsRead)
		case s.ConvSeq == 1 && (s.Revoke == nil || s.Version != 2): // revoke + read, once each
			t.Errorf("seq 1 %+v", s)
		case s.ConvSeq == 3 && (len(s.DelList) != 1 || s.Version != 2): // delete + read
			t.Errorf("seq 3 %+v", s)
		}
	}
	if len(w.Clears) != 1 || w.Clears[0].UID != 2 || w.Clears[0].MinSeq != 10 {
		t.Errorf("clears %+v", w.Clears)
	}
}
