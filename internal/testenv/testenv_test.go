package testenv

import (
	"context"
	"testing"
)

func TestMySQLAndRedisIsolation(t *testing.T) {
	m := NewMySQL(t)
	var n int
	if err := m.DB.QueryRow("SELECT COUNT(*) FROM offline_msg").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("fresh database has %d inbox rows", n)
	}
	r := NewRedis(t)
	ctx := context.Background()
	if err := r.Client.Set(ctx, r.Keys.SeqCounter(1), 5, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Wipe(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Client.Exists(ctx, r.Keys.SeqCounter(1)).Result(); v != 0 {
		t.Fatal("wipe left the key")
	}
}
