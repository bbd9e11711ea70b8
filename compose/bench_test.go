package compose

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"imlab/ref/schema"
)

const insertOfflineMsg = "INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES (?, ?, ?, ?, 1, 1, ?)"

// BenchmarkInsertOfflineMsg measures single-row autocommit INSERTs into
// offline_msg on a table already holding `prefill` rows, per MySQL backend,
// so the embedded warning's figures can be re-measured:
//
//	go test -run '^$' -bench InsertOfflineMsg -benchtime 200x ./compose/
func BenchmarkInsertOfflineMsg(b *testing.B) {
	for _, mode := range []string{ModeLocal, ModeEmbedded} {
		for _, prefill := range []int{0, 3000} {
			b.Run(fmt.Sprintf("%s/prefill=%d", mode, prefill), func(b *testing.B) {
				db := offlineMsgTable(b, mode, prefill)
				now := time.Now().UTC()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := db.Exec(insertOfflineMsg, 1000+i%100, i, 5000000+i, 7, now); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
			})
		}
	}
}

// BenchmarkInsertOfflineMsgPosition measures where in the primary key
// order a row lands: after every stored row (end) or before them (front),
// on a table of 3000 rows. The embedded memory engine re-sorts the table
// after every INSERT and each swap of that sort rewrites the row location
// in every secondary index entry, so a row at the front costs a walk of
// the whole table per row it passes; MariaDB pays the same either way.
//
//	go test -run '^$' -bench InsertOfflineMsgPosition -benchtime 20x ./compose/
func BenchmarkInsertOfflineMsgPosition(b *testing.B) {
	for _, mode := range []string{ModeLocal, ModeEmbedded} {
		for _, pos := range []string{"end", "front"} {
			b.Run(fmt.Sprintf("%s/position=%s", mode, pos), func(b *testing.B) {
				db := offlineMsgTable(b, mode, 3000)
				uid := 1000 // after the stored uids 0..99
				if pos == "front" {
					uid = 0 // before uid 0's stored seqs (1000000+)
				}
				now := time.Now().UTC()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := db.Exec(insertOfflineMsg, uid, i, 5000000+i, 7, now); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
			})
		}
	}
}

// offlineMsgTable starts a MySQL of mode (skipping when none can start),
// migrates it and fills offline_msg with prefill rows (uid j%100, seq
// 1000000+j) in multi-row INSERTs of 500 rows. Stopped at the end of b.
func offlineMsgTable(b *testing.B, mode string, prefill int) *sql.DB {
	b.Helper()
	if mode == ModeLocal {
		if _, err := findMySQLServer(); err != nil {
			b.Skip(err)
		}
	}
	// Not b.TempDir: a long benchmark name makes mariadbd's socket path
	// longer than a Unix socket may be.
	dir, err := os.MkdirTemp("", "imlab-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	cfg := DefaultConfig()
	cfg.Mode = mode
	cfg.DataDir = dir
	cfg.WithKafka, cfg.WithMongo = false, false
	ctx := context.Background()
	be, stop, err := Start(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stop(ctx) })
	db, err := sql.Open("mysql", be.MySQLDSN)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if _, err := schema.Migrate(ctx, db); err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	for i := 0; i < prefill; i += 500 {
		var sb strings.Builder
		sb.WriteString("INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES ")
		args := make([]any, 0, 2500)
		for j := i; j < i+500 && j < prefill; j++ {
			if j > i {
				sb.WriteString(",")
			}
			sb.WriteString("(?, ?, ?, ?, 1, 1, ?)")
			args = append(args, j%100, 1000000+j, j, j%50, now)
		}
		if _, err := db.Exec(sb.String(), args...); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// BenchmarkEmbeddedAbortRebuild measures a transaction that inserts one
// offline_msg row and rolls back, on a table of `rows` rows: on the
// embedded MySQL the ROLLBACK rebuilds the indexes of offline_msg
// (compose/gms rebuilds them, O(rows²)); on MariaDB it undoes one row.
//
//	go test -run '^$' -bench EmbeddedAbortRebuild -benchtime 5x ./compose/
func BenchmarkEmbeddedAbortRebuild(b *testing.B) {
	for _, mode := range []string{ModeLocal, ModeEmbedded} {
		for _, rows := range []int{500, 3000} {
			b.Run(fmt.Sprintf("%s/rows=%d", mode, rows), func(b *testing.B) {
				db := offlineMsgTable(b, mode, rows)
				now := time.Now().UTC()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					tx, err := db.Begin()
					if err != nil {
						b.Fatal(err)
					}
					if _, err := tx.Exec(insertOfflineMsg, 0, i, 9000000+i, 7, now); err != nil {
						b.Fatal(err)
					}
					if err := tx.Rollback(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/abort")
			})
		}
	}
}
