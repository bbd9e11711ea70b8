package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"imlab/internal/testenv"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/seqalloc"
)

func newWriter(t *testing.T, a seqalloc.Allocator, reg prometheus.Registerer) *inbox.Writer {
	t.Helper()
	w, err := inbox.NewWriter(a, inbox.DefaultConfig(), reg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func item(uid, msgID uint64) inbox.Item {
	return inbox.Item{UID: uid, MsgID: msgID, ConvID: 1000 + msgID%7, ConvType: model.ConvGroup, ConvSeq: msgID,
		SenderUID: 1, CreatedAt: time.Now().UTC().Truncate(time.Millisecond), Content: fmt.Sprint("m", msgID)}
}

// ledger collects every entry a writer returned, to check the chain.
type ledger struct {
	mu      sync.Mutex
	entries []model.InboxEntry
}

func (l *ledger) add(es []model.InboxEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, es...)
}

// check verifies, for every uid: the table holds exactly the expected
// msg_ids, each once; returned entries match rows; seqs are unique and the
// PrevSeq chain links each entry to the one committed just before it (so
// seqs strictly increased in commit order); the fence equals the top seq.
func (l *ledger) check(t *testing.T, db *sql.DB, want map[uint64]map[uint64]bool) {
	t.Helper()
	byUID := map[uint64][]model.InboxEntry{}
	for _, e := range l.entries {
		byUID[e.UID] = append(byUID[e.UID], e)
	}
	for uid, msgs := range want {
		rows, err := db.Query(`SELECT seq, msg_id FROM offline_msg WHERE uid = ? ORDER BY seq`, uid)
		if err != nil {
			t.Fatal(err)
		}
		got := map[uint64]uint64{} // msg_id -> seq
		for rows.Next() {
			var seq, id uint64
			if err := rows.Scan(&seq, &id); err != nil {
				t.Fatal(err)
			}
			if _, dup := got[id]; dup {
				t.Errorf("uid %d: msg %d stored twice", uid, id)
			}
			got[id] = seq
		}
		rows.Close()
		if len(got) != len(msgs) {
			t.Errorf("uid %d: %d rows, want %d", uid, len(got), len(msgs))
		}
		for id := range msgs {
			if _, ok := got[id]; !ok {
				t.Errorf("uid %d: msg %d missing", uid, id)
			}
		}
		es := byUID[uid]
		if len(es) != len(msgs) {
			t.Errorf("uid %d: %d entries returned, want %d (each new row returned exactly once)", uid, len(es), len(msgs))
		}
		sort.Slice(es, func(i, j int) bool { return es[i].Seq < es[j].Seq })
		for i, e := range es {
			if got[e.MsgID] != e.Seq {
				t.Errorf("uid %d msg %d: returned seq %d, stored %d", uid, e.MsgID, e.Seq, got[e.MsgID])
			}
			if i == 0 {
				continue
			}
			if e.Seq == es[i-1].Seq {
				t.Errorf("uid %d: seq %d used twice", uid, e.Seq)
			}
			if e.PrevSeq != es[i-1].Seq {
				t.Errorf("uid %d: entry seq %d has PrevSeq %d, want %d (commit order broken)", uid, e.Seq, e.PrevSeq, es[i-1].Seq)
			}
		}
		var fence uint64
		if err := db.QueryRow(`SELECT max_seq FROM seq_fence WHERE uid = ?`, uid).Scan(&fence); err != nil {
			t.Fatal(err)
		}
		if len(es) > 0 && fence != es[len(es)-1].Seq {
			t.Errorf("uid %d: fence %d, top seq %d", uid, fence, es[len(es)-1].Seq)
		}
	}
}

func TestWriteChainAndIdempotent(t *testing.T) {
	m := testenv.NewMySQL(t)
	r := testenv.NewRedis(t)
	ctx := context.Background()
	w := newWriter(t, seqalloc.NewRedis(r.Client, r.Keys), nil)

	items := []inbox.Item{item(3, 10), item(2, 10), item(3, 11), item(3, 12), item(2, 12), item(3, 10)}
	es, err := w.Write(ctx, m.DB, items)
	if err != nil {
		t.Fatal(err)
	}
	// 5 distinct (uid,msg) pairs; grouped by uid ascending, seq order inside.
	want := []struct{ uid, msg, seq, prev uint64 }{{2, 10, 1, 0}, {2, 12, 2, 1}, {3, 10, 1, 0}, {3, 11, 2, 1}, {3, 12, 3, 2}}
	if len(es) != len(want) {
		t.Fatalf("got %d entries, want %d: %+v", len(es), len(want), es)
	}
	for i, x := range want {
		e := es[i]
		if e.UID != x.uid || e.MsgID != x.msg || e.Seq != x.seq || e.PrevSeq != x.prev {
			t.Fatalf("entry %d = uid %d msg %d seq %d prev %d; want %+v", i, e.UID, e.MsgID, e.Seq, e.PrevSeq, x)
		}
		if e.Content == "" || e.ConvID == 0 {
			t.Fatalf("entry %d lost its fields: %+v", i, e)
		}
	}
	// Same items again: nothing new, nothing returned.
	again, err := w.Write(ctx, m.DB, items)
	if err != nil || len(again) != 0 {
		t.Fatalf("rewrite returned %d entries, %v; want none", len(again), err)
	}
	// Mixed: one old, one new -> only the new one, chained.
	es, err = w.Write(ctx, m.DB, []inbox.Item{item(3, 11), item(3, 13)})
	if err != nil || len(es) != 1 || es[0].MsgID != 13 || es[0].Seq != 4 || es[0].PrevSeq != 3 {
		t.Fatalf("mixed rewrite = %+v, %v", es, err)
	}
	// Bad input changes nothing.
	if _, err := w.Write(ctx, m.DB, []inbox.Item{item(0, 1)}); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("uid 0: %v, want ErrInvalid", err)
	}
}

