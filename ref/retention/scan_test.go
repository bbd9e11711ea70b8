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

// insertRows writes offline_msg rows (uid, seq, msg_id, conv_id 7,
// created_at) in multi-row statements of up to 1000.
func insertRows(ctx context.Context, t *testing.T, db *sql.DB, rows [][3]uint64, at func(i int) time.Time) {
	t.Helper()
	insertBatched(ctx, t, db, "offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at)", "(?,?,?,7,2,1,?)",
		len(rows), func(i int) []any { return []any{rows[i][0], rows[i][1], rows[i][2], at(i)} })
}

// insertBatched writes n rows with INSERT INTO into VALUES tuple, ... in
// multi-row statements of up to 1000, row i's values args(i).
func insertBatched(ctx context.Context, t testing.TB, db *sql.DB, into, tuple string, n int, args func(i int) []any) {
	t.Helper()
	for start := 0; start < n; start += 1000 {
		var sb strings.Builder
		sb.WriteString("INSERT INTO " + into + " VALUES ")
		var vals []any
		for i := start; i < min(start+1000, n); i++ {
			if i > start {
				sb.WriteByte(',')
			}
			sb.WriteString(tuple)
			vals = append(vals, args(i)...)
		}
		if _, err := db.ExecContext(ctx, sb.String(), vals...); err != nil {
			t.Fatal(err)
		}
	}
}

// oneConnDB opens a pool of one connection to dsn (the Handler_read_*
// counters of its session are then everything its statements read),
// closed at the test's end.
func oneConnDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return db
}

