package fanout

import (
	"context"
	"database/sql"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/internal/budget"
	"imlab/internal/testenv"
	"imlab/ref/hotcache"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/send"
	"imlab/ref/seqalloc"
)

// BenchmarkFanout measures inbox rows/s through the inbox tier (consumer
// loops, fenced idempotent inbox writes, uk_uid_msg dedup) for 1:1
// messages and for 500-member groups, draining a backlog of the events
// the store and outbox policies publish (StoredEvent: msg_content
// committed, the body carried) published before the consumer starts, and
// beside it, in the same run, the raw reference:
// a plain kfake group consumer plus batched INSERTs of the same inbox rows
// (the same recipients, a seq per recipient) with no fence and no dedup.
//
// 1to1+hotcache is 1:1 with the server's hot-ZSet hook after each COMMIT
// (one Redis pipeline per transaction: a SET per message, an append script
// per recipient), to show what the hooks cost the drain.
//
// b.N counts inbox rows: 1:1 is b.N/2 messages over 256 conversations,
// groups are b.N/500 messages over 4 groups of 500. Use
// -benchtime=200000x: with 20,000 rows each side drained in well under a
// second, 1-2 batches per partition, so the first fetch and the start of
// every partition loop weighed as much as the steady state.
//
// Like for like: both sides are timed from the first record their
// consumer received to their last row committed, so neither figure holds
// the group join, the topic metadata or the first fetch (reported apart as
// join_ms and raw_join_ms, from client start to first record). The end is
// counted by the handler (deliveries handled) rather than polled with
// COUNT(*), which loaded the server during the pipeline's run only; the
// row count is checked after. The reference starts benchSettle after the
// tier ended: without the pause it ran at 154-193k rows/s after the faster
// tier against 218-233k after the slower one (quiet machine, RESULTS.md). Both sides use a counting pool with the same
// connection limits: rt/batch and stmts/row are exact counters (MySQL
// round trips per committed inbox transaction, statements per inbox row),
// redis-rt/batch the seq allocator's round trips.
func BenchmarkFanout(b *testing.B) {
	for _, tc := range []struct {
		name    string
		members int
		hot     bool // the server's first commit hook (the hot ZSet) runs after each COMMIT
	}{{"1to1", 2, false}, {"group500", 500, false}, {"1to1+hotcache", 2, true}} {
		b.Run(tc.name, func(b *testing.B) {
			b.StopTimer()
			f := newBenchFixture(b)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			var convs []uint64
			if tc.members == 2 {
				for i := uint64(1); i <= 256; i++ {
					id, _ := model.SingleConvID(i, i+1000)
					convs = append(convs, id)
				}
			} else {
				for g := uint64(1); g <= 4; g++ {
					var ms []uint64
					for u := uint64(1); u <= 500; u++ {
						ms = append(ms, (g-1)*500+u)
					}
					f.groups[g] = ms
					convs = append(convs, g)
				}
			}
			n := max(b.N/tc.members, len(convs))
			per := (n + len(convs) - 1) / len(convs)
			msgs := f.storeAndPublishB(b, ctx, convs, per)
			rows := len(msgs) * tc.members

			db, counted := benchPool(b, f.my.DSN)
			rc := budget.CountRedis(f.rd.Client)
			var hooks []send.CommitHook
			if tc.hot {
				hc, err := hotcache.New(f.rd.Client, f.rd.Keys, hotcache.DefaultConfig(), nil)
				if err != nil {
					b.Fatal(err)
				}
				hooks = append(hooks, hc)
			}
			s := f.sinkOn(b, db, DedupUK, hooks...)
			h := &benchHandler{h: s, want: int64(len(msgs)), done: make(chan struct{})}
			cfg := testConsumerConfig(f.brokers, f.tp)
			s0, r0 := counted.Snapshot(), rc.Snapshot()
			start := time.Now()
			b.StartTimer()
			stop := runConsumer(b, cfg, h, f.prod)
			select {
			case <-h.done:
			case <-ctx.Done():
				b.Fatal(ctx.Err())
			}
			b.StopTimer()
			first, last := h.span()
			pipe := last.Sub(first)
			stop()
			d, rd := counted.Snapshot().Sub(s0), rc.Snapshot()
			if got := countRows(b, f.my.DB, "SELECT COUNT(*) FROM offline_msg"); got != rows {
				b.Fatalf("%d inbox rows, want %d", got, rows)
			}

			// The reference runs after the tier on the same server: let
			// InnoDB flush and purge the tier's writes first, or a tier that
			// finished sooner would leave the reference more of that work.
			time.Sleep(benchSettle)
			raw, rawJoin := rawBaseline(b, ctx, f, msgs, tc.members)
			b.ReportMetric(float64(rows)/pipe.Seconds(), "rows/s")
			b.ReportMetric(float64(rows)/raw.Seconds(), "raw_rows/s")
			b.ReportMetric(raw.Seconds()/pipe.Seconds(), "ratio")
			b.ReportMetric(float64(first.Sub(start).Milliseconds()), "join_ms")
			b.ReportMetric(float64(rawJoin.Milliseconds()), "raw_join_ms")
			if d.Commits > 0 {
				b.ReportMetric(float64(d.RoundTrips())/float64(d.Commits), "rt/batch")
				b.ReportMetric(float64(rows)/float64(d.Commits), "rows/batch")
				b.ReportMetric(float64(rd.Pipelines-r0.Pipelines)/float64(d.Commits), "redis-rt/batch")
			}
			b.ReportMetric(float64(d.Statements())/float64(rows), "stmts/row")
			b.Logf("%d rows in %d transactions; statements per transaction:\n%s", rows, d.Commits, d.Table(d.Commits))
		})
	}
}

