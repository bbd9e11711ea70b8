package retention

import (
	"context"
	"testing"
	"time"

	"imlab/internal/testenv"
)

func TestRetentionRules(t *testing.T) {
	my := testenv.NewMySQL(t)
	db := my.DB
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now().UTC()
	old := now.Add(-40 * 24 * time.Hour)
	ins := func(uid, seq uint64, at time.Time) {
		if _, err := db.ExecContext(ctx, `INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at)
			VALUES (?,?,?,?,2,1,?)`, uid, seq, uid*1000+seq, 7, at); err != nil {
			t.Fatal(err)
		}
	}
	for s := uint64(1); s <= 10; s++ {
		ins(1, s, now)
		ins(3, s, now)
	}
	for s := uint64(1); s <= 5; s++ {
		at := now
		if s <= 2 {
			at = old
		}
		ins(2, s, at)
	}
	exec := func(q string, args ...any) {
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	// uid 1: two devices at 5 and 3 → seqs 1..3 go.
	exec(`INSERT INTO sync_cursor (uid, device_id, pull_seq, updated_at) VALUES (1,'a',5,?),(1,'b',3,?)`, now, now)
	exec(`INSERT INTO sync_served (uid, device_id, served_seq, updated_at) VALUES (1,'a',6,?),(1,'b',3,?)`, now, now)
	// uid 3: one device pulled all, another was served but never acknowledged → nothing goes.
	exec(`INSERT INTO sync_cursor (uid, device_id, pull_seq, updated_at) VALUES (3,'a',10,?)`, now)
	exec(`INSERT INTO sync_served (uid, device_id, served_seq, updated_at) VALUES (3,'a',10,?),(3,'c',4,?)`, now, now)
	// uid 2: no device; only rows past MaxAge go.
	exec(`INSERT INTO seq_fence (uid, max_seq, updated_at) VALUES (1,10,?),(2,5,?),(3,10,?)`, now, now, now)
	exec(`INSERT INTO mq_dedup (msg_id, uid, created_at) VALUES (1,1,?),(2,1,?)`, now.Add(-72*time.Hour), now)

	cfg := DefaultConfig()
	cfg.DeleteBatch = 2
	cfg.ScanPage = 4
	r, err := New(cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	// Just pulled: within PulledMinAge nothing pulled goes, only what is
	// past MaxAge.
	rep, err := r.Run(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeletedPulled != 0 || rep.DeletedAged != 2 || rep.DedupDeleted != 1 || rep.Scanned != 25 {
		t.Fatalf("report %+v: rows pulled a moment ago went before PulledMinAge", rep)
	}
	// A day later the pulled rows go too.
	later := now.Add(cfg.PulledMinAge + time.Minute)
	rep, err = r.Run(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeletedPulled != 3 || rep.DeletedAged != 0 || rep.DedupDeleted != 0 || rep.Scanned != 23 {
		t.Fatalf("report %+v", rep)
	}
	left := map[uint64][]uint64{}
	rows, err := db.QueryContext(ctx, "SELECT uid, seq FROM offline_msg ORDER BY uid, seq")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var u, s uint64
		if err := rows.Scan(&u, &s); err != nil {
			t.Fatal(err)
		}
		left[u] = append(left[u], s)
	}
	rows.Close()
	if len(left[1]) != 7 || left[1][0] != 4 || len(left[2]) != 3 || left[2][0] != 3 || len(left[3]) != 10 {
		t.Fatalf("rows left: %v", left)
	}
	var fence int
	if err := db.QueryRowContext(ctx, "SELECT CAST(SUM(max_seq) AS SIGNED) FROM seq_fence").Scan(&fence); err != nil || fence != 25 {
		t.Fatalf("fence changed: %d %v", fence, err)
	}
	rep2, err := r.Run(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	if rep2.DeletedAged+rep2.DeletedPulled+rep2.DedupDeleted != 0 {
		t.Fatalf("second run deleted again: %+v", rep2)
	}
}
