package send

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"imlab/ref/model"
)

// dedup answers duplicates of (sender_uid, client_msg_id) inside one
// process without MySQL:
//
//   - in flight: a Send whose key is already queued or being committed
//     waits for that request's outcome (one flight per key). When the
//     flight fails, a waiter whose deadline allows takes the key over and
//     goes through the batcher itself (the uk_sender_client guard still
//     holds, so a flight whose commit outcome is unknown cannot produce a
//     second message);
//   - recent: the answers of the last Config.DedupCacheSize keys completed
//     successfully (their rows are committed: a stored answer never
//     changes) are kept for Config.DedupCacheTTL and returned with
//     Duplicate=true.
//
// Keys not known locally (another process, an evicted or expired entry)
// fall through to the batcher and uk_sender_client.
//
// The keys are spread over up to dedupShards shards (hash of the key), each
// with its own lock, so that the committers finishing whole batches and the
// senders claiming keys rarely wait on one another. Each shard keeps its
// recent answers in completion order in a ring of size/shards slots: the
// oldest is evicted first (the cache holds at most size answers). The
// answers live in the ring; the map only takes a key's 64-bit hash to its
// slot (a small map of integers: the big map of keys and answers it
// replaces missed the CPU caches on every send), and a slot's own key is
// compared, so two keys of one hash cost a miss, never a wrong answer.
type dedup struct {
	ttl    time.Duration
	seed   maphash.Seed
	shards []dedupShard
}

// dedupShards bounds the shards of a dedup; each holds at least
// dedupShardMin answers (a small cache is one shard: exact completion
// order).
const (
	dedupShards   = 32
	dedupShardMin = 1024
)

type dedupShard struct {
	mu       sync.Mutex
	inflight map[dupKey]*flight
	recent   map[uint64]int32 // key hash -> ring slot
	ring     []recentEntry    // completion order; ring[next] is the oldest once full
	next     int
	full     bool
	_        [64]byte // keeps neighbouring shards' locks off one cache line
}

// flight is one key's send in progress. Its done channel is made only when
// a duplicate waits on it (under the shard lock, like finish's read of
// it), so a send without duplicates costs no channel.
type flight struct {
	done chan struct{} // closed when out is set; nil while nobody waits
	out  outcome
}

type recentEntry struct {
	key     dupKey
	hash    uint64
	res     model.SendResult
	expires time.Time
}

func newDedup(ttl time.Duration, size int) *dedup {
	n := max(1, min(dedupShards, size/dedupShardMin))
	d := &dedup{ttl: ttl, seed: maphash.MakeSeed(), shards: make([]dedupShard, n)}
	for i := range d.shards {
		sh := &d.shards[i]
		sh.inflight = map[dupKey]*flight{}
		if size > 0 && ttl > 0 {
			// Sized up front: growing maps showed up in send profiles.
			sh.ring = make([]recentEntry, size/n)
			sh.recent = make(map[uint64]int32, size/n)
		} else {
			sh.recent = map[uint64]int32{}
		}
	}
	return d
}

// shard is k's shard and k's hash.
func (d *dedup) shard(k dupKey) (*dedupShard, uint64) {
	h := maphash.Comparable(d.seed, k)
	return &d.shards[h%uint64(len(d.shards))], h
}

// claim returns a stored answer (hit), or the flight to wait for (f !=
// nil, own false), or a new flight the caller owns and must finish (own).
func (d *dedup) claim(k dupKey, now time.Time) (res model.SendResult, hit bool, f *flight, own bool) {
	return d.claimInto(k, now, nil)
}

// claimInto is claim with the caller's flight to use when it owns the key
// (nil: one is allocated); mine must not be in use.
func (d *dedup) claimInto(k dupKey, now time.Time, mine *flight) (res model.SendResult, hit bool, f *flight, own bool) {
	sh, h := d.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if slot, ok := sh.recent[h]; ok {
		if e := &sh.ring[slot]; e.key == k {
			if now.Before(e.expires) {
				return e.res, true, nil, false
			}
			delete(sh.recent, h)
		}
	}
	if f, ok := sh.inflight[k]; ok {
		if f.done == nil {
			f.done = make(chan struct{})
		}
		return model.SendResult{}, false, f, false
	}
	f = mine
	if f == nil {
		f = &flight{}
	}
	sh.inflight[k] = f
	return model.SendResult{}, false, f, true
}

// finish completes the flight of k with o (a success is remembered).
func (d *dedup) finish(k dupKey, f *flight, o outcome) {
	sh, h := d.shard(k)
	sh.mu.Lock()
	if sh.inflight[k] == f {
		delete(sh.inflight, k)
	}
	if o.err == nil && len(sh.ring) > 0 {
		r := o.res
		r.Duplicate = false
		e := &sh.ring[sh.next]
		if sh.full {
			// The oldest goes, unless its hash now points elsewhere (a
			// newer answer of the key, or of another key of that hash).
			if slot, ok := sh.recent[e.hash]; ok && int(slot) == sh.next {
				delete(sh.recent, e.hash)
			}
		}
		*e = recentEntry{key: k, hash: h, res: r, expires: time.Now().Add(d.ttl)}
		sh.recent[h] = int32(sh.next)
		sh.next++
		if sh.next == len(sh.ring) {
			sh.next, sh.full = 0, true
		}
	}
	// out is written under the lock: a waiter reads it after done is
	// closed, and done is taken under the lock (claimInto makes it there).
	f.out = o
	done := f.done
	sh.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// recentLen is how many answers are remembered (tests).
func (d *dedup) recentLen() int {
	n := 0
	for i := range d.shards {
		sh := &d.shards[i]
		sh.mu.Lock()
		n += len(sh.recent)
		sh.mu.Unlock()
	}
	return n
}

// await waits for f (got from claim as a waiter) until ctx ends or expire
// fires (nil: never). ok false: the flight failed and the caller should try
// itself (its deadline not yet passed).
func (f *flight) await(ctx context.Context, expire <-chan time.Time) (res model.SendResult, ok bool, err error) {
	select {
	case <-f.done:
	case <-ctx.Done():
		return model.SendResult{}, false, fmt.Errorf("%w: duplicate of a send in flight not acknowledged in time: %v", model.ErrUnavailable, ctx.Err())
	case <-expire:
		return model.SendResult{}, false, fmt.Errorf("%w: duplicate of a send in flight not acknowledged in time: %v", model.ErrUnavailable, context.DeadlineExceeded)
	}
	if f.out.err != nil {
		return model.SendResult{}, false, nil
	}
	r := f.out.res
	r.Duplicate = true
	return r, true, nil
}
