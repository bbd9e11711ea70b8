package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/ref/model"
)

// TestReconcileCmd: a message whose inbox rows were never written (the
// queue lost its event) is repaired by `imlab reconcile`, once: a second
// run over the same range repairs nothing.
func TestReconcileCmd(t *testing.T) {
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	conv, err := model.SingleConvID(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now().UTC().Add(-10 * time.Minute)
	if _, err := my.DB.Exec(`INSERT INTO msg_content (msg_id, conv_id, conv_type, conv_seq, sender_uid, client_msg_id, content, created_at)
		VALUES (?, ?, 1, 1, 1, 'lost-1', 'lost in the queue', ?)`, uint64(1)<<40, conv, created); err != nil {
		t.Fatal(err)
	}
	args := []string{"reconcile", "--mysql-dsn", my.DSN, "--redis-addr", rd.Addr, "--redis-prefix", rd.Keys.Prefix,
		"--since", "-1h", "--until", "now"}
	type report struct {
		Forward struct {
			Messages    int64 `json:"messages"`
			MissingRows int64 `json:"missing_rows"`
			Repaired    int64 `json:"repaired"`
		} `json:"forward"`
	}
	runOnce := func() report {
		out, errOut, err := run(t, context.Background(), args...)
		if err != nil {
			t.Fatalf("reconcile: %v %s", err, errOut)
		}
		var r report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("report %q: %v", out, err)
		}
		return r
	}
	r := runOnce()
	if r.Forward.Messages != 1 || r.Forward.MissingRows != 2 || r.Forward.Repaired != 2 {
		t.Fatalf("first run: %+v", r)
	}
	var rows int
	if err := my.DB.QueryRow("SELECT COUNT(*) FROM offline_msg WHERE msg_id = ?", uint64(1)<<40).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("inbox rows: %d %v", rows, err)
	}
	// The repair went through the server's commit hooks: the hot cache
	// holds the message, as it would after a send.
	if n, err := rd.Client.Exists(context.Background(), rd.Keys.Msg(uint64(1)<<40)).Result(); err != nil || n != 1 {
		t.Fatalf("hot cache: the repaired message is not cached (%d, %v): the repair bypassed the commit hooks", n, err)
	}
	if r := runOnce(); r.Forward.MissingRows != 0 || r.Forward.Repaired != 0 {
		t.Fatalf("second run repaired again: %+v", r)
	}
	if _, _, err := run(t, context.Background(), "reconcile", "--mysql-dsn", my.DSN, "--redis-addr", rd.Addr,
		"--since", "now", "--until", "-1h"); err == nil || !strings.Contains(err.Error(), "--since must be before --until") {
		t.Fatalf("reversed range: %v", err)
	}
}
