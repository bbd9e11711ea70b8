package send

import (
	"container/list"
	"context"
	"fmt"
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
type dedup struct {
	ttl time.Duration
	max int

	mu       sync.Mutex
	inflight map[dupKey]*flight
	lru      *list.List // of *recentEntry, most recent at the front
	recent   map[dupKey]*list.Element
}

type flight struct {
	done chan struct{} // closed when out is set
	out  outcome
}

type recentEntry struct {
	key     dupKey
	res     model.SendResult
	expires time.Time
}

func newDedup(ttl time.Duration, max int) *dedup {
	return &dedup{ttl: ttl, max: max, inflight: map[dupKey]*flight{}, lru: list.New(), recent: map[dupKey]*list.Element{}}
}

// claim returns a stored answer (hit), or the flight to wait for (f !=
// nil, own false), or a new flight the caller owns and must finish (own).
func (d *dedup) claim(k dupKey, now time.Time) (res model.SendResult, hit bool, f *flight, own bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.recent[k]; ok {
		re := e.Value.(*recentEntry)
		if now.Before(re.expires) {
			d.lru.MoveToFront(e)
			return re.res, true, nil, false
		}
		d.lru.Remove(e)
		delete(d.recent, k)
	}
	if f, ok := d.inflight[k]; ok {
		return model.SendResult{}, false, f, false
	}
	f = &flight{done: make(chan struct{})}
	d.inflight[k] = f
	return model.SendResult{}, false, f, true
}

// finish completes the flight of k with o (a success is remembered).
func (d *dedup) finish(k dupKey, f *flight, o outcome) {
	d.mu.Lock()
	if d.inflight[k] == f {
		delete(d.inflight, k)
	}
	if o.err == nil && d.max > 0 && d.ttl > 0 {
		r := o.res
		r.Duplicate = false
		if e, ok := d.recent[k]; ok {
			d.lru.Remove(e)
		}
		d.recent[k] = d.lru.PushFront(&recentEntry{key: k, res: r, expires: time.Now().Add(d.ttl)})
		for d.lru.Len() > d.max {
			old := d.lru.Back()
			d.lru.Remove(old)
			delete(d.recent, old.Value.(*recentEntry).key)
		}
	}
	d.mu.Unlock()
	f.out = o
	close(f.done)
}

// await waits for f. ok false: the flight failed and the caller should try
// itself (its context still alive).
func (f *flight) await(ctx context.Context) (res model.SendResult, ok bool, err error) {
	select {
	case <-f.done:
	case <-ctx.Done():
		return model.SendResult{}, false, fmt.Errorf("%w: duplicate of a send in flight not acknowledged in time: %v", model.ErrUnavailable, ctx.Err())
	}
	if f.out.err != nil {
		return model.SendResult{}, false, nil
	}
	r := f.out.res
	r.Duplicate = true
	return r, true, nil
}