// streamer writes message after message to a fixed uid set.
type streamer struct {
	w    *inbox.Writer
	db   *sql.DB
	uids []uint64
	next *atomic.Uint64
	led  *ledger
	mu   sync.Mutex
	want map[uint64]map[uint64]bool
	// guarded writes as the strict send path does (guardedWrite) instead
	// of Writer.Write.
	guarded bool
}

// newStreamer is a streamer of uids on db with a ledger of its own, writing
// guarded or through Writer.Write.
func newStreamer(db *sql.DB, uids []uint64, guarded bool) *streamer {
	s := &streamer{db: db, uids: uids, next: new(atomic.Uint64), led: &ledger{}, want: map[uint64]map[uint64]bool{}, guarded: guarded}
	for _, u := range uids {
		s.want[u] = map[uint64]bool{}
	}
	return s
}

// check fails t unless the ledger's entries are what s.db holds for every
// uid written, and w raised a stale fence at least minStale times.
func (s *streamer) check(t *testing.T, w *inbox.Writer, minStale float64) {
	t.Helper()
	s.led.check(t, s.db, s.want)
	if got := counterValue(t, w.FenceRaised("stale")); got < minStale {
		t.Fatalf("fence raised for a stale seq %v times, want >= %v", got, minStale)
	}
}

func (s *streamer) run(t *testing.T, w *inbox.Writer, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		id := s.next.Add(1)
		var items []inbox.Item
		for _, u := range s.uids {
			items = append(items, item(u, id))
		}
		write := w.Write
		if s.guarded {
			write = func(ctx context.Context, db *sql.DB, items []inbox.Item) ([]model.InboxEntry, error) {
				return guardedWrite(ctx, w, db, items)
			}
		}
		es, err := write(ctx, s.db, items)
		if err != nil {
			t.Errorf("write msg %d: %v", id, err)
			return
		}
		s.led.add(es)
		s.mu.Lock()
		for _, u := range s.uids {
			s.want[u][id] = true
		}
		s.mu.Unlock()
	}
}

func TestRedisCounterSetBack(t *testing.T) { bothWrites(t, testRedisCounterSetBack) }

