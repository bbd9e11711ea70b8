package reconcile_test

import (
	"context"
	"testing"
	"time"

	"imlab/ref/fanout"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/reconcile"
	"imlab/ref/retention"
)

// TestForwardLeavesRetentionDeletions: rows delivered, pulled and
// acknowledged by every device and deleted early by retention are not
// missing: the forward pass over the same messages writes none of them
// again (before retention left tombstones it wrote each deleted row back
// at a new seq: the same msg_id twice in one inbox, the second behind
// later messages of its conversation). A row the fan-out really lost is
// still repaired.
func TestForwardLeavesRetentionDeletions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	since := time.Now().Add(-time.Minute)
	p := deliveredPipeline(t, ctx)
	// Every uid has one device that pulled and acknowledged everything.
	exec := func(q string, args ...any) int64 {
		t.Helper()
		res, err := p.db.ExecContext(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := res.RowsAffected()
		return n
	}
	now := time.Now().UTC()
	exec(`INSERT INTO sync_served (uid, device_id, served_seq, updated_at) SELECT uid, 'd1', MAX(seq), ? FROM offline_msg GROUP BY uid`, now)
	exec(`INSERT INTO sync_cursor (uid, device_id, pull_seq, updated_at) SELECT uid, 'd1', MAX(seq), ? FROM offline_msg GROUP BY uid`, now)
	var rows int64
	if err := p.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM offline_msg").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	// Lab short ages: a pulled row goes at once, the window stays an hour.
	cfg := retention.DefaultConfig()
	cfg.LabShortAges, cfg.MaxAge, cfg.PulledMinAge, cfg.Interval = true, time.Hour, 0, time.Second
	ret, err := retention.New(cfg, p.db)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ret.Run(ctx, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeletedPulled != rows || rep.DeletedAged != 0 {
		t.Fatalf("retention %+v, want all %d rows deleted early", rep, rows)
	}
	// The fan-out loses one row (no tombstone): that one must come back.
	lost := p.ackedIDs()[3]
	rcpt := p.acked[lost][0]
	exec("DELETE FROM offline_tombstone WHERE uid = ? AND msg_id = ?", rcpt, lost)

	fw, err := p.rec.Forward(ctx, since, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var left int64
	if err := p.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM offline_msg").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if fw.MissingRows != 1 || fw.Repaired != 1 || left != 1 {
		t.Fatalf("forward %+v; %d inbox rows after it: want only the row without a tombstone (uid %d msg %d) written again, %d deleted rows left alone",
			fw, left, rcpt, lost, rows-1)
	}
	var uid, msg uint64
	if err := p.db.QueryRowContext(ctx, "SELECT uid, msg_id FROM offline_msg").Scan(&uid, &msg); err != nil || uid != rcpt || msg != lost {
		t.Fatalf("repaired row uid %d msg %d (%v), want uid %d msg %d", uid, msg, err, rcpt, lost)
	}
	// Past the tombstone age the tombstones go, and the repair stops
	// looking as far back (its horizon): nothing is written again either.
	later := time.Now().Add(cfg.TombstoneAge + time.Minute)
	if rep, err = ret.Run(ctx, later); err != nil || rep.TombstonesTrimmed != rows-1 {
		t.Fatalf("trim: %+v, %v; want %d tombstones trimmed", rep, err, rows-1)
	}
	rc := reconcile.DefaultConfig()
	rc.Horizon = time.Millisecond // as if the messages were past the horizon
	rec, err := reconcile.New(rc, p.db, p.writer(reconcile.RepairDedup{}), p.svc.Members, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if fw, err = rec.Forward(ctx, since, time.Now().Add(time.Second)); err != nil || fw.Repaired != 0 || fw.Messages != 0 || fw.Horizon == nil {
		t.Fatalf("forward past the horizon: %+v, %v; want nothing looked at", fw, err)
	}
}

// TestRepairDedup: the forward pass's writer writes neither a row that is
// there nor one retention deleted and tombstoned.
func TestRepairDedup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := newPipeline(t, fanout.PolicyStore)
	w := p.writer(reconcile.RepairDedup{})
	now := time.Now().UTC()
	items := []inbox.Item{
		{UID: 1, MsgID: 101, ConvID: 5, ConvType: model.ConvSingle, ConvSeq: 1, SenderUID: 2, CreatedAt: now},
		{UID: 1, MsgID: 102, ConvID: 5, ConvType: model.ConvSingle, ConvSeq: 2, SenderUID: 2, CreatedAt: now},
		{UID: 1, MsgID: 103, ConvID: 5, ConvType: model.ConvSingle, ConvSeq: 3, SenderUID: 2, CreatedAt: now},
	}
	if got, err := w.Write(ctx, p.db, items[:1]); err != nil || len(got) != 1 {
		t.Fatalf("first write: %v, %v", got, err)
	}
	if _, err := p.db.ExecContext(ctx, `INSERT INTO offline_tombstone (uid, msg_id, seq, created_at, deleted_at) VALUES (1, 102, 7, ?, ?)`, now, now); err != nil {
		t.Fatal(err)
	}
	got, err := w.Write(ctx, p.db, items)
	if err != nil || len(got) != 1 || got[0].MsgID != 103 {
		t.Fatalf("write: %+v, %v; want only msg 103 written (101 is there, 102 tombstoned)", got, err)
	}
}
