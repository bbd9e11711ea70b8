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
		"offline_msg": {"PRIMARY", "uk_uid_msg", "idx_uid_conv"},
		"sync_cursor": {"PRIMARY"},
		"mq_outbox":   {"PRIMARY", "idx_status_id"},
		"mq_dedup":    {"PRIMARY"},
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
