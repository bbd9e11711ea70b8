package send_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"imlab/internal/budget"
	"imlab/internal/testenv"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/msgid"
	"imlab/ref/send"
	"imlab/ref/seqalloc"
)

// benchUsers is the user population of the 1:1 benchmarks.
const benchUsers = 100_000

// benchSenders is the number of concurrent senders (b.RunParallel
// goroutines); IMLAB_BENCH_SENDERS overrides it for tuning runs.
const benchSenders = 512

func sendersOf(b *testing.B) int {
	if v := os.Getenv("IMLAB_BENCH_SENDERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("IMLAB_BENCH_SENDERS=%q", v)
		}
		return n
	}
	return benchSenders
}

// BenchmarkSendStrict1to1 measures ACKed strict 1:1 sends per second through
// the group-commit batcher on the real MariaDB (msg_content + 2 fenced
// offline_msg rows per message), between random pairs of benchUsers users
// whose seq_fence rows exist (steady state), with each allocator:
// "redis"; "segment" as a freshly started process (a user's first message
// reserves a segment); "segment-warm" with every user's segment reserved
// before the timer starts.
func BenchmarkSendStrict1to1(b *testing.B) {
	for _, kind := range []string{"redis", "segment", "segment-warm"} {
		b.Run(kind, func(b *testing.B) { benchStrict(b, kind, 0) })
	}
}

// BenchmarkSendStrictHot is BenchmarkSendStrict1to1 (Redis allocator) with
// hot inboxes: every message goes from a random user to one of hot uids
// (1, 8, 64), so every batch locks those uids' seq_fence rows; "uniform" is
// the same run with random pairs, for the ratio.
func BenchmarkSendStrictHot(b *testing.B) {
	for _, hot := range []int{0, 1, 8, 64} {
		name := "uniform"
		if hot > 0 {
			name = "hot" + strconv.Itoa(hot)
		}
		b.Run(name, func(b *testing.B) { benchStrict(b, "redis", hot) })
	}
}

// benchStrict runs strict sends with allocator kind; hot > 0 sends every
// message to one of uids 1..hot.
func benchStrict(b *testing.B, kind string, hot int) {
	m := testenv.NewMySQL(b)
	r := testenv.NewRedis(b)
	db, counted := countedDB(b, m.DSN)
	rc := budget.CountRedis(r.Client)
	var alloc seqalloc.Allocator
	switch kind {
	case "redis":
		alloc = seqalloc.NewRedis(r.Client, r.Keys)
	case "segment":
		alloc = seqalloc.NewSegment(db, seqalloc.DefaultSegmentConfig())
	case "segment-warm":
		seg := seqalloc.NewSegment(db, seqalloc.DefaultSegmentConfig())
		if err := warmSegments(seg, benchUsers); err != nil {
			b.Fatal(err)
		}
		alloc = seg
	}
	w, err := inbox.NewWriter(alloc, inbox.DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	// Steady state: the users exist (their fence rows do); their
	// conversations and inbox rows do not.
	if err := createFenceRows(m.DB, benchUsers); err != nil {
		b.Fatal(err)
	}
	cfg := benchConfig(b)
	s, err := send.New(context.Background(), cfg, db, w, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var seq atomic.Uint64
	var failed atomic.Int64
	ctx := context.Background()
	pid := budget.ServerPID(ctx, m.DB)
	b.SetParallelism(sendersOf(b) / max(1, runtimeProcs()))
	b.ResetTimer()
	run := budget.Start(counted, rc, pid)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(seq.Add(1), 7))
		for pb.Next() {
			n := seq.Add(1)
			from := 1 + rng.Uint64N(benchUsers)
			to := 1 + rng.Uint64N(benchUsers)
			if hot > 0 {
				to = 1 + rng.Uint64N(uint64(hot))
			}
			if to == from {
				to = from%benchUsers + 1
			}
			_, err := s.Send(ctx, model.SendRequest{SenderUID: from, DeviceID: "d", ClientMsgID: "b" + strconv.FormatUint(n, 10),
				ConvType: model.ConvSingle, ToUID: to, Content: "benchmark message body of some sixty-four bytes, roughly."})
			if err != nil {
				failed.Add(1)
			}
		}
	})
	el := time.Since(start)
	b.StopTimer()
	res := run.Result(b.N)
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d sends failed", f)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	res.Report(b)
	logBudget(b, res)
}

// countedDB opens a pool on dsn whose round trips the budget counts.
func countedDB(b *testing.B, dsn string) (*sql.DB, *budget.SQL) {
	db, c, err := budget.OpenMySQL(dsn, budget.WithHandlerStats())
	if err != nil {
		b.Fatal(err)
	}
	// Few connections: the committers keep one each; the MySQL server is
	// shared.
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	b.Cleanup(func() { db.Close() })
	return db, c
}

// logBudget writes the statements of a batch by kind to stderr (with -v,
// or always with IMLAB_BENCH_BUDGET=1).
func logBudget(b *testing.B, res budget.Result) {
	if testing.Verbose() || os.Getenv("IMLAB_BENCH_BUDGET") != "" {
		fmt.Fprintf(os.Stderr, "%s: per batch (%d batches, %.1f msgs each):\n%s", b.Name(), res.Batches,
			float64(res.Msgs)/float64(max(res.Batches, 1)), res.SQL.Table(res.Batches))
	}
}

