package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/ref/model"
)

// TestReconcileOnce: a message whose inbox rows were never written (the
// queue lost its event) is repaired by one pass, through the process's
// commit hooks (the hot cache holds it afterwards, as after a send), and a
// second pass over the same range repairs nothing; a reversed range is
// refused before anything starts.
func TestReconcileOnce(t *testing.T) {
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conv, err := model.SingleConvID(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	id := uint64(1) << 40
	if _, err := my.DB.Exec(`INSERT INTO msg_content (msg_id, conv_id, conv_type, conv_seq, sender_uid, client_msg_id, content, created_at)
		VALUES (?, ?, 1, 1, 1, 'lost-1', 'lost in the queue', ?)`, id, conv, time.Now().UTC().Add(-10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Redis.KeyPrefix = rd.Keys.Prefix
	b := Backends{MySQLDSN: my.DSN, RedisAddr: rd.Addr}
	now := time.Now().UTC()

	rep, err := ReconcileOnce(ctx, cfg, b, now.Add(-time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Forward; f.Messages != 1 || f.MissingRows != 2 || f.Repaired != 2 {
		t.Fatalf("first pass: %+v", f)
	}
	var rows int
	if err := my.DB.QueryRow("SELECT COUNT(*) FROM offline_msg WHERE msg_id = ?", id).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("inbox rows: %d %v", rows, err)
	}
	if n, err := rd.Client.Exists(ctx, rd.Keys.Msg(id)).Result(); err != nil || n != 1 {
		t.Fatalf("hot cache: the repaired message is not cached (%d, %v): the repair bypassed the commit hooks", n, err)
	}
	rep, err = ReconcileOnce(ctx, cfg, b, now.Add(-time.Hour), now)
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Forward; f.MissingRows != 0 || f.Repaired != 0 {
		t.Fatalf("second pass repaired again: %+v", f)
	}
	if _, err := ReconcileOnce(ctx, cfg, Backends{MySQLDSN: "root@tcp(127.0.0.1:1)/nowhere"}, now, now.Add(-time.Hour)); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("reversed range: %v, want ErrInvalid before a connection is tried", err)
	}
}
