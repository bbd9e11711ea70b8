package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"imlab/internal/testenv"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/seqalloc"
)

// bothWrites runs a writer test with Writer.Write and with guardedWrite.
func bothWrites(t *testing.T, test func(t *testing.T, guarded bool)) {
	t.Run("locking", func(t *testing.T) { test(t, false) })
	t.Run("guarded", func(t *testing.T) { test(t, true) })
}

// guardedWrite is what the strict send path does with fresh items: the
// guarded raise in one transaction; on a miss, the transaction rolled back
// and the items written again with the locking read and the same proposals.
// Deadlocks and lock wait timeouts are retried a few times, as the send
// path's batcher does.
func guardedWrite(ctx context.Context, w *inbox.Writer, db *sql.DB, items []inbox.Item) ([]model.InboxEntry, error) {
	var held *inbox.Proposals
	var lastErr error
	for attempt := 0; attempt < 8; attempt++ {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return nil, err
		}
		var es []model.InboxEntry
		if held != nil {
			es, err = w.WriteFreshProposedTx(ctx, tx, items, held)
		} else {
			es, err = w.WriteFreshGuardedTx(ctx, tx, items, nil)
		}
		if err == nil {
			err = tx.Commit()
			if err == nil {
				return es, nil
			}
		} else {
			_ = tx.Rollback()
		}
		lastErr = err
		var fm *inbox.FenceMovedError
		switch {
		case errors.As(err, &fm):
			held = fm.Proposals
		case inbox.Retryable(err):
			held = nil
		default:
			return nil, err
		}
	}
	return nil, lastErr
}

// TestGuardedRaise: dense proposals are written by the guarded raise with
// the right PrevSeq; a hole in a uid's seqs makes it miss (nothing kept
// after the rollback), and the locking write with the same proposals then
// leaves no hole of its own.
func TestGuardedRaise(t *testing.T) {
	m := testenv.NewMySQL(t)
	r := testenv.NewRedis(t)
	ctx := context.Background()
	w := newWriter(t, seqalloc.NewRedis(r.Client, r.Keys), nil)
	led := &ledger{}
	want := map[uint64]map[uint64]bool{61: {}, 62: {}}
	write := func(items ...inbox.Item) error {
		es, err := guardedWrite(ctx, w, m.DB, items)
		led.add(es)
		for _, it := range items {
			want[it.UID][it.MsgID] = true
		}
		return err
	}
	// First messages: no fence rows, so the guard misses; the locking
	// write creates them with the proposals taken (seq 1, not 2).
	if err := write(item(61, 1), item(62, 1)); err != nil {
		t.Fatal(err)
	}
	guarded := func(items ...inbox.Item) ([]model.InboxEntry, error) {
		tx, err := m.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		es, err := w.WriteFreshGuardedTx(ctx, tx, items, nil)
		if err != nil {
			_ = tx.Rollback()
			return nil, err
		}
		for _, it := range items {
			want[it.UID][it.MsgID] = true
		}
		led.add(es)
		return es, tx.Commit()
	}
	es, err := guarded(item(61, 2), item(62, 2), item(61, 3))
	if err != nil {
		t.Fatalf("dense proposals: %v", err)
	}
	got := map[[2]uint64]uint64{}
	for _, e := range es {
		got[[2]uint64{e.UID, e.Seq}] = e.PrevSeq
	}
	if len(es) != 3 || got[[2]uint64{61, 2}] != 1 || got[[2]uint64{61, 3}] != 2 || got[[2]uint64{62, 2}] != 1 {
		t.Fatalf("guarded entries %+v", es)
	}
	// A hole: uid 62's counter moved on without a row (a rolled-back
	// writer). The guard misses and keeps nothing.
	if err := r.Client.IncrBy(ctx, r.Keys.SeqCounter(62), 5).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = guarded(item(61, 4), item(62, 4))
	var fm *inbox.FenceMovedError
	if !errors.As(err, &fm) || !errors.Is(err, inbox.ErrFenceMoved) || fm.Proposals == nil {
		t.Fatalf("guard over a hole: %v, want a FenceMovedError with proposals", err)
	}
	delete(want[61], 4)
	delete(want[62], 4)
	// The same items with the same proposals through the locking write:
	// 61 gets 4 (no hole of the miss's own), 62 gets 8 (after the hole).
	tx, err := m.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	es, err = w.WriteFreshProposedTx(ctx, tx, []inbox.Item{item(61, 4), item(62, 4)}, fm.Proposals)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	led.add(es)
	want[61][4], want[62][4] = true, true
	seqs := map[uint64]uint64{}
	for _, e := range es {
		seqs[e.UID] = e.Seq
	}
	if seqs[61] != 4 || seqs[62] != 8 {
		t.Fatalf("after the miss: seqs %v, want 61:4 62:8", seqs)
	}
	// Proposals that do not fit the items (here: used already, and for
	// other uids) are not used: fresh ones are taken.
	tx, err = m.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	es, err = w.WriteFreshProposedTx(ctx, tx, []inbox.Item{item(61, 5)}, fm.Proposals)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	led.add(es)
	want[61][5] = true
	if len(es) != 1 || es[0].Seq != 5 || es[0].PrevSeq != 4 {
		t.Fatalf("unfit proposals: %+v, want seq 5 after 4", es)
	}
	if err := write(item(61, 6), item(62, 6)); err != nil {
		t.Fatal(err)
	}
	led.check(t, m.DB, want)

	// Proposals taken ahead (Propose) for more than the items need (the
	// batch shrank): the items take the first seqs, every fence row is
	// raised over all of them, and the next guard still holds.
	pre, err := w.Propose(ctx, map[uint64]int{61: 2, 62: 1})
	if err != nil {
		t.Fatal(err)
	}
	tx, err = m.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	es, err = w.WriteFreshGuardedTx(ctx, tx, []inbox.Item{item(61, 7)}, pre)
	if err != nil {
		t.Fatalf("covered by proposals taken ahead: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Seq != 7 || es[0].PrevSeq != 6 {
		t.Fatalf("entries %+v, want seq 7 after 6", es)
	}
	fence := func(uid uint64) (f uint64) {
		if err := m.DB.QueryRow(`SELECT max_seq FROM seq_fence WHERE uid = ?`, uid).Scan(&f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	if f61, f62 := fence(61), fence(62); f61 != 8 || f62 != 10 {
		t.Fatalf("fences 61:%d 62:%d, want 8 and 10 (raised over the unused proposals)", f61, f62)
	}
	if es, err = guarded(item(61, 9), item(62, 9)); err != nil {
		t.Fatalf("the guard after unused proposals: %v", err)
	}
	if es[0].PrevSeq != 8 || es[1].PrevSeq != 10 {
		t.Fatalf("entries %+v, want PrevSeq 8 and 10 (the fences)", es)
	}
}
