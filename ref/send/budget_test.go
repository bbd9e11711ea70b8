package send_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"imlab/internal/budget"
	"imlab/internal/testenv"
	"imlab/ref/inbox"
	"imlab/ref/send"
	"imlab/ref/seqalloc"
)

// strictBudget is what one strict batch sends to MySQL, by statement kind,
// in its steady shapes. It is the write path's per-batch budget
// (ARCHITECTURE.md, "Per-batch budget"): a change that adds a round trip
// must change this table.
var strictBudget = map[string]map[string]int64{
	// Every conversation and every recipient new: the guarded fence raise
	// misses (no fence rows), the attempt is rolled back (missRollback) and
	// run again with the locking read, which creates the rows and checks the
	// same seq proposals (no second Redis round trip).
	"first": {
		"BEGIN":               1,
		"INSERT conv_counter": 1, // upsert; all rows inserted, so no read back
		"INSERT msg_content":  1,
		"SELECT seq_fence":    2, // lock (finds none), lock the created rows
		"INSERT seq_fence":    1, // create the missing rows
		"INSERT offline_msg":  1,
		"UPDATE seq_fence":    1, // raise the locked rows
		"COMMIT":              1,
	},
	// The same conversations again from the same process: their counters
	// are remembered and checked by the guarded UPDATE itself, and the fence
	// rows are raised by the guarded UPDATE without a read.
	"again": {
		"BEGIN":               1,
		"UPDATE conv_counter": 1,
		"INSERT msg_content":  1,
		"UPDATE seq_fence":    1,
		"INSERT offline_msg":  1,
		"COMMIT":              1,
	},
	// The same conversations from another process, which does not know
	// their counters: read back. The fence rows are where the shared
	// allocator's proposals assume.
	"elsewhere": readBackBudget,
	// Back in the first process, whose remembered counters are now stale:
	// the guarded UPDATE finds out, the attempt is rolled back, and the
	// next one reads back, as do the committer's next convStalePause
	// batches (the first batch of each committer rolls back once, counted
	// apart: staleRollback).
	"stale": readBackBudget,
}

// readBackBudget is a strict batch whose conversation counters are read
// back after the upsert, the fence rows being where the proposals assume.
var readBackBudget = map[string]int64{
	"BEGIN":               1,
	"INSERT conv_counter": 1,
	"SELECT conv_counter": 1,
	"INSERT msg_content":  1,
	"UPDATE seq_fence":    1,
	"INSERT offline_msg":  1,
	"COMMIT":              1,
}

// staleRollback is what a rolled-back stale prediction sent.
var staleRollback = []string{"BEGIN", "UPDATE conv_counter"}

// missRollback is what a rolled-back guarded fence raise sent (every batch
// of the "first" shape).
var missRollback = []string{"BEGIN", "INSERT conv_counter", "INSERT msg_content", "UPDATE seq_fence"}

// TestStrictBatchBudget pins the round trips of a strict batch: every
// batch of each shape sends exactly strictBudget's statements (whatever
// the batch sizes turned out to be) and one Redis round trip. The services
// try the guarded fence raise in every batch (FenceGuardPause 0), so that
// each shape shows its own statements.
func TestStrictBatchBudget(t *testing.T) {
	m := testenv.NewMySQL(t)
	r := testenv.NewRedis(t)
	db, counted, err := budget.OpenMySQL(m.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rc := budget.CountRedis(r.Client)
	w, err := inbox.NewWriter(seqalloc.NewRedis(r.Client, r.Keys), inbox.DefaultConfig(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var procs []*send.Service
	for node := uint16(1); node <= 2; node++ {
		cfg := send.DefaultConfig()
		cfg.Node = node
		cfg.FenceGuardPause = 0
		s, err := send.New(context.Background(), cfg, db, w, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		procs = append(procs, s)
	}
	const pairs = 60
	// Warm-up (not counted): the committers' connections, their session
	// setting and the Redis client's connection set-up (which is why Redis
	// is checked by pipelines, not round trips).
	// 20 conversations per process: each of its committers gets one.
	for i := uint64(1); i <= 40; i++ {
		if _, err := procs[i%2].Send(context.Background(), one(10_000+2*i, 10_001+2*i, "warm")); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		shape string
		proc  int
	}{{"first", 0}, {"again", 0}, {"elsewhere", 1}, {"stale", 0}} {
		shape, s := step.shape, procs[step.proc]
		s0, r0 := counted.Snapshot(), rc.Snapshot()
		var wg sync.WaitGroup
		errs := make(chan error, pairs)
		for i := uint64(1); i <= pairs; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Send(context.Background(), one(2*i-1, 2*i, fmt.Sprintf("%s-%d", shape, i))); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		d := counted.Snapshot().Sub(s0)
		batches := d.Commits
		if batches < 1 || batches > pairs {
			t.Fatalf("%s: %d commits for %d sends", shape, batches, pairs)
		}
		delete(d.Kinds, "SET") // the session isolation, once per new committer connection
		got := map[string]int64{}
		for k, v := range d.Kinds {
			got[k] = v.N
		}
		want := map[string]int64{}
		for k, n := range strictBudget[shape] {
			want[k] = n * batches
		}
		if shape == "first" {
			// One rolled-back attempt per batch: the guard finds no rows.
			if d.Rollbacks != batches {
				t.Errorf("first: %d rollbacks for %d batches", d.Rollbacks, batches)
			}
			for _, k := range missRollback {
				want[k] += d.Rollbacks
			}
		}
		if shape == "stale" {
			// One rolled-back attempt per committer that had a batch
			// (BEGIN, the guarded UPDATE, ROLLBACK), not per batch.
			if d.Rollbacks < 1 || d.Rollbacks > int64(send.DefaultConfig().Shards) || d.Rollbacks > batches {
				t.Errorf("stale: %d rollbacks for %d batches", d.Rollbacks, batches)
			}
			for _, k := range staleRollback {
				want[k] += d.Rollbacks
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: %d batches sent\n%v\nwant\n%v", shape, batches, sorted(got), sorted(want))
		}
		if shape != "stale" && shape != "first" && d.Rollbacks != 0 {
			t.Errorf("%s: %d rollbacks", shape, d.Rollbacks)
		}
		if p := rc.Snapshot().Pipelines - r0.Pipelines; p != batches {
			t.Errorf("%s: %d Redis pipelines for %d batches, want 1 each (the seq proposals)", shape, p, batches)
		}
		t.Logf("%s: %d batches, %.1f round trips each", shape, batches, float64(d.RoundTrips())/float64(batches))
	}
}

func sorted(m map[string]int64) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return out
}