func testRedisCounterSetBack(t *testing.T, guarded bool) {
	m := testenv.NewMySQL(t)
	r := testenv.NewRedis(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	w := newWriter(t, seqalloc.NewRedis(r.Client, r.Keys), reg)
	s := newStreamer(m.DB, []uint64{11, 12}, guarded)
	// A counter with history: the stream starts at seq 1001.
	for _, u := range s.uids {
		if err := r.Client.Set(ctx, r.Keys.SeqCounter(u), 1000, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s.run(t, w, 100)
	// Failover to a replica 1000 increments behind.
	for _, u := range s.uids {
		if err := r.Client.DecrBy(ctx, r.Keys.SeqCounter(u), 1000).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s.run(t, w, 50)
	s.check(t, w, 2)
}

func TestRedisWipedMidStream(t *testing.T) { bothWrites(t, testRedisWipedMidStream) }

func testRedisWipedMidStream(t *testing.T, guarded bool) {
	m := testenv.NewMySQL(t)
	r := testenv.NewRedis(t)
	ctx := context.Background()
	w := newWriter(t, seqalloc.NewRedis(r.Client, r.Keys), nil)
	s := newStreamer(m.DB, []uint64{21, 22, 23}, guarded)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.run(t, w, 300) }()
	for i := 0; i < 5; i++ {
		time.Sleep(20 * time.Millisecond)
		if err := r.Wipe(ctx); err != nil { // this test's FLUSHALL
			t.Error(err)
		}
	}
	wg.Wait()
	if err := r.Wipe(ctx); err != nil {
		t.Fatal(err)
	}
	s.run(t, w, 10)
	s.check(t, w, 3)
}

func TestSegmentRestartAndRestoredTable(t *testing.T) {
	bothWrites(t, testSegmentRestartAndRestoredTable)
}

func testSegmentRestartAndRestoredTable(t *testing.T, guarded bool) {
	m := testenv.NewMySQL(t)
	ctx := context.Background()
	s := newStreamer(m.DB, []uint64{31, 32}, guarded)
	cfg := seqalloc.SegmentConfig{Size: 1000, MaxUIDs: 1000}
	s.run(t, newWriter(t, seqalloc.NewSegment(m.DB, cfg), nil), 20)
	// Restart: the rest of the segment is wasted (a hole), never reused.
	s.run(t, newWriter(t, seqalloc.NewSegment(m.DB, cfg), nil), 20)
	var top uint64
	if err := m.DB.QueryRow(`SELECT MAX(seq) FROM offline_msg WHERE uid = 31`).Scan(&top); err != nil || top != 1020 {
		t.Fatalf("after restart top seq = %d, %v; want 1020 (second segment)", top, err)
	}
	// The segment table restored from an old backup: reservations restart at 1.
	if _, err := m.DB.ExecContext(ctx, `DELETE FROM seq_segment`); err != nil {
		t.Fatal(err)
	}
	w3 := newWriter(t, seqalloc.NewSegment(m.DB, cfg), nil)
	s.run(t, w3, 20)
	s.check(t, w3, 2)
}

// Two allocators of different kinds write the same uids concurrently.
func TestTwoAllocatorsRacing(t *testing.T) { bothWrites(t, testTwoAllocatorsRacing) }

func testTwoAllocatorsRacing(t *testing.T, guarded bool) {
	m := testenv.NewMySQL(t)
	r := testenv.NewRedis(t)
	s := newStreamer(m.DB, []uint64{41, 42}, guarded)
	writers := []*inbox.Writer{
		newWriter(t, seqalloc.NewRedis(r.Client, r.Keys), nil),
		newWriter(t, seqalloc.NewSegment(m.DB, seqalloc.SegmentConfig{Size: 1000, MaxUIDs: 100}), nil),
		newWriter(t, seqalloc.NewRedis(r.Client, r.Keys), nil),
		newWriter(t, seqalloc.NewSegment(m.DB, seqalloc.SegmentConfig{Size: 1000, MaxUIDs: 100}), nil),
	}
	var wg sync.WaitGroup
	for _, w := range writers {
		wg.Add(1)
		go func(w *inbox.Writer) { defer wg.Done(); s.run(t, w, 80) }(w)
	}
	wg.Wait()
	s.led.check(t, s.db, s.want)
	var raised float64
	for _, w := range writers {
		raised += counterValue(t, w.FenceRaised("stale"))
	}
	if raised == 0 {
		t.Fatal("two allocator kinds raced without a single fence raise")
	}
}

func TestPrimaryKeyCollision(t *testing.T) { bothWrites(t, testPrimaryKeyCollision) }

func testPrimaryKeyCollision(t *testing.T, guarded bool) {
	m := testenv.NewMySQL(t)
	r := testenv.NewRedis(t)
	ctx := context.Background()
	w := newWriter(t, seqalloc.NewRedis(r.Client, r.Keys), nil)
	s := newStreamer(m.DB, []uint64{51, 52}, guarded)
	s.run(t, w, 30)
	// A restore set the fence and the counter behind the rows in the table.
	if _, err := m.DB.ExecContext(ctx, `UPDATE seq_fence SET max_seq = 5`); err != nil {
		t.Fatal(err)
	}
	for _, u := range s.uids {
		if err := r.Client.Set(ctx, r.Keys.SeqCounter(u), 5, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	before := len(s.led.entries)
	s.run(t, w, 10)
	if got := counterValue(t, w.FenceRaised("pk_collision")); got < 2 {
		t.Fatalf("pk_collision raises = %v, want >= 2", got)
	}
	// The first entry after the restore chains to the real top (30).
	for _, e := range s.led.entries[before:] {
		if e.Seq <= 30 {
			t.Fatalf("seq %d reused after restore", e.Seq)
		}
	}
	s.led.check(t, s.db, s.want)
}

// noDedup lets the INSERT meet the uk_uid_msg collision itself.
type noDedup struct{}

func (noDedup) Name() string { return "none" }
func (noDedup) Fresh(_ context.Context, _ *sql.Tx, items []inbox.Item) ([]inbox.Item, error) {
	return items, nil
}

func TestUKUidMsgCollisionIsIdempotent(t *testing.T) {
	m := testenv.NewMySQL(t)
	r := testenv.NewRedis(t)
	ctx := context.Background()
	cfg := inbox.DefaultConfig()
	cfg.Dedup = noDedup{}
	w, err := inbox.NewWriter(seqalloc.NewRedis(r.Client, r.Keys), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(ctx, m.DB, []inbox.Item{item(61, 1), item(62, 1)}); err != nil {
		t.Fatal(err)
	}
	es, err := w.Write(ctx, m.DB, []inbox.Item{item(61, 1), item(61, 2), item(62, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].UID != 61 || es[0].MsgID != 2 || es[0].PrevSeq != 1 {
		t.Fatalf("entries = %+v; want only uid 61 msg 2 chained to seq 1", es)
	}
	var n int
	if err := m.DB.QueryRow(`SELECT COUNT(*) FROM offline_msg`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("rows = %d, %v; want 3", n, err)
	}
	// The fresh-items path (send) also treats it as a duplicate.
	tx, err := m.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	es, err = w.WriteFreshTx(ctx, tx, []inbox.Item{item(62, 1)})
	if err != nil || len(es) != 0 {
		t.Fatalf("WriteFreshTx of an existing pair = %+v, %v", es, err)
	}
}

func TestDupKeyParsing(t *testing.T) {
	cases := map[string]string{
		"Duplicate entry '1-5' for key 'PRIMARY'":                           "PRIMARY",
		"Duplicate entry '1-5' for key 'offline_msg.PRIMARY'":               "PRIMARY",
		"Duplicate entry '7-9' for key 'offline_msg.uk_uid_msg'":            "uk_uid_msg",
		"Duplicate entry '7-c-1' for key 'uk_sender_client'":                "uk_sender_client",
		"Duplicate entry '7-for key 'x'' for key 'msg_content.uk_conv_seq'": "uk_conv_seq",
	}
	for msg, want := range cases {
		got, ok := inbox.DupKey(fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: 1062, Message: msg}))
		if !ok || got != want {
			t.Errorf("DupKey(%q) = %q, %v; want %q", msg, got, ok, want)
		}
	}
	if _, ok := inbox.DupKey(&mysql.MySQLError{Number: 1213, Message: "Deadlock"}); ok {
		t.Error("1213 taken for a duplicate")
	}
	if !inbox.Retryable(&mysql.MySQLError{Number: 1213}) || !inbox.Retryable(&mysql.MySQLError{Number: 1205}) {
		t.Error("deadlock / lock wait not retryable")
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// A lock wait timeout (1205) on the fence row is retried by Write.
func TestWriteRetriesLockWaitTimeout(t *testing.T) {
	m := testenv.NewMySQL(t)
	r := testenv.NewRedis(t)
	ctx := context.Background()
	w := newWriter(t, seqalloc.NewRedis(r.Client, r.Keys), nil)
	if _, err := w.Write(ctx, m.DB, []inbox.Item{item(81, 1)}); err != nil {
		t.Fatal(err)
	}
	short := m.ShortLockWait(t)
	released := m.HoldRowLock(t, `SELECT max_seq FROM seq_fence WHERE uid = 81 FOR UPDATE`, 1500*time.Millisecond)
	start := time.Now()
	es, err := w.Write(ctx, short, []inbox.Item{item(81, 2)})
	<-released
	if err != nil {
		t.Fatalf("write behind a held fence row: %v", err)
	}
	if el := time.Since(start); el < time.Second {
		t.Fatalf("write finished in %s: it never waited on the lock", el)
	}
	if len(es) != 1 || es[0].Seq != 2 || es[0].PrevSeq != 1 {
		t.Fatalf("entries %+v", es)
	}
}

// TestFenceRaisedByEachDifference: uids with different numbers of new
// items in one write (differences 1..n between the locked fence and the new
// top, beyond the UPDATE's grouping bound too) all end with the fence at
// their top seq, on fresh and on existing fence rows.
func TestFenceRaisedByEachDifference(t *testing.T) {
	db := testenv.NewMySQL(t).DB
	rd := testenv.NewRedis(t)
	w := newWriter(t, seqalloc.NewRedis(rd.Client, rd.Keys), nil)
	led := &ledger{}
	want := map[uint64]map[uint64]bool{}
	next := uint64(1)
	for _, uids := range []int{3, 40} { // 3 differences; 40 (past the bound)
		for round := 0; round < 2; round++ { // fence rows created, then existing
			var items []inbox.Item
			for u := 1; u <= uids; u++ {
				uid := uint64(100*uids + u)
				if want[uid] == nil {
					want[uid] = map[uint64]bool{}
				}
				for k := 0; k < u; k++ {
					items = append(items, item(uid, next))
					want[uid][next] = true
					next++
				}
			}
			es, err := w.Write(context.Background(), db, items)
			if err != nil {
				t.Fatal(err)
			}
			led.add(es)
		}
	}
	led.check(t, db, want)
}

func TestPrimaryHint(t *testing.T) {
	var h inbox.PrimaryHint
	if h.Text() != " FORCE INDEX (PRIMARY)" {
		t.Fatalf("zero hint %q", h.Text())
	}
	if h.Refused(&mysql.MySQLError{Number: 1213, Message: "Deadlock found"}) || h.Refused(errors.New("syntax error")) {
		t.Fatal("a deadlock or a non-MySQL error turned the hint off")
	}
	if h.Text() == "" {
		t.Fatal("hint off after errors that were not parse errors")
	}
	// go-mysql-server's answer to an index hint in UPDATE.
	if !h.Refused(&mysql.MySQLError{Number: 1105, Message: "syntax error at position 38 near 'PRIMARY'"}) || h.Text() != "" {
		t.Fatalf("embedded engine's parse error: hint %q", h.Text())
	}
	if h.Refused(&mysql.MySQLError{Number: 1064, Message: "You have an error in your SQL syntax"}) {
		t.Fatal("refused twice: the caller would loop")
	}
	var nilHint *inbox.PrimaryHint
	if nilHint.Text() == "" || nilHint.Refused(&mysql.MySQLError{Number: 1064}) {
		t.Fatal("a nil hint must carry the hint and never turn off")
	}
}
