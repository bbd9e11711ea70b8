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
// in the two steady shapes: every conversation and every recipient new
// ("first"), and every conversation and fence row existing ("again"). It is
// the write path's per-batch budget (ARCHITECTURE.md, "Per-batch budget"):
// a change that adds a round trip must change this table.
var strictBudget = map[string]map[string]int64{
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
	"again": {
		"BEGIN":               1,
		"INSERT conv_counter": 1,
		"SELECT conv_counter": 1, // read back: some rows existed
		"INSERT msg_content":  1,
		"SELECT seq_fence":    1,
		"INSERT offline_msg":  1,
		"UPDATE seq_fence":    1,
		"COMMIT":              1,
	},
}

// TestStrictBatchBudget pins the round trips of a strict batch: every
// batch of each shape sends exactly strictBudget's statements (whatever
// the batch sizes turned out to be) and one Redis round trip.
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
	cfg := send.DefaultConfig()
	s, err := send.New(context.Background(), cfg, db, w, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	const pairs = 60
	// Warm-up (not counted): the committers' connections, their session
	// setting and the Redis client's connection set-up (which is why Redis
	// is checked by pipelines, not round trips).
	for i := uint64(1); i <= 4; i++ {
		if _, err := s.Send(context.Background(), one(10_000+2*i, 10_001+2*i, "warm")); err != nil {
			t.Fatal(err)
		}
	}
	for _, shape := range []string{"first", "again"} {
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
		if !maps.Equal(got, want) {
			t.Errorf("%s: %d batches sent\n%v\nwant\n%v", shape, batches, sorted(got), sorted(want))
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
