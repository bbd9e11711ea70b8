package schema_test

import (
	"context"
	"strings"
	"testing"

	"imlab/internal/testenv"
	"imlab/ref/schema"
)

func TestStatementsSplitsOnLineEndSemicolons(t *testing.T) {
	got := schema.Statements("-- head\nCREATE TABLE a (x INT COMMENT 'a;b');\n\n-- c\nCREATE TABLE b (y INT)\n;\nSELECT 1")
	if len(got) != 3 || !strings.Contains(got[0], "'a;b'") || !strings.HasPrefix(got[1], "-- c") || got[2] != "SELECT 1" {
		t.Fatalf("%q", got)
	}
}

func TestMigrationsOrderedAndNamed(t *testing.T) {
	migs, err := schema.Migrations()
	if err != nil || len(migs) == 0 || migs[0].Version != "001_core" {
		t.Fatalf("%v %v", migs, err)
	}
	for i := 1; i < len(migs); i++ {
		if migs[i-1].Version >= migs[i].Version {
			t.Fatalf("out of order: %s, %s", migs[i-1].Version, migs[i].Version)
		}
	}
}

// The seed's tables exist with their keys, and Migrate is idempotent.
func TestMigrateIdempotentWithSeedKeys(t *testing.T) {
	m := testenv.NewMySQL(t) // applies every migration once
	ctx := context.Background()
	again, err := schema.Migrate(ctx, m.DB)
	if err != nil || len(again) != 0 {
		t.Fatalf("second migrate applied %v (%v)", again, err)
	}
	want := map[string][]string{
		"offline_msg": {"PRIMARY", "uk_uid_msg", "idx_uid_conv", "idx_created_msg"},
		"sync_cursor": {"PRIMARY"},
		"mq_outbox":   {"PRIMARY", "idx_status_id"},
		"mq_dedup":    {"PRIMARY", "idx_created"},
		"msg_content": {"PRIMARY", "uk_sender_client", "uk_conv_seq"},
		"seq_fence":   {"PRIMARY"},
	}
	for table, keys := range want {
		rows, err := m.DB.QueryContext(ctx, `SELECT DISTINCT index_name FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ?`, table)
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			have[k] = true
		}
		rows.Close()
		for _, k := range keys {
			if !have[k] {
				t.Errorf("%s lacks key %s (has %v)", table, k, have)
			}
		}
	}
}

// TestMigrateConcurrentAddKey: processes migrating one database at once
// (a scenario's api and consumer) all succeed, although MySQL has no ADD
// KEY IF NOT EXISTS: the one that finds the index added takes it as done.
func TestMigrateConcurrentAddKey(t *testing.T) {
	m := testenv.NewMySQL(t)
	ctx := context.Background()
	const version = "008_offline_msg_by_time"
	if _, err := m.DB.ExecContext(ctx, "DELETE FROM schema_migrations WHERE version = ?", version); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := schema.Migrate(ctx, m.DB)
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatalf("a concurrent migrate failed: %v", err)
		}
	}
	var n int
	if err := m.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM schema_migrations WHERE version = ?", version).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%s recorded %d times (%v)", version, n, err)
	}
	// The server still refuses the index twice; Migrate alone takes it as done.
	if _, err := m.DB.ExecContext(ctx, "ALTER TABLE offline_msg ADD KEY idx_created_msg (created_at, msg_id, conv_id)"); err == nil {
		t.Fatal("adding the index twice must be refused by the server")
	}
}
