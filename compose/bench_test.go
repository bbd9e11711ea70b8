package compose

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"imlab/ref/schema"
)

// BenchmarkInsertOfflineMsg measures single-row autocommit INSERTs into
// offline_msg on a table already holding `prefill` rows, per MySQL backend,
// so the embedded warning's figures can be re-measured:
//
//	go test -run '^$' -bench InsertOfflineMsg -benchtime 200x ./compose/
func BenchmarkInsertOfflineMsg(b *testing.B) {
	for _, mode := range []string{ModeLocal, ModeEmbedded} {
		for _, prefill := range []int{0, 3000} {
			b.Run(fmt.Sprintf("%s/prefill=%d", mode, prefill), func(b *testing.B) {
				if mode == ModeLocal {
					if _, err := findMySQLServer(); err != nil {
						b.Skip(err)
					}
				}
				cfg := DefaultConfig()
				cfg.Mode = mode
				cfg.DataDir = b.TempDir()
				cfg.WithKafka, cfg.WithMongo = false, false
				ctx := context.Background()
				be, stop, err := Start(ctx, cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer stop(ctx)
				db, err := sql.Open("mysql", be.MySQLDSN)
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				if _, err := schema.Migrate(ctx, db); err != nil {
					b.Fatal(err)
				}
				const q = "INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES (?, ?, ?, ?, 1, 1, ?)"
				now := time.Now().UTC()
				// Prefill with multi-row INSERTs (one statement per 500 rows).
				for i := 0; i < prefill; i += 500 {
					var sb strings.Builder
					sb.WriteString("INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES ")
					args := make([]any, 0, 2000)
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
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := db.Exec(q, 1000+i%100, i, 5000000+i, 7, now); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
			})
		}
	}
}