// benchConfig is DefaultConfig; IMLAB_BENCH_SHARDS, IMLAB_BENCH_BATCH and
// IMLAB_BENCH_WAIT (a duration) override it for tuning runs.
func benchConfig(b *testing.B) send.Config {
	cfg := send.DefaultConfig()
	cfg.QueueSize = sendersOf(b)
	if v := os.Getenv("IMLAB_BENCH_SHARDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Shards = n
	}
	if v := os.Getenv("IMLAB_BENCH_BATCH"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		cfg.MaxBatch = n
	}
	if v := os.Getenv("IMLAB_BENCH_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		cfg.MaxWait = d
	}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	return cfg
}

// BenchmarkRawBatchedInsert writes the same rows as BenchmarkSendStrict1to1
// (one msg_content row and two offline_msg rows per message) with plain
// multi-row INSERTs, batches of rawBatch messages in one transaction each,
// rawWorkers goroutines: the ceiling the send path is compared with.
func BenchmarkRawBatchedInsert(b *testing.B) {
	m := testenv.NewMySQL(b)
	db, counted := countedDB(b, m.DSN)
	ids, err := msgid.New(1)
	if err != nil {
		b.Fatal(err)
	}
	res := runRawWorkers(b, m.DB, counted, func(rng *rand.Rand, n, w int, seq *uint64) error {
		return rawBatchInsert(db, ids, rng, n, w, seq)
	})
	res.Report(b)
}

// rawBatch and rawWorkers shape the raw references: batches of rawBatch
// messages, one transaction each, on rawWorkers connections.
const rawBatch, rawWorkers = 256, 4

// runRawWorkers runs a raw reference: rawWorkers goroutines, each with its
// own random source and seq counter, take batches of up to rawBatch of
// the b.N messages and write each with batch. It reports msgs/s and
// returns the budget of the timed stretch (db is the server the CPU is
// read from).
func runRawWorkers(b *testing.B, db *sql.DB, counted *budget.SQL, batch func(rng *rand.Rand, n, worker int, seq *uint64) error) budget.Result {
	var next atomic.Int64
	var seqs [rawWorkers]uint64
	b.ResetTimer()
	run := budget.Start(counted, nil, budget.ServerPID(context.Background(), db))
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, rawWorkers)
	for w := range rawWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for {
				lo := next.Add(rawBatch) - rawBatch
				if lo >= int64(b.N) {
					return
				}
				n := int(min(int64(rawBatch), int64(b.N)-lo))
				if err := batch(rng, n, w, &seqs[w]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	res := run.Result(b.N)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	return res
}

func rawBatchInsert(db *sql.DB, ids *msgid.Generator, rng *rand.Rand, n, worker int, seq *uint64) error {
	content, inboxSQL := rawBatchRows(ids, rng, n, worker, seq, nil, nil)
	return execTx(db, []string{content, inboxSQL})
}

// rawBatchRows is the msg_content and offline_msg INSERTs of n messages
// between random pairs of benchUsers users; convs and fences (when not
// nil) count each conversation's messages and each recipient's rows.
func rawBatchRows(ids *msgid.Generator, rng *rand.Rand, n, worker int, seq *uint64, convs, fences map[uint64]int) (content, inbox string) {
	now := time.Now().UTC().Format("2006-01-02 15:04:05.000")
	var cb, ib strings.Builder
	cb.WriteString("INSERT INTO msg_content (msg_id, conv_id, conv_type, conv_seq, sender_uid, client_msg_id, content, created_at) VALUES ")
	ib.WriteString("INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES ")
	for i := 0; i < n; i++ {
		id := ids.Next()
		from := 1 + rng.Uint64N(benchUsers)
		to := 1 + rng.Uint64N(benchUsers)
		if to == from {
			to = from%benchUsers + 1
		}
		conv, _ := model.SingleConvID(from, to)
		if convs != nil {
			convs[conv]++
			fences[from]++
			fences[to]++
		}
		if i > 0 {
			cb.WriteByte(',')
			ib.WriteByte(',')
		}
		fmt.Fprintf(&cb, "(%d,%d,1,%d,%d,'b%d','benchmark message body of some sixty-four bytes, roughly.','%s')", id, conv, id, from, id, now)
		// Seqs unique per worker range (uids are random; the raw baseline does not fence).
		*seq++
		s1 := uint64(worker)<<40 | *seq
		*seq++
		s2 := uint64(worker)<<40 | *seq
		fmt.Fprintf(&ib, "(%d,%d,%d,%d,1,%d,'%s'),(%d,%d,%d,%d,1,%d,'%s')", from, s1, id, conv, from, now, to, s2, id, conv, from, now)
	}
	return cb.String(), ib.String()
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

func createFenceRows(db *sql.DB, users int) error {
	const chunk = 5000
	for lo := 1; lo <= users; lo += chunk {
		var sb strings.Builder
		sb.WriteString("INSERT INTO seq_fence (uid, max_seq, updated_at) VALUES ")
		for u := lo; u < lo+chunk && u <= users; u++ {
			if u > lo {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "(%d,0,UTC_TIMESTAMP(3))", u)
		}
		if _, err := db.Exec(sb.String()); err != nil {
			return fmt.Errorf("create fence rows: %w", err)
		}
	}
	return nil
}

// warmSegments reserves a segment for every user (one Next of 1 each, which
// wastes seq 1: a hole, as after any restart).
func warmSegments(seg *seqalloc.Segment, users int) error {
	const chunk = 5000
	for lo := 1; lo <= users; lo += chunk {
		want := make(map[uint64]int, chunk)
		for u := lo; u < lo+chunk && u <= users; u++ {
			want[uint64(u)] = 1
		}
		if _, err := seg.NextMany(context.Background(), want); err != nil {
			return err
		}
	}
	return nil
}
