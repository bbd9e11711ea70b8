package pull_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/ref/hotcache"
	"imlab/ref/model"
	"imlab/ref/pull"
)

// Many devices mark served and ack concurrently (two services on one
// database, as two processes): every ack within the served mark is stored
// (answers >= the ack, final cursor = highest ack), every ack above it is
// refused and changes nothing, even when it shares a batch with accepted
// ones; and the writes were group-committed (fewer transactions than calls).
func TestCursorWritesGroupCommitted(t *testing.T) {
	e := newEnv(t, func(c *pull.Config, _ *hotcache.Config) { c.CursorShards = 1 })
	other, err := pull.New(e.db, nil, e.svc.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	svcs := []*pull.Service{e.svc, other}
	ctx := context.Background()
	const devices, steps = 40, 24
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for d := 0; d < devices; d++ {
		wg.Add(1)
		go func(d int) {
			defer wg.Done()
			uid, did := uint64(1000+d/2), fmt.Sprint("dev", d%2)
			for i := 1; i <= steps; i++ {
				s := svcs[(d+i)%2]
				seq := uint64(10 * i)
				var got uint64
				var err error
				if i%2 == 0 {
					got, err = s.MarkServedAck(ctx, uid, did, seq)
				} else {
					if err := s.MarkServed(ctx, uid, did, seq); err != nil {
						t.Error(err)
						return
					}
					got, err = s.Ack(ctx, uid, did, seq-5)
					if err == nil && got < seq-5 {
						t.Errorf("ack %d answered %d", seq-5, got)
					}
				}
				if err != nil {
					t.Errorf("uid %d %s step %d: %v", uid, did, i, err)
					return
				}
				if got < seq-5 {
					t.Errorf("answer %d below the ack", got)
				}
				// Beyond the served mark: refused, nothing changes.
				if _, err := s.Ack(ctx, uid, did, seq+1000); !errors.Is(err, model.ErrCursorAhead) {
					t.Errorf("ack beyond served: %v", err)
				}
				mu.Lock()
				refused++
				mu.Unlock()
			}
		}(d)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	rows, err := e.db.Query(`SELECT c.uid, c.device_id, c.pull_seq, s.served_seq FROM sync_cursor c JOIN sync_served s USING (uid, device_id)`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var uid, cur, served uint64
		var did string
		if err := rows.Scan(&uid, &did, &cur, &served); err != nil {
			t.Fatal(err)
		}
		n++
		if cur != 10*steps || served != 10*steps {
			t.Fatalf("uid %d %s: cursor %d served %d, want %d", uid, did, cur, served, 10*steps)
		}
	}
	if n != devices {
		t.Fatalf("%d devices stored, want %d", n, devices)
	}
	if refused != devices*steps {
		t.Fatalf("refused %d", refused)
	}
	// e.svc's writes: devices*steps*3/2 calls on average; batched.
	calls := testenv.Metric(t, e.reg, "imlab_pull_cursor_batch_size", nil)
	ops := testenv.Metric(t, e.reg, "imlab_pull_cursor_ops_total", nil)
	t.Logf("%.0f cursor operations in %.0f transactions", ops, calls)
	if ops < devices*steps || calls >= ops {
		t.Fatalf("%.0f operations in %.0f transactions: not group-committed", ops, calls)
	}
}

// A caller whose context ends while its write is still queued gets an
// error and its write is withdrawn; the shard keeps working.
func TestCursorWriteCancelled(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.svc.MarkServedAck(ctx, 7, "d", 3); err == nil {
		// The caller may have led its own batch before seeing the
		// cancellation: then the write is done and must be visible.
		if cur, err := e.svc.Cursor(context.Background(), 7, "d"); err != nil || cur != 3 {
			t.Fatalf("cursor %d, %v", cur, err)
		}
	}
	if got, err := e.svc.MarkServedAck(context.Background(), 7, "d", 5); err != nil || got != 5 {
		t.Fatalf("after a cancelled call: %d, %v", got, err)
	}
}

// A cursor batch that InnoDB picks as a deadlock victim is rolled back and
// retried, and the caller gets its answer, not "unavailable". The deadlock
// is made by hand: another transaction holds the device's sync_cursor row
// (and is the heavier one, so InnoDB keeps it), the batch takes the
// device's sync_served row and waits for sync_cursor, and then the other
// transaction asks for sync_served.
func TestDeadlockedCursorBatchIsRetried(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	const uid, did = 4242, "d"
	if _, err := e.svc.MarkServedAck(ctx, uid, did, 5); err != nil {
		t.Fatal(err)
	}
	conn, err := e.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// Weight: InnoDB rolls back the transaction that changed fewer rows.
	for i := 0; i < 50; i++ {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sync_served (uid, device_id, served_seq, updated_at) VALUES (?, 'w', 1, NOW(3))`, 900000+i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sync_cursor SET pull_seq = pull_seq WHERE uid = ? AND device_id = ?`, uid, did); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		got uint64
		err error
	}
	done := make(chan answer, 1)
	go func() {
		got, err := e.svc.MarkServedAck(ctx, uid, did, 9)
		done <- answer{got, err}
	}()
	waitForLockWait(t, e.db)
	// Now the batch holds sync_served and waits for sync_cursor: close the cycle.
	if _, err := tx.ExecContext(ctx, `UPDATE sync_served SET updated_at = NOW(3) WHERE uid = ? AND device_id = ?`, uid, did); err != nil {
		t.Fatalf("the heavier transaction was the victim: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.got != 9 {
		t.Fatalf("after a deadlock: answer %d, %v; want 9", a.got, a.err)
	}
	if r := testenv.Metric(t, e.reg, "imlab_pull_cursor_retries_total", nil); r < 1 {
		t.Fatalf("imlab_pull_cursor_retries_total %v: no retry counted", r)
	}
}

// waitForLockWait returns when some transaction of db's server waits for a
// row lock (the batch of the test above), or fails after 10 s. InnoDB
// refreshes innodb_trx only when it was not read for 100 ms: a faster poll
// would read the same stale table forever, and the first read must not see
// the table as an earlier test left it: each read comes after a pause.
func waitForLockWait(t *testing.T, db *sql.DB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(150 * time.Millisecond)
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT' AND trx_mysql_thread_id <> CONNECTION_ID()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("the cursor batch never waited for the held row")
}
