package seqalloc

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// SegmentConfig configures the segment allocator.
type SegmentConfig struct {
	// Size is how many seqs one reservation takes (seed 000: 1000).
	Size uint64
	// MaxUIDs bounds how many uids keep a local segment; past it an idle
	// uid's segment is dropped (its rest becomes a hole).
	MaxUIDs int
}

// DefaultSegmentConfig is 1000 seqs per reservation, 100k cached uids.
func DefaultSegmentConfig() SegmentConfig {
	return SegmentConfig{Size: 1000, MaxUIDs: 100_000}
}

// Validate checks the limits.
func (c SegmentConfig) Validate() error {
	if c.Size < 1 || c.Size > 1<<30 {
		return fmt.Errorf("seqalloc: segment size %d out of range 1..%d", c.Size, 1<<30)
	}
	if c.MaxUIDs < 1 {
		return fmt.Errorf("seqalloc: segment MaxUIDs %d must be >= 1", c.MaxUIDs)
	}
	return nil
}

type segState struct {
	mu    sync.Mutex
	next  uint64 // next seq to hand out
	max   uint64 // last seq of the local segment (next > max: empty)
	floor uint64 // reserve above this (set by Raise)
}

// Segment hands out seqs from process-local ranges reserved atomically in
// seq_segment (reserved_max advanced by Size in one statement). A restart
// wastes the rest of every range (holes), never reuses a seq.
type Segment struct {
	db  *sql.DB
	cfg SegmentConfig

	mu   sync.Mutex
	uids map[uint64]*segState
}

// NewSegment returns a segment allocator over db's seq_segment table. An
// invalid cfg is replaced field by field by the defaults.
func NewSegment(db *sql.DB, cfg SegmentConfig) *Segment {
	def := DefaultSegmentConfig()
	if cfg.Size < 1 || cfg.Size > 1<<30 {
		cfg.Size = def.Size
	}
	if cfg.MaxUIDs < 1 {
		cfg.MaxUIDs = def.MaxUIDs
	}
	return &Segment{db: db, cfg: cfg, uids: make(map[uint64]*segState)}
}

// Name implements Allocator.
func (s *Segment) Name() string { return "segment" }

func (s *Segment) state(uid uint64) *segState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.uids[uid]
	if ok {
		return st
	}
	if len(s.uids) >= s.cfg.MaxUIDs {
		// Drop one idle uid's segment (map order is arbitrary). A state
		// still held by a caller stays valid: its range is reserved.
		for k, v := range s.uids {
			if v.mu.TryLock() {
				delete(s.uids, k)
				v.mu.Unlock()
				break
			}
		}
	}
	st = &segState{}
	s.uids[uid] = st
	return st
}

// reserve takes a new range of at least n seqs above st.floor and above
// every range reserved before. Caller holds st.mu.
func (s *Segment) reserve(ctx context.Context, uid uint64, st *segState, n int) error {
	size := s.cfg.Size
	if uint64(n) > size {
		size = uint64(n)
	}
	// One atomic statement: a new row starts at floor+size; an existing one
	// moves to GREATEST(reserved_max, floor)+size, and LAST_INSERT_ID(expr)
	// hands the new value back in the OK packet.
	res, err := s.db.ExecContext(ctx, `INSERT INTO seq_segment (uid, reserved_max, updated_at) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE reserved_max = LAST_INSERT_ID(GREATEST(reserved_max, ?) + ?), updated_at = ?`,
		uid, st.floor+size, time.Now().UTC(), st.floor, size, time.Now().UTC())
	if err != nil {
		return fmt.Errorf("seqalloc: reserve segment uid %d: %w", uid, err)
	}
	affected, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("seqalloc: reserve segment uid %d: %w", uid, err)
	}
	var top uint64
	switch affected {
	case 1: // inserted
		top = st.floor + size
	case 2: // updated
		id, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("seqalloc: reserve segment uid %d: %w", uid, err)
		}
		top = uint64(id)
	default:
		return fmt.Errorf("seqalloc: reserve segment uid %d: unexpected rows affected %d", uid, affected)
	}
	if top < size {
		return fmt.Errorf("seqalloc: reserve segment uid %d: reserved_max %d below size %d", uid, top, size)
	}
	st.next, st.max = top-size+1, top
	return nil
}

// Next implements Allocator.
func (s *Segment) Next(ctx context.Context, uid uint64, n int) (uint64, error) {
	if err := checkArgs(uid, n); err != nil {
		return 0, err
	}
	st := s.state(uid)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.next == 0 || st.next > st.max || st.max-st.next+1 < uint64(n) {
		// The rest of a too-short segment is wasted: seqs of one call must
		// be consecutive.
		if err := s.reserve(ctx, uid, st, n); err != nil {
			return 0, err
		}
	}
	first := st.next
	st.next += uint64(n)
	return first, nil
}

// NextMany implements Allocator (reserving only where a segment ran out).
func (s *Segment) NextMany(ctx context.Context, want map[uint64]int) (map[uint64]uint64, error) {
	out := make(map[uint64]uint64, len(want))
	for uid, n := range want {
		first, err := s.Next(ctx, uid, n)
		if err != nil {
			return nil, err
		}
		out[uid] = first
	}
	return out, nil
}

// Raise implements Allocator: the local segment is dropped and the next
// reservation starts above floor.
func (s *Segment) Raise(ctx context.Context, uid uint64, floor uint64) error {
	if uid == 0 {
		return fmt.Errorf("%w (uid=0)", ErrBadCount)
	}
	st := s.state(uid)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.next != 0 && st.next > floor && st.next <= st.max {
		return nil // the local segment is already above floor
	}
	if floor > st.floor {
		st.floor = floor
	}
	st.next, st.max = 0, 0
	return nil
}
