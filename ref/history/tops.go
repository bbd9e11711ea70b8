package history

import "sync"

// bucketTops is a bounded conversation → highest known bucket index map.
// When it holds maxBucketTops conversations it is emptied: forgetting costs
// a write the seed's update-first order, nothing else.
type bucketTops struct {
	mu sync.Mutex
	m  map[uint64]uint64
}

// maxBucketTops bounds the conversations bucketTops remembers.
const maxBucketTops = 1 << 17

// known reports whether bucket idx of convID is known to exist.
func (t *bucketTops) known(convID, idx uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	top, ok := t.m[convID]
	return ok && idx <= top
}

// saw records that bucket idx of convID exists.
func (t *bucketTops) saw(convID, idx uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil || len(t.m) >= maxBucketTops {
		t.m = make(map[uint64]uint64)
	}
	if top, ok := t.m[convID]; !ok || idx > top {
		t.m[convID] = idx
	}
}
