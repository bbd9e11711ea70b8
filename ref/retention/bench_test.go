package retention

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"imlab/internal/testenv"
)

// BenchmarkRetentionPass (real MariaDB): one retention pass over 200,000
// inbox rows of 2,000 uids with two devices each, one of which pulled
// everything and one half; rows a day and a minute old, the grace one day:
// a first pass (not timed) deletes the half every device pulled, the
// timed passes find nothing more to delete: the scan and the rule alone.
func BenchmarkRetentionPass(b *testing.B) {
	db := testenv.NewMySQL(b).DB
	ctx := context.Background()
	const uids, perUID = 2000, 100
	at := time.Now().UTC().Add(-24*time.Hour - time.Minute)
	for u := 1; u <= uids; u += 100 {
		insertInbox(ctx, b, db, u, u+100, perUID, func(int, int) time.Time { return at })
		for x := u; x < u+100; x++ {
			for _, q := range []string{
				fmt.Sprintf("INSERT INTO sync_served (uid, device_id, served_seq, updated_at) VALUES (%d,'a',%d,NOW()),(%d,'b',%d,NOW())", x, perUID, x, perUID/2),
				fmt.Sprintf("INSERT INTO sync_cursor (uid, device_id, pull_seq, updated_at) VALUES (%d,'a',%d,NOW()),(%d,'b',%d,NOW())", x, perUID, x, perUID/2),
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	cfg := DefaultConfig()
	cfg.Pause = 0
	r, err := New(cfg, db)
	if err != nil {
		b.Fatal(err)
	}
	rep, err := r.Run(ctx, time.Now())
	if err != nil || rep.DeletedPulled != uids*perUID/2 {
		b.Fatalf("first pass: %+v %v", rep, err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if rep, err = r.Run(ctx, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rep.Scanned), "rows/pass")
}

// BenchmarkRetentionPassYoung (real MariaDB): one retention pass over
// 300,000 inbox rows of 3,000 uids, every row younger than both cut-offs
// (a lab's or a young server's table): what a pass reads when nothing may
// go. rows/pass is what the pass scanned, handler_reads/pass the
// Handler_read_* counters of its one connection (every row and index entry
// its statements read).
func BenchmarkRetentionPassYoung(b *testing.B) {
	m := testenv.NewMySQL(b)
	ctx := context.Background()
	const uids, perUID = 3000, 100
	now := time.Now().UTC()
	for u := 1; u <= uids; u += 100 {
		insertInbox(ctx, b, m.DB, u, u+100, perUID, func(x, s int) time.Time { return now.Add(-time.Duration(x*perUID+s) * time.Millisecond) })
	}
	db := m.DB
	r := analyzedOneConn(ctx, b, db, "offline_msg")
	var scanned, reads int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, n := passReads(ctx, b, db, r, time.Now())
		scanned, reads = scanned+int64(rep.Scanned), reads+n
	}
	b.ReportMetric(float64(scanned)/float64(b.N), "rows/pass")
	b.ReportMetric(float64(reads)/float64(b.N), "handler_reads/pass")
}

// insertInbox writes perUID inbox rows (seq 1..perUID) for each uid in
// [from, to) in one statement, each created at at(uid, seq).
func insertInbox(ctx context.Context, b *testing.B, db *sql.DB, from, to, perUID int, at func(uid, seq int) time.Time) {
	b.Helper()
	var sb strings.Builder
	sb.WriteString("INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES ")
	args := []any{}
	for x := from; x < to; x++ {
		for s := 1; s <= perUID; s++ {
			if len(args) > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString("(?,?,?,7,2,1,?)")
			args = append(args, x, s, x*1000+s, at(x, s))
		}
	}
	if _, err := db.ExecContext(ctx, sb.String(), args...); err != nil {
		b.Fatal(err)
	}
}
