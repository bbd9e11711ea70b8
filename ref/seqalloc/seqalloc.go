// Package seqalloc hands out per-user inbox seqs. Two allocators share one
// interface: Redis (INCRBY im:offline:seq:{uid}) and Segment (process-local
// ranges of SegmentConfig.Size reserved in the seq_segment table).
//
// An allocator only proposes seqs. It does not decide what is committed: the
// persisted fence (seq_fence, in ref/inbox) refuses any proposal at or below
// the highest seq already committed for the uid and calls Raise, so a Redis
// counter set back, a restarted segment allocator or two allocators racing
// can never make a seq reused. Seqs may have holes (rolled-back batches,
// wasted segments); they are never reused.
//
// Batch form: NextMany is part of the interface. Redis answers all uids in
// one pipelined round trip; Segment serves from local segments and reserves
// new ones only for the uids that ran out.
//
// It must not read or write inbox rows or the fence.
package seqalloc

import (
	"context"
	"errors"
	"fmt"
)

// Allocator proposes per-user seqs.
type Allocator interface {
	// Name is "redis" or "segment" (the metric label).
	Name() string
	// Next reserves n (>=1) consecutive seqs first..first+n-1 for uid.
	Next(ctx context.Context, uid uint64, n int) (first uint64, err error)
	// NextMany is Next for several uids at once: want[uid] = n, answer[uid] = first.
	NextMany(ctx context.Context, want map[uint64]int) (map[uint64]uint64, error)
	// Raise makes every later Next for uid return a seq > floor.
	Raise(ctx context.Context, uid uint64, floor uint64) error
}

// ErrBadCount is returned for n < 1 or a uid of 0.
var ErrBadCount = errors.New("seqalloc: n must be >= 1 and uid non-zero")

func checkArgs(uid uint64, n int) error {
	if uid == 0 || n < 1 {
		return fmt.Errorf("%w (uid=%d n=%d)", ErrBadCount, uid, n)
	}
	return nil
}