// benchSettle is the pause between the tier's run and the reference's.
const benchSettle = 3 * time.Second

// benchHandler times a handler from its first call to the call that
// completed the wanted number of deliveries.
type benchHandler struct {
	h       Handler
	want    int64
	handled atomic.Int64
	first   atomic.Int64 // unix ns of the first call
	mu      sync.Mutex
	last    time.Time
	done    chan struct{}
}

func (t *benchHandler) Handle(ctx context.Context, ds []Delivery) error {
	t.first.CompareAndSwap(0, time.Now().UnixNano())
	if err := t.h.Handle(ctx, ds); err != nil {
		return err
	}
	if t.handled.Add(int64(len(ds))) >= t.want {
		t.mu.Lock()
		if t.last.IsZero() {
			t.last = time.Now()
			close(t.done)
		}
		t.mu.Unlock()
	}
	return nil
}

func (t *benchHandler) span() (first, last time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Unix(0, t.first.Load()), t.last
}

// benchPool opens a counted pool on dsn with the test pools' limits.
func benchPool(b *testing.B, dsn string) (*sql.DB, *budget.SQL) {
	b.Helper()
	db, counted, err := budget.OpenMySQL(dsn)
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	b.Cleanup(func() { db.Close() })
	return db, counted
}

// sinkOn is fixture.sink on another pool.
func (f *fixture) sinkOn(t testing.TB, db *sql.DB, strategy string, hooks ...send.CommitHook) *InboxSink {
	t.Helper()
	st, err := NewStrategy(strategy, StrategyDeps{Redis: f.rd.Client, Keys: f.rd.Keys})
	if err != nil {
		t.Fatal(err)
	}
	icfg := inbox.DefaultConfig()
	icfg.Dedup = st
	w, err := inbox.NewWriter(seqalloc.NewRedis(f.rd.Client, f.rd.Keys), icfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewInboxSink(DefaultInboxSinkConfig(), db, w, st, f.members, nil, hooks...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newBenchFixture(b *testing.B) *fixture {
	b.Helper()
	c := newCluster(b)
	f := &fixture{brokers: c.ListenAddrs(), tp: testTopics(), my: testenv.NewMySQL(b), rd: testenv.NewRedis(b),
		groups: map[uint64][]uint64{}}
	ensureTopics(b, f.brokers, f.tp)
	f.prod = testProducer(b, f.brokers)
	return f
}

func (f *fixture) storeAndPublishB(b *testing.B, ctx context.Context, convs []uint64, per int) []model.Message {
	b.Helper()
	ms := f.messages(b, convs, 0, per, 1<<40, "bench message")
	if err := StoreMessages(ctx, f.my.DB, ms); err != nil {
		b.Fatal(err)
	}
	recs := make([]*kgo.Record, 0, len(ms))
	for _, m := range ms {
		recs = append(recs, eventRecord(b, f.tp.Fanout, StoredEvent(m)))
	}
	for start := 0; start < len(recs); start += 10_000 {
		if err := f.prod.PublishSync(ctx, recs[start:min(start+10_000, len(recs))]); err != nil {
			b.Fatal(err)
		}
	}
	return ms
}

// rawBaseline consumes the same topic with a bare group consumer and
// inserts the same inbox rows (each message's recipients, a per-recipient
// seq) into a copy of offline_msg in rawChunk-row INSERT IGNORE
// statements (autocommit), 4 writers: no body read back, no fence, no
// dedup, no transaction. It returns the time from
// the first record received to the last row committed, and the time from
// the client's start to that first record.
// rawChunk is the reference's rows per INSERT: the inbox tier's
// largest transaction (DefaultInboxSinkConfig().MaxRowsPerTx).
const rawChunk = 4096

func rawBaseline(b *testing.B, ctx context.Context, f *fixture, msgs []model.Message, members int) (time.Duration, time.Duration) {
	b.Helper()
	db, _ := benchPool(b, f.my.DSN)
	if _, err := db.ExecContext(ctx, "CREATE TABLE raw_msg LIKE offline_msg"); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.ConsumerGroup(testenv.RandomName("raw_")),
		kgo.ConsumeTopics(f.tp.Fanout), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	// Statements are built as text with strconv, as the inbox writer
	// builds its own (client-side interpolation of `?` arguments cost the
	// reference more Go CPU than the tier it is the ceiling of), with
	// rawChunk rows each: the tier's largest transaction.
	work := make(chan []byte, 8)
	done := make(chan error, 4)
	for w := 0; w < 4; w++ {
		go func() {
			for q := range work {
				if _, err := db.ExecContext(ctx, string(q)); err != nil {
					done <- err
					for range work { // let the reader finish
					}
					return
				}
			}
			done <- nil
		}()
	}
	const head = "INSERT IGNORE INTO raw_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES "
	rows := len(msgs) * members
	written, seen, inChunk := 0, 0, 0
	var first time.Time
	seq := map[uint64]uint64{}
	var q []byte
	for seen < len(msgs) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatal(ctx.Err())
		}
		if first.IsZero() && fs.NumRecords() > 0 {
			first = time.Now()
		}
		fs.EachRecord(func(r *kgo.Record) {
			ev, err := UnmarshalEvent(r.Value)
			if err != nil {
				return
			}
			seen++
			t, a, _, _ := model.ParseConvID(ev.ConvID)
			var ms []uint64
			if t == model.ConvGroup {
				ms = f.groups[a]
			}
			rcpts, err := Recipients(ev.ConvID, ms)
			if err != nil {
				return
			}
			at := ev.SentAt.UTC().Format("2006-01-02 15:04:05.000")
			for _, uid := range rcpts {
				seq[uid]++
				if inChunk == 0 {
					q = append(make([]byte, 0, len(head)+rawChunk*96), head...)
				} else {
					q = append(q, ',')
				}
				q = append(q, '(')
				for _, v := range [...]uint64{uid, seq[uid], ev.MsgID, ev.ConvID, uint64(t), ev.SenderUID} {
					q = strconv.AppendUint(q, v, 10)
					q = append(q, ',')
				}
				q = append(q, '\'')
				q = append(q, at...)
				q = append(q, "')"...)
				written++
				if inChunk++; inChunk == rawChunk {
					work <- q
					q, inChunk = nil, 0
				}
			}
		})
	}
	if inChunk > 0 {
		work <- q
	}
	close(work)
	for w := 0; w < 4; w++ {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(first)
	if written != rows {
		b.Fatalf("raw: %d rows for %d wanted", written, rows)
	}
	if got := countRows(b, db, "SELECT COUNT(*) FROM raw_msg"); got != rows {
		b.Fatalf("raw: %d rows in raw_msg, want %d", got, rows)
	}
	return elapsed, first.Sub(start)
}
