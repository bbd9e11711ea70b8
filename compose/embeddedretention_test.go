package compose

import (
	"slices"
	"testing"
	"time"

	"imlab/ref/retention"
)

// TestEmbeddedRetention: a retention pass runs on the embedded MySQL as on
// MariaDB: it reads only the rows older than its later cut-off along
// idx_created_msg, in pages of 2 that split rows of one created_at and
// msg_id, deletes the expired rows and those every device of their uid
// pulled (rechecked under FOR UPDATE), leaves a uid without a device and
// the young rows alone, and trims the tombstones and the mq_dedup rows
// past their age (mq_dedup along idx_created, migration 009), two at a
// time.
func TestEmbeddedRetention(t *testing.T) {
	ctx, _, db := embeddedMigrated(t)
	now := time.Now().UTC()
	// uids 1..3, seqs 1..2 expired, 3..6 two days old (one created_at,
	// msg_id 100+seq shared across the uids), 7..8 young.
	for uid := uint64(1); uid <= 3; uid++ {
		for seq := uint64(1); seq <= 8; seq++ {
			at := now
			switch {
			case seq <= 2:
				at = now.Add(-40 * 24 * time.Hour)
			case seq <= 6:
				at = now.Add(-48 * time.Hour)
			}
			if _, err := db.ExecContext(ctx, `INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at)
				VALUES (?, ?, ?, 7, 2, 1, ?)`, uid, seq, 100+seq, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	// uid 1 pulled everything, uid 2's devices 8 and 4; uid 3 has none.
	for _, q := range []string{
		`INSERT INTO sync_served (uid, device_id, served_seq, updated_at) VALUES (1,'a',8,NOW()),(2,'a',8,NOW()),(2,'b',4,NOW())`,
		`INSERT INTO sync_cursor (uid, device_id, pull_seq, updated_at) VALUES (1,'a',8,NOW()),(2,'a',8,NOW()),(2,'b',4,NOW())`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO offline_tombstone (uid, msg_id, seq, created_at, deleted_at) VALUES (9,1,1,?,?),(9,2,2,?,?)`,
		now.Add(-3*time.Hour), now, now, now); err != nil {
		t.Fatal(err)
	}
	// mq_dedup: three rows past the dedup age, one just inside it.
	if _, err := db.ExecContext(ctx, `INSERT INTO mq_dedup (msg_id, uid, created_at) VALUES (1,1,?),(1,2,?),(2,1,?),(3,1,?)`,
		now.Add(-72*time.Hour), now.Add(-49*time.Hour), now.Add(-48*time.Hour-time.Millisecond), now.Add(-47*time.Hour)); err != nil {
		t.Fatal(err)
	}
	cfg := retention.DefaultConfig()
	cfg.ScanPage, cfg.DeleteBatch, cfg.Pause = 2, 2, 0
	r, err := retention.New(cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(ctx, now)
	if err != nil || rep.Scanned != 18 || rep.DeletedAged != 6 || rep.DeletedPulled != 6 || rep.TombstonesTrimmed != 1 || rep.DedupDeleted != 3 {
		t.Fatalf("pass: %+v, %v; want 18 rows read, 6 expired and 6 pulled deleted, 1 tombstone and 3 dedup rows trimmed", rep, err)
	}
	var dedupLeft uint64
	if err := db.QueryRowContext(ctx, "SELECT msg_id FROM mq_dedup").Scan(&dedupLeft); err != nil || dedupLeft != 3 {
		t.Errorf("mq_dedup: msg_id %d left (%v), want the young row 3 alone", dedupLeft, err)
	}
	want := map[uint64][]uint64{1: {7, 8}, 2: {5, 6, 7, 8}, 3: {3, 4, 5, 6, 7, 8}}
	for uid, seqs := range want {
		rows, err := db.QueryContext(ctx, "SELECT seq FROM offline_msg WHERE uid = ? ORDER BY seq", uid)
		if err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for rows.Next() {
			var s uint64
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		rows.Close()
		if !slices.Equal(got, seqs) {
			t.Errorf("uid %d: seqs %v left, want %v", uid, got, seqs)
		}
	}
}
