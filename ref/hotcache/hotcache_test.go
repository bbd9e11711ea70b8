package hotcache_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"imlab/internal/testenv"
	"imlab/ref/hotcache"
	"imlab/ref/model"
)

// truth is an in-memory inbox: the write path's committed seqs for one uid,
// in commit order (increasing, with holes).
type truth struct {
	mu   sync.Mutex
	uid  uint64
	rows []model.InboxEntry
	rng  *rand.Rand
}

func newTruth(uid uint64, seed uint64) *truth {
	return &truth{uid: uid, rng: rand.New(rand.NewPCG(seed, uid))}
}

// commit appends n rows (holes between seqs, like the segment allocator)
// and returns the hook's entries.
func (t *truth) commit(n int) []model.InboxEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]model.InboxEntry, 0, n)
	for range n {
		var prev uint64
		if len(t.rows) > 0 {
			prev = t.rows[len(t.rows)-1].Seq
		}
		seq := prev + 1
		if t.rng.IntN(4) == 0 {
			seq += uint64(t.rng.IntN(5)) + 1
		}
		e := entry(t.uid, seq, prev)
		t.rows = append(t.rows, e)
		out = append(out, e)
	}
	return out
}

func entry(uid, seq, prev uint64) model.InboxEntry {
	return model.InboxEntry{
		UID: uid, Seq: seq, PrevSeq: prev, MsgID: uid<<32 | seq, ConvID: 7, ConvType: model.ConvGroup,
		ConvSeq: seq, SenderUID: 9, CreatedAt: time.UnixMilli(1700000000000 + int64(seq)).UTC(),
		Content: fmt.Sprintf("m|%d|\"x\"", seq),
	}
}

// snapshot returns every row above floor, as a MySQL read would.
func (t *truth) snapshot(floor uint64) []model.InboxEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []model.InboxEntry
	for _, e := range t.rows {
		if e.Seq > floor {
			out = append(out, e)
		}
	}
	return out
}

func (t *truth) seqs() []uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]uint64, len(t.rows))
	for i, e := range t.rows {
		out[i] = e.Seq
	}
	return out
}

// checkPage verifies that a covered page read after c is exactly the truth's
// next seqs after c (no skip, no invention), in order.
func checkPage(t *testing.T, all []uint64, c uint64, page []model.InboxEntry) {
	t.Helper()
	i := sort.Search(len(all), func(i int) bool { return all[i] > c })
	for k, e := range page {
		if i+k >= len(all) {
			t.Fatalf("page after %d has seq %d that the truth does not have", c, e.Seq)
		}
		if e.Seq != all[i+k] {
			t.Fatalf("page after %d: position %d is seq %d, truth says %d (skip or invention)", c, k, e.Seq, all[i+k])
		}
		if e.MsgID != e.UID<<32|e.Seq || e.Content != fmt.Sprintf("m|%d|\"x\"", e.Seq) {
			t.Fatalf("page after %d: seq %d has wrong body %+v", c, e.Seq, e)
		}
	}
}

