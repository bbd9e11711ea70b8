package reconcile_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/reconcile"
	"imlab/ref/seqalloc"
)

// seedMsg is one 1:1 message of a seeded inbox: its body (unless noBody)
// and an inbox row for each of its two members (unless that one is in
// skip).
type seedMsg struct {
	id, a, b, seq uint64
	at            time.Time
	noBody        bool
	skip          uint64
}

// seed writes msgs in statements of 500 messages.
func seed(t *testing.T, ctx context.Context, db *sql.DB, msgs []seedMsg) {
	t.Helper()
	for start := 0; start < len(msgs); start += 500 {
		var rows, bodies []string
		var ra, ba []any
		for _, m := range msgs[start:min(start+500, len(msgs))] {
			conv, err := model.SingleConvID(m.a, m.b)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range []uint64{m.a, m.b} {
				if u != m.skip {
					rows = append(rows, "(?,?,?,?,1,?,?)")
					ra = append(ra, u, m.seq, m.id, conv, m.a, m.at)
				}
			}
			if !m.noBody {
				bodies = append(bodies, "(?,?,1,?,?,?,'x',?)")
				ba = append(ba, m.id, conv, m.seq, m.a, fmt.Sprintf("c-%d", m.id), m.at)
			}
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES "+strings.Join(rows, ","), ra...); err != nil {
			t.Fatal(err)
		}
		if len(bodies) > 0 {
			if _, err := db.ExecContext(ctx, "INSERT INTO msg_content (msg_id, conv_id, conv_type, conv_seq, sender_uid, client_msg_id, content, created_at) VALUES "+strings.Join(bodies, ","), ba...); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO seq_fence (uid, max_seq, updated_at) SELECT uid, MAX(seq), NOW(3) FROM offline_msg GROUP BY uid
		ON DUPLICATE KEY UPDATE max_seq = VALUES(max_seq)`); err != nil {
		t.Fatal(err)
	}
}

// handlerReads is the session's Handler_read_* sum on db's one connection,
// less what reading it costs (measured once: self).
type handlerReads struct {
	t    *testing.T
	db   *sql.DB
	self int64
}

func (h *handlerReads) read(ctx context.Context) int64 {
	h.t.Helper()
	rows, err := h.db.QueryContext(ctx, "SHOW SESSION STATUS LIKE 'Handler_read%'")
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			h.t.Fatal(err)
		}
		sum += v
	}
	if err := rows.Err(); err != nil {
		h.t.Fatal(err)
	}
	return sum
}

// during returns the row reads of f on the connection.
func (h *handlerReads) during(ctx context.Context, f func()) int64 {
	before := h.read(ctx)
	f()
	return h.read(ctx) - before - h.self
}

// TestTimerRunsReadWhatWasWritten (MariaDB): the reconciler's timer runs
// between full ones read the rows written since the previous run, not the
// table. 20,000 inbox rows written 20 minutes before the first run are
// read by it (a full run) and by no incremental run after it: the
// session's Handler_read_* calls of an incremental run stay near the few
// dozen rows written since, against more than the table for the full run.
// The incremental run still finds what was written since: a body missing,
// a recipient's row missing (repaired), a row no device pulled written
// after the previous run although its created_at is older (a lagging
// inbox tier); an older row whose body or inbox row vanished after the
// first run is found by the next full run, FullInterval later, not before.
func TestTimerRunsReadWhatWasWritten(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	m := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	// The reconciler's pool is one connection: its session counters are
	// the passes' reads.
	db, err := sql.Open("mysql", m.DSN)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	h := &handlerReads{t: t, db: db}
	h.self = h.during(ctx, func() {})

	// A time off created_at's millisecond grid, as time.Now is: the
	// passes must still read ranges of their indexes.
	T := time.Now().UTC().Truncate(time.Millisecond).Add(123_456 * time.Nanosecond)
	const old = 10_000
	var msgs []seedMsg
	for i := range uint64(old) {
		msgs = append(msgs, seedMsg{id: 1_000_000 + i, a: 1000 + i%500, b: 2000 + i%500, seq: 1 + i, at: T.Add(-20 * time.Minute)})
	}
	seed(t, ctx, m.DB, msgs)

	w, err := inbox.NewWriter(seqalloc.NewRedis(rd.Client, rd.Keys), inbox.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	noGroups := func(context.Context, uint64) ([]uint64, error) { return nil, model.ErrNotFound }
	cfg := reconcile.DefaultConfig()
	rec, err := reconcile.New(cfg, db, w, noGroups, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tm := rec.NewTimer()
	run := func(now time.Time) (reconcile.Report, int64) {
		t.Helper()
		var rep reconcile.Report
		var err error
		reads := h.during(ctx, func() { rep, err = tm.Run(ctx, now) })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("run at T%+v (%s): %d row reads; forward %+v reverse rows %d missing %d; push %+v",
			now.Sub(T), rep.Timer, reads, rep.Forward, rep.Reverse.Rows, rep.Reverse.Missing, rep.Push)
		return rep, reads
	}

	// The first run covers the whole window: every seeded row.
	rep, fullReads := run(T)
	if rep.Timer != reconcile.TimerFull || rep.Forward.Messages != old || rep.Forward.MissingRows != 0 ||
		rep.Reverse.Rows != 2*old || rep.Reverse.Missing != 0 || rep.Push.Rows != 2*old || rep.Push.Recorded != 2*old {
		t.Fatalf("first run: %+v", rep)
	}
	if fullReads < 2*old {
		t.Fatalf("the full run read %d rows, fewer than the %d inbox rows it looked at", fullReads, 2*old)
	}

	// Written since: 20 messages, one of them without its body, one
	// without one recipient's row; and a message whose rows no device
	// pulled, written now with a created_at 9m40s before the first run.
	var fresh []seedMsg
	for i := range uint64(20) {
		fresh = append(fresh, seedMsg{id: 2_000_000 + i, a: 5000 + i, b: 6000 + i, seq: 1, at: T.Add(5 * time.Second)})
	}
	fresh[3].noBody = true
	fresh[7].skip = fresh[7].b
	fresh = append(fresh, seedMsg{id: 3_000_000, a: 7000, b: 7001, seq: 1, at: T.Add(-9*time.Minute - 40*time.Second)})
	seed(t, ctx, m.DB, fresh)

	rep, reads := run(T.Add(time.Minute))
	if rep.Timer != reconcile.TimerIncremental || rep.Forward.Messages != 19 || rep.Forward.MissingRows != 1 || rep.Forward.Repaired != 1 ||
		rep.Reverse.Rows != 40 || rep.Reverse.Missing != 2 || rep.Push.Rows != 2 || rep.Push.Unpulled != 2 || rep.Push.Recorded != 2 {
		t.Fatalf("incremental run: %+v; want the 19 messages with a body, 1 row repaired, 40 rows read, 2 without body, and the 2 unpulled rows recorded", rep)
	}
	if reads > 1500 {
		t.Fatalf("the incremental run read %d rows for the 42 written since the previous run (%d in the table)", reads, 2*old+42)
	}

	// An old message loses its body and another one a recipient's row
	// (no tombstone): the incremental runs do not look that far back.
	if _, err := m.DB.ExecContext(ctx, "DELETE FROM msg_content WHERE msg_id = ?", msgs[10].id); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DB.ExecContext(ctx, "DELETE FROM offline_msg WHERE uid = ? AND msg_id = ?", msgs[20].b, msgs[20].id); err != nil {
		t.Fatal(err)
	}
	rep, reads = run(T.Add(2 * time.Minute))
	if rep.Timer != reconcile.TimerIncremental || rep.Forward.Messages != 0 || rep.Reverse.Rows != 0 || rep.Push.Rows != 0 {
		t.Fatalf("second incremental run: %+v; want nothing read: nothing was written since the previous run", rep)
	}
	if reads > 1500 {
		t.Fatalf("the second incremental run read %d rows", reads)
	}
	rep, _ = run(T.Add(cfg.FullInterval))
	if rep.Timer != reconcile.TimerFull || rep.Forward.MissingRows != 1 || rep.Forward.Repaired != 1 ||
		rep.Reverse.Missing != 4 || rep.Reverse.Rows != 2*old+42 {
		t.Fatalf("full run: %+v; want the old row repaired and the old message's body reported", rep)
	}
	var n int
	if err := m.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM offline_msg WHERE uid = ? AND msg_id = ?", msgs[20].b, msgs[20].id).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the vanished row: %d rows (%v)", n, err)
	}
}

// TestTimerRunAgainAfterFailure: a run that failed leaves the timer where
// it was: the next run covers the failed run's range too.
func TestTimerRunAgainAfterFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	w, err := inbox.NewWriter(seqalloc.NewRedis(rd.Client, rd.Keys), inbox.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	noGroups := func(context.Context, uint64) ([]uint64, error) { return nil, model.ErrNotFound }
	rec, err := reconcile.New(reconcile.DefaultConfig(), m.DB, w, noGroups, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tm := rec.NewTimer()
	T := time.Now().UTC().Truncate(time.Millisecond)
	if rep, err := tm.Run(ctx, T); err != nil || rep.Timer != reconcile.TimerFull {
		t.Fatalf("first run: %+v, %v", rep, err)
	}
	seed(t, ctx, m.DB, []seedMsg{{id: 9_000_000, a: 1, b: 2, seq: 1, at: T.Add(10 * time.Second), noBody: true}})
	done, stop := context.WithCancel(ctx)
	stop()
	if _, err := tm.Run(done, T.Add(time.Minute)); err == nil {
		t.Fatal("a run on a cancelled context succeeded")
	}
	// Ten minutes later: the range since the last run that succeeded.
	rep, err := tm.Run(ctx, T.Add(10*time.Minute))
	grace := reconcile.DefaultConfig().Grace
	if err != nil || rep.Timer != reconcile.TimerIncremental || rep.Reverse.Missing != 2 || !rep.Since.Equal(T.Add(-grace-reconcile.DefaultOverlap)) {
		t.Fatalf("after the failed run: %+v, %v; want the range from the last good run's end less the overlap", rep, err)
	}
}

// TestConfigOverlapAndFullInterval: an incremental run must reach back
// (overlap in (0, window]) and a full run comes at most every interval.
func TestConfigOverlapAndFullInterval(t *testing.T) {
	for name, f := range map[string]func(*reconcile.Config){
		"no overlap":             func(c *reconcile.Config) { c.Overlap = 0 },
		"overlap beyond window":  func(c *reconcile.Config) { c.Overlap = c.Window + time.Second },
		"full below interval":    func(c *reconcile.Config) { c.FullInterval = c.Interval - time.Second },
		"full interval negative": func(c *reconcile.Config) { c.FullInterval = -time.Minute },
	} {
		c := reconcile.DefaultConfig()
		f(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := reconcile.DefaultConfig()
	c.FullInterval = c.Interval // every run a full one
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