// analyzedOneConn runs ANALYZE TABLE table on db, keeps db to one
// connection (its counters are then a pass's) and answers a Retention of
// the default config on it.
func analyzedOneConn(ctx context.Context, t testing.TB, db *sql.DB, table string) *Retention {
	t.Helper()
	if _, err := db.ExecContext(ctx, "ANALYZE TABLE "+table); err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	r, err := New(DefaultConfig(), db)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestScanSharedCreatedAt (real MariaDB): 5 uids with rows 1..4 expired,
// 5..10 a day past the grace and 11..12 young; the rows of each age share
// one created_at and one msg_id per seq across the uids (a group
// message), so index entries differ only by uid at a page's edge. uid 1's
// device pulled everything, uid 2's two devices 9 and 7, uid 3 has no
// device, uid 4's device never acknowledged, uid 5's pulled 8. Whatever
// the page size, a pass reads each old row once and deletes exactly the
// expired rows and those at or below each floor.
func TestScanSharedCreatedAt(t *testing.T) {
	for _, page := range []int{1, 3, 4, 7} {
		t.Run(fmt.Sprintf("page=%d", page), func(t *testing.T) {
			db := testenv.NewMySQL(t).DB
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			now := time.Now().UTC()
			ages := map[bool]time.Time{true: now.Add(-40 * 24 * time.Hour), false: now.Add(-48 * time.Hour)}
			var rows [][3]uint64
			for uid := uint64(1); uid <= 5; uid++ {
				for seq := uint64(1); seq <= 12; seq++ {
					rows = append(rows, [3]uint64{uid, seq, 1000 + seq})
				}
			}
			insertRows(ctx, t, db, rows, func(i int) time.Time {
				switch seq := rows[i][1]; {
				case seq <= 4:
					return ages[true]
				case seq <= 10:
					return ages[false]
				}
				return now
			})
			for _, q := range []string{
				`INSERT INTO sync_served (uid, device_id, served_seq, updated_at) VALUES (1,'a',12,NOW()),(2,'a',12,NOW()),(2,'b',7,NOW()),(4,'a',12,NOW()),(5,'a',12,NOW())`,
				`INSERT INTO sync_cursor (uid, device_id, pull_seq, updated_at) VALUES (1,'a',12,NOW()),(2,'a',9,NOW()),(2,'b',7,NOW()),(5,'a',8,NOW())`,
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			cfg := DefaultConfig()
			cfg.ScanPage, cfg.DeleteBatch, cfg.Pause = page, 2, 0
			log := &Log{}
			r, err := New(cfg, db, log)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := r.Run(ctx, now)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Scanned != 50 || rep.DeletedAged != 20 || rep.DeletedPulled != 13 {
				t.Fatalf("report %+v, want 50 rows read, 20 expired and 13 pulled deleted", rep)
			}
			floor := map[uint64]uint64{1: 12, 2: 7, 3: 0, 4: 0, 5: 8}
			deleted := map[key]bool{}
			for _, d := range log.Snapshot().Rows {
				k := key{d.UID, d.Seq}
				if deleted[k] {
					t.Fatalf("%+v deleted twice", d)
				}
				deleted[k] = true
			}
			left, err := db.QueryContext(ctx, "SELECT uid, seq FROM offline_msg")
			if err != nil {
				t.Fatal(err)
			}
			defer left.Close()
			for left.Next() {
				var k key
				if err := left.Scan(&k.uid, &k.seq); err != nil {
					t.Fatal(err)
				}
				if deleted[k] {
					t.Fatalf("%v logged deleted, still there", k)
				}
				deleted[k] = false
			}
			for _, row := range rows {
				uid, seq := row[0], row[1]
				want := seq <= 4 || (seq <= 10 && seq <= floor[uid])
				if gone, ok := deleted[key{uid, seq}]; !ok || gone != want {
					t.Errorf("uid %d seq %d: deleted %v (known %v), want %v", uid, seq, gone, ok, want)
				}
			}
			if rep, err = r.Run(ctx, now); err != nil || rep.Scanned != 17 || rep.DeletedAged+rep.DeletedPulled != 0 {
				t.Fatalf("second pass: %+v %v, want the 17 old rows kept read and none deleted", rep, err)
			}
		})
	}
}

// passReads runs one pass of r at now on db, whose one connection the
// pass uses, and answers its report and the Handler_read_* calls it made
// (fatal when the pass fails or the connection changed under it).
func passReads(ctx context.Context, t testing.TB, db *sql.DB, r *Retention, now time.Time) (Report, int64) {
	t.Helper()
	conn, before := handlerReads(ctx, t, db)
	rep, err := r.Run(ctx, now)
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	conn2, after := handlerReads(ctx, t, db)
	if conn2 != conn {
		t.Fatalf("connection %d, then %d: the counters are not one connection's", conn, conn2)
	}
	return rep, after - before
}

// handlerReads is the sum of the Handler_read_* counters of the one
// connection of db: the rows and index entries its statements read.
func handlerReads(ctx context.Context, t testing.TB, db *sql.DB) (conn, reads int64) {
	t.Helper()
	if err := db.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&conn); err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, "SHOW SESSION STATUS LIKE 'Handler_read%'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		reads += n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return conn, reads
}

// TestPassReadsOnlyOldRows (real MariaDB): a pass over 5,000 young rows and
// 3 expired ones, and as many young and old tombstones, on one connection
// whose Handler_read_* counters are read before and after, reads the old
// rows and tombstones and none of the young ones (a walk of the table by
// its primary key reads all 5,003 rows; a bound with more fractional
// digits than created_at's reads the whole index or table). Its cut-offs
// and the trims' carry sub-millisecond digits, as the clock's do.
func TestPassReadsOnlyOldRows(t *testing.T) {
	m := testenv.NewMySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	now := time.Now().UTC().Truncate(time.Millisecond).Add(123_456 * time.Nanosecond)
	const young = 5000
	var rows [][3]uint64
	for i := range uint64(young + 3) {
		rows = append(rows, [3]uint64{1 + i%100, 1 + i/100, 1 + i})
	}
	insertRows(ctx, t, m.DB, rows, func(i int) time.Time {
		if i >= young {
			return now.Add(-40 * 24 * time.Hour)
		}
		return now.Add(-time.Duration(i) * time.Millisecond)
	})
	// As many young tombstones and 3 past TombstoneAge: the trim reads a
	// range of idx_created, the 3.
	for start := 0; start < young+3; start += 1000 {
		var sb strings.Builder
		sb.WriteString("INSERT INTO offline_tombstone (uid, msg_id, seq, created_at, deleted_at) VALUES ")
		var args []any
		for i := start; i < min(start+1000, young+3); i++ {
			if i > start {
				sb.WriteByte(',')
			}
			at := now.Add(-time.Duration(i) * time.Millisecond)
			if i >= young {
				at = now.Add(-DefaultTombstoneAge - time.Hour)
			}
			sb.WriteString("(?,?,?,?,?)")
			args = append(args, 1, i+1, i+1, at, now)
		}
		if _, err := m.DB.ExecContext(ctx, sb.String(), args...); err != nil {
			t.Fatal(err)
		}
	}
	db := oneConnDB(t, m.DSN)
	cfg := DefaultConfig()
	cfg.ScanPage, cfg.Pause = 100, 0
	r, err := New(cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	rep, reads := passReads(ctx, t, db, r, now)
	t.Logf("report %+v, Handler_read_* %d", rep, reads)
	if rep.Scanned != 3 || rep.DeletedAged != 3 || rep.TombstonesTrimmed != 3 {
		t.Fatalf("report %+v, want 3 rows read and deleted, 3 tombstones trimmed", rep)
	}
	if got := reads; got > 100 {
		t.Fatalf("a pass read %d rows or index entries over %d young rows and tombstones and 3 old ones of each, want under 100", got, young)
	}
}