func newCache(t *testing.T, keep int) (*hotcache.Cache, *testenv.Redis, *prometheus.Registry) {
	t.Helper()
	r := testenv.NewRedis(t)
	cfg := hotcache.DefaultConfig()
	cfg.InboxKeep = keep
	reg := prometheus.NewRegistry()
	c, err := hotcache.New(r.Client, r.Keys, cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	return c, r, reg
}

func TestAppendNeverCreatesAndChains(t *testing.T) {
	ctx := context.Background()
	c, r, _ := newCache(t, 200)
	tr := newTruth(1, 1)

	c.Committed(ctx, tr.commit(3))
	if n, _ := r.Client.Exists(ctx, r.Keys.Inbox(1)).Result(); n != 0 {
		t.Fatal("an append created a missing key")
	}
	if _, covered, err := c.Range(ctx, 1, 0, 10); err != nil || covered {
		t.Fatalf("missing key: covered=%v err=%v", covered, err)
	}
	// Rebuild from the truth (the whole inbox: floor 0), then chain appends.
	if err := c.RebuildFloor(ctx, 1, tr.snapshot(0), 0); err != nil {
		t.Fatal(err)
	}
	c.Committed(ctx, tr.commit(5))
	c.Committed(ctx, tr.commit(1))
	all := tr.seqs()
	for _, after := range append([]uint64{0}, all...) {
		page, covered, err := c.Range(ctx, 1, after, 4)
		if err != nil || !covered {
			t.Fatalf("after %d: covered=%v err=%v", after, covered, err)
		}
		checkPage(t, all, after, page)
		want := 0
		for _, s := range all {
			if s > after {
				want++
			}
		}
		if len(page) != min(4, want) {
			t.Fatalf("after %d: %d entries, want %d", after, len(page), min(4, want))
		}
	}
	// Re-applying a hook is a no-op.
	before, _ := r.Client.ZCard(ctx, r.Keys.Inbox(1)).Result()
	c.Committed(ctx, tr.snapshot(0)[2:5])
	after, _ := r.Client.ZCard(ctx, r.Keys.Inbox(1)).Result()
	if before != after || before != int64(len(all)+1) {
		t.Fatalf("zcard %d then %d, want %d", before, after, len(all)+1)
	}
	// A link that skips a committed entry deletes the key.
	lost := tr.commit(1)
	next := tr.commit(1)
	_ = lost
	c.Committed(ctx, next)
	if n, _ := r.Client.Exists(ctx, r.Keys.Inbox(1)).Result(); n != 0 {
		t.Fatal("a broken chain did not delete the key")
	}
}

func TestTrimRaisesFloor(t *testing.T) {
	ctx := context.Background()
	const keep = 200
	c, r, _ := newCache(t, keep)
	tr := newTruth(2, 2)
	if err := c.RebuildFloor(ctx, 2, nil, 0); err != nil {
		t.Fatal(err)
	}
	for range 31 {
		c.Committed(ctx, tr.commit(10))
	}
	all := tr.seqs() // 310 seqs
	n, _ := r.Client.ZCard(ctx, r.Keys.Inbox(2)).Result()
	if n != keep+1 {
		t.Fatalf("zcard %d, want %d messages + floor", n, keep)
	}
	floor := all[len(all)-keep-1]
	sp, err := c.Span(ctx, 2, floor, 1000)
	if err != nil || !sp.Covered || sp.Floor != floor || sp.Top != all[len(all)-1] || len(sp.Refs) != keep || sp.Above != keep {
		t.Fatalf("span at floor: %+v err=%v (floor want %d)", sp, err, floor)
	}
	if _, covered, _ := c.Range(ctx, 2, floor-1, 10); covered {
		t.Fatal("read below the floor was covered")
	}
	page, covered, err := c.Range(ctx, 2, floor, keep)
	if err != nil || !covered || len(page) != keep {
		t.Fatalf("covered=%v len=%d err=%v", covered, len(page), err)
	}
	checkPage(t, all, floor, page)
	ttl, _ := r.Client.PTTL(ctx, r.Keys.Inbox(2)).Result()
	if ttl < 7*24*time.Hour-time.Minute {
		t.Fatalf("ttl %v", ttl)
	}
}

func TestRebuildKeepsNewer(t *testing.T) {
	ctx := context.Background()
	c, _, _ := newCache(t, 200)
	tr := newTruth(3, 3)
	tr.commit(20)
	old := tr.snapshot(0)[:10] // a stale read: the newest 10 of an inbox of 10
	if err := c.RebuildFloor(ctx, 3, tr.snapshot(0), 0); err != nil {
		t.Fatal(err)
	}
	if err := c.RebuildFloor(ctx, 3, old, 0); err != nil {
		t.Fatal(err)
	}
	sp, _ := c.Span(ctx, 3, 0, 100)
	if sp.Top != tr.seqs()[19] || len(sp.Refs) != 20 {
		t.Fatalf("stale rebuild replaced newer data: %+v", sp)
	}
	// Same top, lower floor: replaces (covers more).
	all := tr.seqs()
	if err := c.RebuildFloor(ctx, 3, tr.snapshot(all[14]), all[14]); err != nil {
		t.Fatal(err)
	}
	sp, _ = c.Span(ctx, 3, 0, 100)
	if sp.Floor != 0 {
		t.Fatalf("higher floor replaced lower: %+v", sp)
	}
	// Rebuild keeps only InboxKeep and raises the floor to the last dropped.
	c2, _, _ := newCache(t, 5)
	if err := c2.RebuildFloor(ctx, 3, tr.snapshot(0), 0); err != nil {
		t.Fatal(err)
	}
	sp, _ = c2.Span(ctx, 3, all[14], 100)
	if !sp.Covered || sp.Floor != all[14] || len(sp.Refs) != 5 {
		t.Fatalf("trimmed rebuild: %+v", sp)
	}
	if err := c2.RebuildFloor(ctx, 3, []model.InboxEntry{entry(3, 5, 4)}, 5); err == nil {
		t.Fatal("rebuild accepted an entry at the floor")
	}
}

func TestForeignKeyIsNotTrusted(t *testing.T) {
	ctx := context.Background()
	c, r, _ := newCache(t, 200)
	// A ZSet written by someone else, without the floor member.
	r.Client.ZAdd(ctx, r.Keys.Inbox(4), redisZ(5, "77"))
	if _, covered, err := c.Range(ctx, 4, 0, 10); covered || err != nil {
		t.Fatalf("covered=%v err=%v", covered, err)
	}
	c.Committed(ctx, []model.InboxEntry{entry(4, 6, 5)})
	if n, _ := r.Client.ZCard(ctx, r.Keys.Inbox(4)).Result(); n != 1 {
		t.Fatalf("appended to a foreign key: zcard %d", n)
	}
	if err := c.Rebuild(ctx, 4, []model.InboxEntry{entry(4, 5, 0)}); err != nil {
		t.Fatal(err)
	}
	page, covered, err := c.Range(ctx, 4, 0, 10)
	if err != nil || !covered || len(page) != 1 || page[0].Seq != 5 {
		t.Fatalf("after rebuild: %v %v %v", page, covered, err)
	}
}

// TestRandomizedChainRule drives one uid's cache with hooks delivered out of
// order, lost hooks, duplicated hooks, wipes, stale rebuilds and small keeps,
// and checks after every step that every covered read is exactly the truth.
func TestRandomizedChainRule(t *testing.T) {
	ctx := context.Background()
	c, r, _ := newCache(t, 15)
	rng := rand.New(rand.NewPCG(42, 7))
	const uid = 5
	tr := newTruth(uid, 5)
	var pendingHooks [][]model.InboxEntry
	var snaps []struct {
		floor uint64
		rows  []model.InboxEntry
	}
	covered := 0
	for step := range 3000 {
		switch op := rng.IntN(100); {
		case op < 25:
			pendingHooks = append(pendingHooks, tr.commit(1+rng.IntN(4)))
		case op < 50 && len(pendingHooks) > 0:
			// deliver a hook, usually the oldest, sometimes another one
			i := 0
			if rng.IntN(8) == 0 {
				i = rng.IntN(len(pendingHooks))
			}
			h := pendingHooks[i]
			if rng.IntN(10) != 0 { // 1 in 10 is delivered twice
				pendingHooks = slices.Delete(pendingHooks, i, i+1)
			}
			c.Committed(ctx, h)
		case op < 51 && len(pendingHooks) > 0:
			pendingHooks = pendingHooks[1:] // lost hook (crash after commit)
		case op < 52:
			if err := r.Wipe(ctx); err != nil {
				t.Fatal(err)
			}
		case op < 60:
			all := tr.seqs()
			var floor uint64
			if len(all) > 0 && rng.IntN(2) == 0 {
				floor = all[rng.IntN(len(all))]
			}
			snaps = append(snaps, struct {
				floor uint64
				rows  []model.InboxEntry
			}{floor, tr.snapshot(floor)})
		case op < 70:
			if len(snaps) == 0 || rng.IntN(2) == 0 {
				if err := c.RebuildFloor(ctx, uid, tr.snapshot(0), 0); err != nil {
					t.Fatal(err)
				}
				break
			}
			i := rng.IntN(len(snaps))
			if err := c.RebuildFloor(ctx, uid, snaps[i].rows, snaps[i].floor); err != nil {
				t.Fatal(err)
			}
			snaps = slices.Delete(snaps, i, i+1)
		default:
			all := tr.seqs()
			var after uint64
			if len(all) > 0 {
				// mostly near the top, where a keep of 15 can cover
				lo := 0
				if rng.IntN(4) != 0 {
					lo = max(0, len(all)-20)
				}
				after = all[lo+rng.IntN(len(all)-lo)] - uint64(rng.IntN(2))
			}
			page, ok, err := c.Range(ctx, uid, after, 1+rng.IntN(20))
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				covered++
				checkPage(t, all, after, page)
			}
		}
		checkWhole(t, c, tr, uid, step)
	}
	t.Logf("%d covered reads", covered)
	if covered < 100 {
		t.Fatalf("only %d covered reads: the test exercises too little", covered)
	}
}

