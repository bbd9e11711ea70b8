package seqalloc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
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

// NextMany implements Allocator: uids whose local segment can serve are
// answered locally; the others get new segments from one short
// transaction (one upsert, one read-back), whatever their number.
func (s *Segment) NextMany(ctx context.Context, want map[uint64]int) (map[uint64]uint64, error) {
	uids := make([]uint64, 0, len(want))
	for uid, n := range want {
		if err := checkArgs(uid, n); err != nil {
			return nil, err
		}
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	// Lock the uids' states in ascending order (every multi-uid caller does,
	// so callers cannot deadlock on each other).
	states := make([]*segState, len(uids))
	for i, uid := range uids {
		states[i] = s.state(uid)
		states[i].mu.Lock()
	}
	defer func() {
		for _, st := range states {
			st.mu.Unlock()
		}
	}()
	var need []int
	for i, st := range states {
		n := uint64(want[uids[i]])
		if st.next == 0 || st.next > st.max || st.max-st.next+1 < n {
			need = append(need, i)
		}
	}
	if len(need) > 0 {
		if err := s.reserveMany(ctx, uids, states, want, need); err != nil {
			return nil, err
		}
	}
	out := make(map[uint64]uint64, len(uids))
	for i, st := range states {
		out[uids[i]] = st.next
		st.next += uint64(want[uids[i]])
	}
	return out, nil
}

// reserveMany reserves new segments for states[need[...]] (ascending uids)
// in one transaction: the upsert locks and advances each row, the SELECT
// reads back the values this transaction wrote.
func (s *Segment) reserveMany(ctx context.Context, uids []uint64, states []*segState, want map[uint64]int, need []int) error {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		err := s.reserveManyOnce(ctx, uids, states, want, need)
		if err == nil {
			return nil
		}
		lastErr = err
		var me *mysql.MySQLError
		if !errors.As(err, &me) || (me.Number != 1213 && me.Number != 1205) {
			return err
		}
	}
	return lastErr
}

func (s *Segment) reserveManyOnce(ctx context.Context, uids []uint64, states []*segState, want map[uint64]int, need []int) error {
	sizes := make([]uint64, len(need))
	now := time.Now().UTC().Format("2006-01-02 15:04:05.000")
	var ins, floorCase, sizeCase, in strings.Builder
	ins.WriteString("INSERT INTO seq_segment (uid, reserved_max, updated_at) VALUES ")
	for k, i := range need {
		st := states[i]
		size := max(s.cfg.Size, uint64(want[uids[i]]))
		sizes[k] = size
		u := strconv.FormatUint(uids[i], 10)
		if k > 0 {
			ins.WriteByte(',')
			in.WriteByte(',')
		}
		fmt.Fprintf(&ins, "(%s,%d,'%s')", u, st.floor+size, now)
		fmt.Fprintf(&floorCase, " WHEN %s THEN %d", u, st.floor)
		fmt.Fprintf(&sizeCase, " WHEN %s THEN %d", u, size)
		in.WriteString(u)
	}
	fmt.Fprintf(&ins, " ON DUPLICATE KEY UPDATE reserved_max = GREATEST(reserved_max, CASE uid%s ELSE 0 END) + CASE uid%s ELSE 0 END, updated_at = '%s'",
		floorCase.String(), sizeCase.String(), now)

	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return fmt.Errorf("seqalloc: reserve segments: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if _, err := tx.ExecContext(ctx, ins.String()); err != nil {
		return fmt.Errorf("seqalloc: reserve %d segments: %w", len(need), err)
	}
	rows, err := tx.QueryContext(ctx, "SELECT uid, reserved_max FROM seq_segment WHERE uid IN ("+in.String()+")")
	if err != nil {
		return fmt.Errorf("seqalloc: read reserved segments: %w", err)
	}
	tops := make(map[uint64]uint64, len(need))
	for rows.Next() {
		var uid, top uint64
		if err := rows.Scan(&uid, &top); err != nil {
			rows.Close()
			return fmt.Errorf("seqalloc: scan reserved segments: %w", err)
		}
		tops[uid] = top
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("seqalloc: read reserved segments: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("seqalloc: reserve segments: commit: %w", err)
	}
	for k, i := range need {
		top, ok := tops[uids[i]]
		if !ok || top < sizes[k] {
			return fmt.Errorf("seqalloc: segment of uid %d read back as %d", uids[i], top)
		}
		states[i].next, states[i].max = top-sizes[k]+1, top
	}
	return nil
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
