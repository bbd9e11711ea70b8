package seqalloc_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"imlab/internal/budget"
	"imlab/internal/testenv"
	"imlab/ref/rkeys"
	"imlab/ref/seqalloc"
)

func TestRedisNextRaise(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := context.Background()
	a := seqalloc.NewRedis(r.Client, r.Keys)
	if a.Name() != "redis" {
		t.Fatalf("name %q", a.Name())
	}
	first, err := a.Next(ctx, 5, 3)
	if err != nil || first != 1 {
		t.Fatalf("first Next = %d, %v; want 1", first, err)
	}
	if first, _ = a.Next(ctx, 5, 1); first != 4 {
		t.Fatalf("second Next = %d, want 4", first)
	}
	if err := a.Raise(ctx, 5, 100); err != nil {
		t.Fatal(err)
	}
	if first, _ = a.Next(ctx, 5, 2); first != 101 {
		t.Fatalf("Next after Raise(100) = %d, want 101", first)
	}
	// Raise never lowers.
	if err := a.Raise(ctx, 5, 10); err != nil {
		t.Fatal(err)
	}
	if first, _ = a.Next(ctx, 5, 1); first != 103 {
		t.Fatalf("Next after Raise(10) = %d, want 103", first)
	}
	got, err := a.NextMany(ctx, map[uint64]int{5: 2, 6: 4, 7: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got[5] != 104 || got[6] != 1 || got[7] != 1 {
		t.Fatalf("NextMany = %v", got)
	}
	if _, err := a.Next(ctx, 0, 1); err == nil {
		t.Fatal("uid 0 accepted")
	}
	if _, err := a.Next(ctx, 1, 0); err == nil {
		t.Fatal("n 0 accepted")
	}
	if v, _ := r.Client.Get(ctx, r.Keys.SeqCounter(6)).Result(); v != "4" {
		t.Fatalf("counter key %s = %q, want 4", r.Keys.SeqCounter(6), v)
	}
}

func TestSegmentReserveRestartRaise(t *testing.T) {
	m := testenv.NewMySQL(t)
	ctx := context.Background()
	cfg := seqalloc.SegmentConfig{Size: 10, MaxUIDs: 100}
	a := seqalloc.NewSegment(m.DB, cfg)
	first, err := a.Next(ctx, 9, 4)
	if err != nil || first != 1 {
		t.Fatalf("Next = %d, %v; want 1", first, err)
	}
	if first, _ = a.Next(ctx, 9, 6); first != 5 {
		t.Fatalf("Next = %d, want 5", first)
	}
	// Segment exhausted: the next call reserves 11..20.
	if first, _ = a.Next(ctx, 9, 1); first != 11 {
		t.Fatalf("Next = %d, want 11", first)
	}
	// A call larger than what is left wastes the rest (seqs of one call are consecutive).
	if first, _ = a.Next(ctx, 9, 15); first != 21 {
		t.Fatalf("Next(15) = %d, want 21", first)
	}
	var reserved uint64
	if err := m.DB.QueryRow(`SELECT reserved_max FROM seq_segment WHERE uid = 9`).Scan(&reserved); err != nil || reserved != 35 {
		t.Fatalf("reserved_max = %d, %v; want 35", reserved, err)
	}
	// Restart: a new instance never reuses a reserved seq.
	b := seqalloc.NewSegment(m.DB, cfg)
	if first, _ = b.Next(ctx, 9, 1); first != 36 {
		t.Fatalf("after restart Next = %d, want 36", first)
	}
	// Raise drops the local segment and reserves above the floor.
	if err := b.Raise(ctx, 9, 500); err != nil {
		t.Fatal(err)
	}
	if first, _ = b.Next(ctx, 9, 1); first != 501 {
		t.Fatalf("after Raise(500) Next = %d, want 501", first)
	}
	// A raise below the local segment keeps it.
	if err := b.Raise(ctx, 9, 100); err != nil {
		t.Fatal(err)
	}
	if first, _ = b.Next(ctx, 9, 1); first != 502 {
		t.Fatalf("after Raise(100) Next = %d, want 502", first)
	}
	// Raise on a uid never seen starts its first reservation above floor.
	if err := b.Raise(ctx, 77, 1000); err != nil {
		t.Fatal(err)
	}
	if first, _ = b.Next(ctx, 77, 1); first != 1001 {
		t.Fatalf("new uid after Raise(1000) Next = %d, want 1001", first)
	}
}

// Two segment allocators (two processes) and many goroutines on a few uids:
// every seq handed out is unique per uid.
func TestSegmentConcurrentUnique(t *testing.T) {
	m := testenv.NewMySQL(t)
	ctx := context.Background()
	cfg := seqalloc.SegmentConfig{Size: 7, MaxUIDs: 2} // tiny: forces reservations and evictions
	allocs := []*seqalloc.Segment{seqalloc.NewSegment(m.DB, cfg), seqalloc.NewSegment(m.DB, cfg)}
	var mu sync.Mutex
	seen := map[[2]uint64]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			a := allocs[w%2]
			for i := 0; i < 150; i++ {
				uid := uint64(1 + i%3)
				n := 1 + i%4
				got := map[uint64]uint64{}
				if w%3 == 0 { // batch form, two uids at once
					var err error
					got, err = a.NextMany(ctx, map[uint64]int{uid: n, uid%3 + 1: n})
					if err != nil {
						errs <- err
						return
					}
				} else {
					first, err := a.Next(ctx, uid, n)
					if err != nil {
						errs <- err
						return
					}
					got[uid] = first
				}
				mu.Lock()
				for u, first := range got {
					for s := first; s < first+uint64(n); s++ {
						k := [2]uint64{u, s}
						if seen[k] {
							mu.Unlock()
							t.Errorf("uid %d seq %d handed out twice", u, s)
							return
						}
						seen[k] = true
					}
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestSegmentNextMany(t *testing.T) {
	m := testenv.NewMySQL(t)
	ctx := context.Background()
	a := seqalloc.NewSegment(m.DB, seqalloc.SegmentConfig{Size: 10, MaxUIDs: 100})
	if _, err := a.Next(ctx, 1, 8); err != nil { // uid 1: 1..8 used, 9..10 left
		t.Fatal(err)
	}
	if err := a.Raise(ctx, 3, 50); err != nil {
		t.Fatal(err)
	}
	got, err := a.NextMany(ctx, map[uint64]int{1: 2, 2: 3, 3: 1, 4: 25})
	if err != nil {
		t.Fatal(err)
	}
	// uid 1 served locally (9), uid 2 new segment (1), uid 3 above its floor
	// (51), uid 4 needs more than a segment (a range of 25: 1..25).
	if got[1] != 9 || got[2] != 1 || got[3] != 51 || got[4] != 1 {
		t.Fatalf("NextMany = %v", got)
	}
	got, err = a.NextMany(ctx, map[uint64]int{1: 1, 2: 7, 4: 1})
	if err != nil {
		t.Fatal(err)
	}
	// uid 1 exhausted -> 11..20; uid 2 has 4..10 left; uid 4's 25-range is used up -> 26..35.
	if got[1] != 11 || got[2] != 4 || got[4] != 26 {
		t.Fatalf("second NextMany = %v", got)
	}
	// Another process's segments never overlap.
	b := seqalloc.NewSegment(m.DB, seqalloc.SegmentConfig{Size: 10, MaxUIDs: 100})
	got, err = b.NextMany(ctx, map[uint64]int{1: 1, 2: 1, 3: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got[1] != 21 || got[2] != 11 || got[3] != 61 {
		t.Fatalf("other process NextMany = %v", got)
	}
}

// NextMany's batch of keys is exactly SeqCounter of each uid, with the
// test's prefix and without one.
func TestRedisCounterKeys(t *testing.T) {
	r := testenv.NewRedis(t)
	uids := []uint64{1, 42, 18446744073709551615, 7}
	for _, keys := range []rkeys.Keys{r.Keys, {}} {
		got := seqalloc.CounterKeys(seqalloc.NewRedis(r.Client, keys), uids)
		for i, uid := range uids {
			if got[i] != keys.SeqCounter(uid) {
				t.Fatalf("key of %d = %q, want %q", uid, got[i], keys.SeqCounter(uid))
			}
		}
	}
}

// BenchmarkRedisNextMany takes seqs for 390 uids (a strict batch of ~195
// 1:1 messages) per op. redis-µs/op is redis-server's CPU (from /proc; on a
// shared server it includes other clients' work). A Lua script doing the
// INCRBYs in one command was tried: fewer client allocations, but ~1.5x
// the server's CPU of the pipeline (550 against 355 µs per op).
func BenchmarkRedisNextMany(b *testing.B) {
	r := testenv.NewRedis(b)
	ctx := context.Background()
	a := seqalloc.NewRedis(r.Client, r.Keys)
	want := map[uint64]int{}
	for uid := uint64(1); uid <= 390; uid++ {
		want[uid*257] = 1
	}
	pid := redisPID(ctx, r.Client)
	b.ReportAllocs()
	cpu0 := budget.ReadCPU(pid)
	for b.Loop() {
		if _, err := a.NextMany(ctx, want); err != nil {
			b.Fatal(err)
		}
	}
	if d := budget.ReadCPU(pid).Server - cpu0.Server; pid > 0 && d > 0 {
		b.ReportMetric(float64(d.Microseconds())/float64(b.N), "redis-µs/op")
	}
}

// redisPID is redis-server's process id (INFO server), or 0.
func redisPID(ctx context.Context, c *redis.Client) int {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
