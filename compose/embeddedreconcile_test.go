package compose

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/reconcile"
	"imlab/ref/rkeys"
	"imlab/ref/seqalloc"
)

// TestEmbeddedReconcileTimer: the reconciler's timer runs on the embedded
// MySQL as on MariaDB: the first run covers the window, the next one the
// rows written since (offline_msg along idx_created_msg, in pages of 3
// that split rows of one millisecond), finding a body missing, a
// recipient's row missing (repaired) and unpulled rows among them, and
// not reading the rows of the first run again.
func TestEmbeddedReconcileTimer(t *testing.T) {
	ctx, be, db := embeddedMigrated(t)
	rc := redis.NewClient(&redis.Options{Addr: be.RedisAddr})
	defer rc.Close()
	T := time.Now().UTC().Truncate(time.Millisecond)
	// 30 messages 20 minutes before the first run; 10 written after it,
	// 5 seconds after it, one without its body, one without a row of its
	// second recipient; and one message whose rows nobody pulled, written
	// after the first run with a created_at 9m40s before it.
	insert := func(id, a, b uint64, at time.Time, body, second bool) {
		t.Helper()
		conv, err := model.SingleConvID(a, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []uint64{a, b} {
			if u == b && !second {
				continue
			}
			if _, err := db.ExecContext(ctx, `INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at)
				VALUES (?, ?, ?, ?, 1, ?, ?)`, u, id, id, conv, a, at); err != nil {
				t.Fatal(err)
			}
		}
		if body {
			if _, err := db.ExecContext(ctx, `INSERT INTO msg_content (msg_id, conv_id, conv_type, conv_seq, sender_uid, client_msg_id, content, created_at)
				VALUES (?, ?, 1, ?, ?, ?, 'x', ?)`, id, conv, id, a, fmt.Sprintf("c-%d", id), at); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range uint64(30) {
		insert(100+i, 10+i%4, 20+i%4, T.Add(-20*time.Minute), true, true)
	}
	w, err := inbox.NewWriter(seqalloc.NewRedis(rc, rkeys.Keys{Prefix: "rt:"}), inbox.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rcfg := reconcile.DefaultConfig()
	rcfg.PageSize = 3
	noGroups := func(context.Context, uint64) ([]uint64, error) { return nil, model.ErrNotFound }
	rec, err := reconcile.New(rcfg, db, w, noGroups, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tm := rec.NewTimer()
	rep, err := tm.Run(ctx, T)
	if err != nil || rep.Timer != reconcile.TimerFull || rep.Forward.Messages != 30 || rep.Reverse.Rows != 60 || rep.Push.Rows != 60 || rep.Push.Recorded != 60 {
		t.Fatalf("first run: %+v, %v", rep, err)
	}
	for i := range uint64(10) {
		insert(200+i, 30+i, 50+i, T.Add(5*time.Second), i != 3, i != 7)
	}
	insert(300, 70, 71, T.Add(-9*time.Minute-40*time.Second), true, true)
	rep, err = tm.Run(ctx, T.Add(time.Minute))
	if err != nil || rep.Timer != reconcile.TimerIncremental || rep.Forward.Messages != 9 || rep.Forward.Repaired != 1 ||
		rep.Reverse.Rows != 20 || rep.Reverse.Missing != 2 || rep.Push.Rows != 2 || rep.Push.Recorded != 2 {
		t.Fatalf("incremental run: %+v, %v", rep, err)
	}
}
