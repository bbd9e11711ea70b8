package send

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"imlab/ref/model"
)

// The recent answers: bounded by max, oldest evicted first, expired after
// the TTL, a failure never remembered, and a disabled cache remembers
// nothing while still coalescing flights.
func TestDedupRecentBoundAndExpiry(t *testing.T) {
	now := time.Now()
	for _, max := range []int{1, 5, 64, 1000, 40_000} { // 40,000: 32 shards
		d := newDedup(time.Minute, max)
		keys := 3 * max
		for i := range keys {
			k := dupKey{1, strconv.Itoa(i)}
			_, hit, f, own := d.claim(k, now)
			if hit || !own {
				t.Fatalf("max %d: fresh key %d: hit %v own %v", max, i, hit, own)
			}
			d.finish(k, f, outcome{res: model.SendResult{MsgID: uint64(i + 1)}})
			if n := d.recentLen(); n > max {
				t.Fatalf("max %d: %d answers kept", max, n)
			}
		}
		// The newest key of every shard is still there, answered as stored.
		last := dupKey{1, strconv.Itoa(keys - 1)}
		res, hit, _, _ := d.claim(last, now)
		if !hit || res.MsgID != uint64(keys) || res.Duplicate {
			t.Fatalf("max %d: newest key: hit %v %+v", max, hit, res)
		}
		// The oldest was evicted (every shard's ring went round at least once).
		if _, hit, f, own := d.claim(dupKey{1, "0"}, now); hit || !own {
			t.Fatalf("max %d: oldest key still answered", max)
		} else {
			d.finish(dupKey{1, "0"}, f, outcome{err: errors.New("x")})
		}
		// Expired after the TTL.
		if _, hit, f, own := d.claim(last, now.Add(2*time.Minute)); hit || !own {
			t.Fatalf("max %d: expired answer returned", max)
		} else {
			d.finish(last, f, outcome{err: errors.New("x")})
		}
	}
	d := newDedup(time.Minute, 0)
	k := dupKey{2, "a"}
	_, _, f, _ := d.claim(k, now)
	if _, hit, f2, own := d.claim(k, now); hit || own || f2 != f {
		t.Fatal("a second claim of a key in flight must wait for the first")
	}
	d.finish(k, f, outcome{res: model.SendResult{MsgID: 9}})
	if d.recentLen() != 0 {
		t.Fatal("disabled cache remembered an answer")
	}
	if res, ok, err := f.await(t.Context(), nil); !ok || err != nil || res.MsgID != 9 || !res.Duplicate {
		t.Fatalf("await: %+v %v %v", res, ok, err)
	}
}

// Many goroutines claiming and finishing overlapping keys: each key gets
// exactly one owner per flight, waiters see its answer.
func TestDedupConcurrent(t *testing.T) {
	d := newDedup(time.Minute, 10_000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	owners := map[dupKey]int{}
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := dupKey{uint64(i % 7), strconv.Itoa(i % 500)}
				res, hit, f, own := d.claim(k, time.Now())
				switch {
				case hit:
					if res.MsgID == 0 {
						t.Errorf("hit without an answer")
					}
				case own:
					mu.Lock()
					owners[k]++
					mu.Unlock()
					d.finish(k, f, outcome{res: model.SendResult{MsgID: uint64(g*1_000_000 + i + 1)}})
				default:
					if r, ok, err := f.await(t.Context(), nil); !ok || err != nil || r.MsgID == 0 {
						t.Errorf("await: %+v %v %v", r, ok, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	for k, n := range owners {
		if n != 1 {
			t.Fatalf("key %v owned %d times (answers are kept for a minute)", k, n)
		}
	}
}

// Two keys of one hash: the map points the second key's hash at the first
// key's slot (as a collision would); the second key is a miss, never the
// first key's answer.
func TestDedupHashCollisionIsAMiss(t *testing.T) {
	now := time.Now()
	d := newDedup(time.Minute, 16)
	a, b := dupKey{1, "a"}, dupKey{1, "b"}
	_, _, f, _ := d.claim(a, now)
	d.finish(a, f, outcome{res: model.SendResult{MsgID: 5}})
	sh, ha := d.shard(a)
	_, hb := d.shard(b)
	sh.mu.Lock()
	sh.recent[hb] = sh.recent[ha]
	sh.mu.Unlock()
	if _, hit, _, own := d.claim(b, now); hit || !own {
		t.Fatalf("key b answered from key a's slot: hit %v own %v", hit, own)
	}
	if r, hit, _, _ := d.claim(a, now); !hit || r.MsgID != 5 {
		t.Fatalf("key a: hit %v %+v", hit, r)
	}
}
