package budget_test

import (
	"context"
	"testing"

	"imlab/internal/budget"
	"imlab/internal/testenv"
)

func TestKind(t *testing.T) {
	for q, want := range map[string]string{
		"INSERT INTO conv_counter (conv_id, max_seq) VALUES (1,1)":       "INSERT conv_counter",
		"INSERT IGNORE INTO offline_msg (uid) VALUES (1)":                "INSERT offline_msg",
		"SELECT uid, max_seq FROM seq_fence WHERE uid IN (1) FOR UPDATE": "SELECT seq_fence",
		"UPDATE conv_counter SET max_seq = 1":                            "UPDATE conv_counter",
		"SAVEPOINT inbox_insert":                                         "SAVEPOINT",
		"  ":                                                             "?",
	} {
		if got := budget.Kind(q); got != want {
			t.Errorf("Kind(%q) = %q, want %q", q, got, want)
		}
	}
}

// TestCounts: every call through a counted pool is counted once, by kind.
func TestCounts(t *testing.T) {
	m := testenv.NewMySQL(t)
	db, c, err := budget.OpenMySQL(m.DSN, budget.WithHandlerStats())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	s0 := c.Snapshot()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO conv_counter (conv_id, max_seq) VALUES (?, ?)", uint64(1<<63+5), 1); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM conv_counter").Scan(&n); err != nil || n != 1 {
		t.Fatalf("count %d, %v", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	d := c.Snapshot().Sub(s0)
	if d.Begins != 1 || d.Execs != 1 || d.Queries != 1 || d.Commits != 1 || d.RoundTrips() != 4 || d.Statements() != 2 {
		t.Fatalf("counts %+v", d)
	}
	if d.Kinds["INSERT conv_counter"].N != 1 || d.Kinds["SELECT conv_counter"].N != 1 || d.Kinds["COMMIT"].N != 1 {
		t.Fatalf("kinds %+v", d.Kinds)
	}
	// One row written, none updated (the status readings themselves are
	// not counted; a table's first use in a session reads a few keys
	// internally, so reads are not pinned here).
	if d.Handlers["Handler_write"] != 1 || d.Handlers["Handler_update"] != 0 {
		t.Fatalf("handler calls %v", d.Handlers)
	}
}

// TestCPU: this process's CPU is read; the server's pid, when it can be
// found at all, names a readable process.
func TestCPU(t *testing.T) {
	m := testenv.NewMySQL(t)
	pid := budget.ServerPID(context.Background(), m.DB)
	c := budget.ReadCPU(pid)
	if c.Self <= 0 {
		t.Fatalf("own CPU %v", c.Self)
	}
	if pid > 0 && !c.ServerOK {
		t.Fatalf("server pid %d found but not readable", pid)
	}
	t.Logf("server pid %d, cpu %v", pid, c.Server)
}