// checkWhole reads the entire set and checks it is the truth's seqs in
// (floor, top] exactly.
func checkWhole(t *testing.T, c *hotcache.Cache, tr *truth, uid uint64, step int) {
	t.Helper()
	ctx := context.Background()
	sp, err := c.Span(ctx, uid, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !sp.Present {
		return
	}
	sp, err = c.Span(ctx, uid, sp.Floor, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	all := tr.seqs()
	var want []uint64
	for _, s := range all {
		if s > sp.Floor && s <= sp.Top {
			want = append(want, s)
		}
	}
	got := make([]uint64, len(sp.Refs))
	for i, r := range sp.Refs {
		got[i] = r.Seq
	}
	if !slices.Equal(got, want) {
		t.Fatalf("step %d: set (floor %d, top %d) = %v, truth there = %v", step, sp.Floor, sp.Top, got, want)
	}
	if len(all) > 0 && sp.Top > all[len(all)-1] {
		t.Fatalf("step %d: top %d above truth %d", step, sp.Top, all[len(all)-1])
	}
}

// TestConcurrentHooksRebuildsWipes runs writers whose hooks race each other
// (and rebuilds and wipes) while readers check every covered page against
// the truth.
func TestConcurrentHooksRebuildsWipes(t *testing.T) {
	ctx := context.Background()
	c, r, _ := newCache(t, 30)
	const uid = 6
	tr := newTruth(uid, 6)
	var commitMu sync.Mutex // the seq_fence lock: commits are serial per uid
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readers sync.WaitGroup
	var coveredReads, pages int64
	var statMu sync.Mutex

	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for range 150 {
				commitMu.Lock()
				h := tr.commit(1 + rng.IntN(3))
				commitMu.Unlock()
				// hooks run after COMMIT, unordered between writers
				if rng.IntN(3) == 0 {
					time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
				}
				if rng.IntN(50) != 0 {
					c.Committed(ctx, h)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(5, 5))
		for range 120 {
			all := tr.seqs()
			var floor uint64
			if len(all) > 10 {
				floor = all[rng.IntN(len(all)-10)]
			}
			snap := tr.snapshot(floor)
			time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
			if err := c.RebuildFloor(ctx, uid, snap, floor); err != nil {
				t.Error(err)
				return
			}
			if rng.IntN(10) == 0 {
				if err := r.Wipe(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	for g := range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1234))
			for {
				select {
				case <-stop:
					return
				default:
				}
				all := tr.seqs()
				var after uint64
				if len(all) > 0 {
					lo := max(0, len(all)-40)
					after = all[lo+rng.IntN(len(all)-lo)]
				}
				page, ok, err := c.Range(ctx, uid, after, 1+rng.IntN(40))
				if err != nil {
					t.Error(err)
					return
				}
				statMu.Lock()
				pages++
				if ok {
					coveredReads++
				}
				statMu.Unlock()
				if ok {
					// the truth only grows above what a page holds, so check
					// against a fresh read of it
					checkPage(t, tr.seqs(), after, page)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	checkWhole(t, c, tr, uid, -1)
	if coveredReads == 0 {
		t.Fatalf("no covered read in %d", pages)
	}
	t.Logf("%d reads, %d covered", pages, coveredReads)
}

func TestCursorCacheIsMonotonic(t *testing.T) {
	ctx := context.Background()
	c, r, _ := newCache(t, 200)
	if _, ok, err := c.GetCursor(ctx, 1, "d"); ok || err != nil {
		t.Fatalf("ok=%v err=%v", ok, err)
	}
	for _, v := range []uint64{5, 9, 7} {
		if err := c.SetCursor(ctx, 1, "d", v); err != nil {
			t.Fatal(err)
		}
	}
	v, ok, err := c.GetCursor(ctx, 1, "d")
	if err != nil || !ok || v != 9 {
		t.Fatalf("cursor %d ok=%v err=%v, want 9", v, ok, err)
	}
	ttl, _ := r.Client.PTTL(ctx, r.Keys.Cursor(1, "d")).Result()
	if ttl <= 23*time.Hour {
		t.Fatalf("cursor ttl %v", ttl)
	}
}

func TestMissingBodyIsNotCovered(t *testing.T) {
	ctx := context.Background()
	c, r, _ := newCache(t, 200)
	tr := newTruth(8, 8)
	rows := tr.commit(3)
	if err := c.RebuildFloor(ctx, 8, rows, 0); err != nil {
		t.Fatal(err)
	}
	r.Client.Del(ctx, r.Keys.Msg(rows[1].MsgID))
	if _, covered, err := c.Range(ctx, 8, 0, 10); covered || err != nil {
		t.Fatalf("covered=%v err=%v with a body missing", covered, err)
	}
	sp, _ := c.Span(ctx, 8, 0, 10)
	ents, missing, err := c.Fill(ctx, 8, sp.Refs)
	if err != nil || !slices.Equal(missing, []int{1}) || ents[0].Content != rows[0].Content || !ents[0].CreatedAt.Equal(rows[0].CreatedAt) {
		t.Fatalf("fill: %v %v %v", ents, missing, err)
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := hotcache.DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.InboxKeep = 0
	if err := cfg.Validate(); err == nil {
		t.Fatal("keep 0 accepted")
	}
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

// SetCursors raises many cursors in one round trip, never lowers one.
func TestSetCursors(t *testing.T) {
	c, _, _ := newCache(t, 10)
	ctx := context.Background()
	if err := c.SetCursors(ctx, []hotcache.CursorValue{{UID: 1, DID: "a", Seq: 5}, {UID: 1, DID: "b", Seq: 7}, {UID: 2, DID: "a", Seq: 9}}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetCursors(ctx, []hotcache.CursorValue{{UID: 1, DID: "a", Seq: 3}, {UID: 2, DID: "a", Seq: 11}}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []hotcache.CursorValue{{UID: 1, DID: "a", Seq: 5}, {UID: 1, DID: "b", Seq: 7}, {UID: 2, DID: "a", Seq: 11}} {
		v, ok, err := c.GetCursor(ctx, w.UID, w.DID)
		if err != nil || !ok || v != w.Seq {
			t.Fatalf("cursor %d/%s = %d %v %v, want %d", w.UID, w.DID, v, ok, err, w.Seq)
		}
	}
}
