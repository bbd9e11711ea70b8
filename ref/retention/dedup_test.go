package retention

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"imlab/internal/testenv"
)

// dedupRow is one mq_dedup row.
type dedupRow struct {
	msgID, uid uint64
	at         time.Time
}

// insertDedup writes rows into mq_dedup in multi-row statements of up to
// 1000.
func insertDedup(ctx context.Context, t testing.TB, db *sql.DB, rows []dedupRow) {
	t.Helper()
	insertBatched(ctx, t, db, "mq_dedup (msg_id, uid, created_at)", "(?,?,?)", len(rows),
		func(i int) []any { return []any{rows[i].msgID, rows[i].uid, rows[i].at} })
}

// TestDedupTrimReadsOnlyExpiredRows (real MariaDB): a pass over 5,000
// young mq_dedup rows and 4 past DedupMaxAge, on one connection whose
// Handler_read_* counters are read before and after, deletes exactly the 4
// and reads a handful of index entries, not the table (a trim without an
// index on created_at reads all 5,004 rows). The pass's clock carries
// sub-millisecond digits, as the clock's do; the oldest young row is one
// millisecond after the exact cut-off and stays, the youngest expired one
// is just before it and goes. The expired rows have the highest msg_ids:
// a walk of the primary key finds them last. Deletes go 3 at a time, so
// the trim takes more than one batch.
func TestDedupTrimReadsOnlyExpiredRows(t *testing.T) {
	m := testenv.NewMySQLNamed(t, "imlab_dedup_")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	now := time.Now().UTC().Truncate(time.Millisecond).Add(123_456 * time.Nanosecond)
	cfg := DefaultConfig()
	cfg.DeleteBatch, cfg.Pause = 3, 0
	edge := now.Add(-cfg.DedupMaxAge).Truncate(time.Millisecond) // just before the exact cut-off
	const young = 5000
	var rows []dedupRow
	for i := range uint64(young) {
		rows = append(rows, dedupRow{1 + i/10, 1 + i%10, now.Add(-time.Duration(i) * time.Millisecond)})
	}
	rows = append(rows, dedupRow{1_000_000, 1, edge.Add(time.Millisecond)}) // after the cut-off: stays
	expired := []dedupRow{
		{1_000_001, 1, edge},
		{1_000_001, 2, edge.Add(-time.Millisecond)},
		{1_000_002, 1, now.Add(-cfg.DedupMaxAge - time.Hour)},
		{1_000_003, 1, now.Add(-40 * 24 * time.Hour)},
	}
	insertDedup(ctx, t, m.DB, append(rows, expired...))
	db := oneConnDB(t, m.DSN)
	r, err := New(cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	rep, reads := passReads(ctx, t, db, r, now)
	t.Logf("report %+v, Handler_read_* %d", rep, reads)
	if rep.DedupDeleted != int64(len(expired)) {
		t.Fatalf("report %+v, want %d dedup rows deleted", rep, len(expired))
	}
	left := map[[2]uint64]bool{}
	q, err := m.DB.QueryContext(ctx, "SELECT msg_id, uid FROM mq_dedup")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for q.Next() {
		var k [2]uint64
		if err := q.Scan(&k[0], &k[1]); err != nil {
			t.Fatal(err)
		}
		left[k] = true
	}
	if err := q.Err(); err != nil {
		t.Fatal(err)
	}
	if len(left) != len(rows) {
		t.Errorf("%d rows left, want %d", len(left), len(rows))
	}
	for _, d := range rows {
		if !left[[2]uint64{d.msgID, d.uid}] {
			t.Errorf("row (%d, %d) created %s deleted, younger than the cut-off", d.msgID, d.uid, d.at.Format(time.RFC3339Nano))
		}
	}
	if got := reads; got > 60 {
		t.Fatalf("a pass read %d rows or index entries over %d young mq_dedup rows and %d expired, want under 60", got, young+1, len(expired))
	}
}

// BenchmarkRetentionDedupTrim (real MariaDB): one retention pass over
// 300,000 mq_dedup rows, every one younger than DedupMaxAge, and an empty
// inbox: what the dedup trim reads when nothing is to go (a consumer's
// table between passes). handler_reads/pass is the Handler_read_*
// counters of the pass's one connection.
func BenchmarkRetentionDedupTrim(b *testing.B) {
	m := testenv.NewMySQLNamed(b, "imlab_dedup_")
	ctx := context.Background()
	const n = 300_000
	now := time.Now().UTC()
	rows := make([]dedupRow, 0, n)
	for i := range uint64(n) {
		rows = append(rows, dedupRow{1 + i/10, 1 + i%10, now.Add(-time.Duration(n-i) * time.Millisecond)})
	}
	insertDedup(ctx, b, m.DB, rows)
	db := m.DB
	r := analyzedOneConn(ctx, b, db, "mq_dedup")
	var reads int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, n := passReads(ctx, b, db, r, time.Now())
		if rep.DedupDeleted != 0 {
			b.Fatalf("pass: %+v, want nothing deleted", rep)
		}
		reads += n
	}
	b.ReportMetric(float64(reads)/float64(b.N), "handler_reads/pass")
}
