package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"imlab/internal/testenv"
)

// TestScanInboxReadsItsWindow (real MySQL): the reverse and push passes'
// scan returns exactly the inbox rows written in [since, until), each
// once, across pages that split rows of one millisecond, with whether
// each row's body is missing; and it reads them along idx_created, not
// by walking the table (EXPLAIN), so a run costs its window.
func TestScanInboxReadsItsWindow(t *testing.T) {
	m := testenv.NewMySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	type row struct {
		uid, seq uint64
		at       time.Time
		content  bool
	}
	var rows []row
	// 3,000 rows an hour before the window and 5 at its end: never read.
	for i := range 3000 {
		rows = append(rows, row{uint64(1000 + i%300), uint64(1 + i/300), t0.Add(-time.Hour), true})
	}
	for i := range 5 {
		rows = append(rows, row{uint64(2000 + i), 1, t0.Add(10 * time.Second), true})
	}
	// In the window: 7 rows of one millisecond (t0, the window's start),
	// then 6 one millisecond apart; every third without its body.
	want := map[[2]uint64]bool{}
	for i := range 13 {
		at := t0
		if i >= 7 {
			at = t0.Add(time.Duration(i-6) * time.Millisecond)
		}
		r := row{uint64(3000 + i%4), uint64(1 + i), at, i%3 != 0}
		rows = append(rows, r)
		want[[2]uint64{r.uid, r.seq}] = !r.content
	}
	insertInbox(t, ctx, m.DB, rows, func(r row) (uint64, uint64, time.Time, bool) { return r.uid, r.seq, r.at, r.content })

	rec := &Reconciler{cfg: DefaultConfig(), db: m.DB}
	rec.cfg.PageSize = 3
	seen := map[[2]uint64]bool{}
	n, err := rec.scanInbox(ctx, t0, t0.Add(10*time.Second), func(page []inboxRef) error {
		if len(page) > 3 {
			return fmt.Errorf("a page of %d rows", len(page))
		}
		for _, x := range page {
			k := [2]uint64{x.uid, x.seq}
			missing, ok := want[k]
			if !ok || seen[k] || x.missing != missing {
				return fmt.Errorf("row uid %d seq %d at %s missing %v: in the window %v, seen before %v", x.uid, x.seq, x.createdAt, x.missing, ok, seen[k])
			}
			seen[k] = true
		}
		return nil
	})
	if err != nil || n != int64(len(want)) || len(seen) != len(want) {
		t.Fatalf("scanned %d of %d rows (%d distinct): %v", n, len(want), len(seen), err)
	}

	// Both queries read a range of idx_created.
	for name, q := range map[string]string{"first": scanFirst, "next": scanNext} {
		var args []any
		if name == "first" {
			args = []any{t0, t0.Add(10 * time.Second), 3}
		} else {
			args = []any{t0, t0.Add(10 * time.Second), t0, t0, 3000, 3000, 1, 3}
		}
		if key := explainKey(t, ctx, m.DB, q, args...); key != "idx_created" {
			t.Errorf("%s page reads offline_msg by %q, want idx_created", name, key)
		}
	}
}

// insertInbox writes offline_msg rows (and, where asked, their bodies).
func insertInbox[R any](t *testing.T, ctx context.Context, db *sql.DB, rows []R, of func(R) (uid, seq uint64, at time.Time, content bool)) {
	t.Helper()
	for start := 0; start < len(rows); start += 500 {
		end := min(start+500, len(rows))
		var inbox, bodies []string
		var ia, ba []any
		for i, r := range rows[start:end] {
			uid, seq, at, content := of(r)
			msgID := uint64(1_000_000 + start + i)
			inbox = append(inbox, "(?,?,?,?,1,1,?)")
			ia = append(ia, uid, seq, msgID, uid, at)
			if content {
				bodies = append(bodies, "(?,?,1,?,1,?,'x',?)")
				ba = append(ba, msgID, uid, seq, fmt.Sprintf("c-%d", msgID), at)
			}
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES "+strings.Join(inbox, ","), ia...); err != nil {
			t.Fatal(err)
		}
		if len(bodies) > 0 {
			if _, err := db.ExecContext(ctx, "INSERT INTO msg_content (msg_id, conv_id, conv_type, conv_seq, sender_uid, client_msg_id, content, created_at) VALUES "+strings.Join(bodies, ","), ba...); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// explainKey is the key MySQL's plan reads offline_msg (alias o) by.
func explainKey(t *testing.T, ctx context.Context, db *sql.DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.QueryContext(ctx, "EXPLAIN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var table, key string
		for i, c := range cols {
			switch c {
			case "table":
				table = vals[i].String
			case "key":
				key = vals[i].String
			}
		}
		if table == "o" {
			return key
		}
	}
	return ""
}
