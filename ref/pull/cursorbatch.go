package pull

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"imlab/ref/hotcache"
	"imlab/ref/model"
	"imlab/ref/sqlin"
)

// Cursor writes (MarkServed, Ack, Register) are group-committed: concurrent
// callers of one shard (uid hash) queue their operations, and one of them,
// the leader, runs everything queued so far as ONE transaction:
//
//  1. sync_served multi-row upsert (GREATEST) for the served marks and the
//     registrations (served_seq 0);
//  2. one read of the served marks of the batch's acks; an ack above its
//     device's mark is refused (ErrCursorAhead) and changes nothing;
//  3. sync_cursor multi-row upsert (GREATEST) for the accepted acks;
//  4. one locking read of the stored cursors (the answers);
//  5. COMMIT.
//
// Rows are written in ascending (uid, device_id) order, but InnoDB's gap
// locks on new rows can still deadlock two processes' batches (seen with two
// Services inserting the same new devices). A deadlock (1213) or lock wait
// timeout (1205) rolls the batch back whole, and it is retried up to
// cursorAttempts times after a jittered, doubling pause (cursorBackoff), so
// that the two batches do not meet again in step; each retry is counted
// (imlab_pull_cursor_retries_total). A leader runs one batch (its
// own operation is in it), then hands the lead to the oldest waiter. No
// goroutine is started: callers do the work, so the Service still owns none.
// The queue of each shard is bounded by Config.CursorMaxQueue.

const (
	cursorAttempts = 6
	cursorBackoff  = 2 * time.Millisecond // the first pause's upper bound; doubled per retry
)

const (
	opQueued = iota
	opLead
	opTaken
)

type cursorOp struct {
	uid      uint64
	did      string
	seq      uint64
	served   bool // raise sync_served to seq first
	ack      bool // advance sync_cursor to seq
	register bool // make sure the device has a sync_served row (served_seq 0 when new)

	state int           // under shard.mu
	lead  chan struct{} // closed when this waiter must lead
	done  chan struct{} // closed when stored/err are set

	stored    uint64
	servedNow uint64 // the device's served mark, for a refusal
	err       error
}

type cursorShard struct {
	s       *Service
	mu      sync.Mutex
	busy    bool
	pending []*cursorOp
}

type devKey struct {
	uid uint64
	did string
}

func (s *Service) cursorShardOf(uid uint64) *cursorShard {
	x := uid * 0x9e3779b97f4a7c15
	return s.cursorShards[(x>>32)%uint64(len(s.cursorShards))]
}

// runCursorOp queues op on its shard and returns when it is done (or the
// caller's context ends while op is still queued: then it is withdrawn).
func (s *Service) runCursorOp(ctx context.Context, op *cursorOp) error {
	g := s.cursorShardOf(op.uid)
	op.lead = make(chan struct{})
	op.done = make(chan struct{})
	g.mu.Lock()
	if len(g.pending) >= s.cfg.CursorMaxQueue {
		g.mu.Unlock()
		return fmt.Errorf("%w: pull: cursor write queue full (%d)", model.ErrUnavailable, s.cfg.CursorMaxQueue)
	}
	g.pending = append(g.pending, op)
	if !g.busy {
		g.busy = true
		op.state = opLead
		g.mu.Unlock()
		g.leadBatch()
		return op.err
	}
	g.mu.Unlock()
	select {
	case <-op.done:
		return op.err
	case <-op.lead:
		g.leadBatch()
		return op.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	if op.state == opQueued {
		for i, p := range g.pending {
			if p == op {
				g.pending = append(g.pending[:i], g.pending[i+1:]...)
				break
			}
		}
		g.mu.Unlock()
		return dbErr("cursor write", ctx.Err())
	}
	g.mu.Unlock()
	// Taken into a batch (bounded by QueryTimeout) or given the lead (then
	// it must lead, or the shard would stall).
	select {
	case <-op.done:
	case <-op.lead:
		g.leadBatch()
	}
	return op.err
}

// leadBatch runs one batch from the front of the queue (the leader's own
// operation is first) and passes the lead on.
func (g *cursorShard) leadBatch() {
	g.mu.Lock()
	n := min(len(g.pending), g.s.cfg.CursorMaxBatch)
	batch := make([]*cursorOp, n)
	copy(batch, g.pending[:n])
	g.pending = append(g.pending[:0], g.pending[n:]...)
	for _, op := range batch {
		op.state = opTaken
	}
	g.mu.Unlock()

	g.s.execCursorBatch(batch)
	for _, op := range batch {
		close(op.done)
	}

	g.mu.Lock()
	if len(g.pending) > 0 {
		next := g.pending[0]
		next.state = opLead
		close(next.lead)
	} else {
		g.busy = false
	}
	g.mu.Unlock()
}

func (s *Service) execCursorBatch(batch []*cursorOp) {
	var err error
	for attempt := 0; attempt < cursorAttempts; attempt++ {
		if attempt > 0 {
			s.cursorRetries.Inc()
			time.Sleep(rand.N(cursorBackoff << (attempt - 1)))
		}
		if err = s.cursorTx(batch); err == nil || !retryableTx(err) {
			break
		}
	}
	if err != nil {
		for _, op := range batch {
			op.err = dbErr("cursor write", err)
		}
		return
	}
	if s.cache != nil {
		// After COMMIT (the cache holds only values MySQL holds): one
		// pipelined round trip for the batch's stored cursors.
		var vs []hotcache.CursorValue
		seen := map[devKey]bool{}
		for _, op := range batch {
			k := devKey{op.uid, op.did}
			if !op.ack || op.err != nil || seen[k] {
				continue
			}
			seen[k] = true
			vs = append(vs, hotcache.CursorValue{UID: op.uid, DID: op.did, Seq: op.stored})
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.QueryTimeout)
		_ = s.cache.SetCursors(ctx, vs)
		cancel()
	}
	s.cursorBatch.Observe(float64(len(batch)))
	s.cursorOps.Add(float64(len(batch)))
}

func retryableTx(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

func sortedKeys(m map[devKey]uint64) []devKey {
	keys := make([]devKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].uid != keys[j].uid {
			return keys[i].uid < keys[j].uid
		}
		return keys[i].did < keys[j].did
	})
	return keys
}

// upsertMarks writes (uid, device_id, seq, now) rows into table's column
// col with GREATEST.
func upsertMarks(ctx context.Context, tx *sql.Tx, table, col string, m map[devKey]uint64, now time.Time) error {
	keys := sortedKeys(m)
	var sb strings.Builder
	args := make([]any, 0, 4*len(keys))
	fmt.Fprintf(&sb, "INSERT INTO %s (uid, device_id, %s, updated_at) VALUES ", table, col)
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString("(?,?,?,?)")
		args = append(args, k.uid, k.did, m[k], now)
	}
	fmt.Fprintf(&sb, " ON DUPLICATE KEY UPDATE updated_at = IF(VALUES(%[1]s) > %[1]s, VALUES(updated_at), updated_at), %[1]s = GREATEST(%[1]s, VALUES(%[1]s))", col)
	_, err := tx.ExecContext(ctx, sb.String(), args...)
	return err
}

// readMarks reads col of table for keys.
func readMarks(ctx context.Context, tx *sql.Tx, table, col string, keys []devKey, lock bool) (map[devKey]uint64, error) {
	var sb strings.Builder
	args := make([]any, 0, 2*len(keys))
	fmt.Fprintf(&sb, "SELECT uid, device_id, %s FROM %s WHERE ", col, table)
	args = sqlin.Pairs(&sb, "uid", "device_id", len(keys), args, func(i int) (any, any) { return keys[i].uid, keys[i].did })
	if lock {
		sb.WriteString(" FOR UPDATE")
	}
	rows, err := tx.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[devKey]uint64, len(keys))
	for rows.Next() {
		var k devKey
		var v uint64
		if err := rows.Scan(&k.uid, &k.did, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

// cursorTx is one attempt of a batch; it sets every op's answer on success.
func (s *Service) cursorTx(batch []*cursorOp) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.QueryTimeout)
	defer cancel()
	served := map[devKey]uint64{}
	acks := map[devKey]uint64{}
	for _, op := range batch {
		k := devKey{op.uid, op.did}
		if op.served && op.seq > served[k] {
			served[k] = op.seq
		}
		if _, ok := served[k]; op.register && !ok {
			served[k] = 0 // GREATEST(served_seq, 0): a new row, or no change
		}
		if op.ack {
			// Every acking device is read back, also one acking 0 or below
			// its cursor: its answer is the stored cursor.
			if cur, ok := acks[k]; !ok || op.seq > cur {
				acks[k] = op.seq
			}
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	now := time.Now().UTC()
	if len(served) > 0 {
		if err = upsertMarks(ctx, tx, "sync_served", "served_seq", served, now); err != nil {
			return err
		}
	}
	var marks, stored map[devKey]uint64
	if len(acks) > 0 {
		keys := sortedKeys(acks)
		if marks, err = readMarks(ctx, tx, "sync_served", "served_seq", keys, false); err != nil {
			return err
		}
		// Per device the highest ack not above its served mark.
		ok := map[devKey]uint64{}
		for _, op := range batch {
			k := devKey{op.uid, op.did}
			if op.ack && op.seq <= marks[k] && op.seq > ok[k] {
				ok[k] = op.seq
			}
		}
		if len(ok) > 0 {
			if err = upsertMarks(ctx, tx, "sync_cursor", "pull_seq", ok, now); err != nil {
				return err
			}
		}
		if stored, err = readMarks(ctx, tx, "sync_cursor", "pull_seq", keys, true); err != nil {
			return err
		}
	}
	if err = tx.Commit(); err != nil {
		return err
	}
	for _, op := range batch {
		op.err = nil
		if !op.ack {
			continue
		}
		k := devKey{op.uid, op.did}
		if op.seq > marks[k] {
			op.err = fmt.Errorf("%w: pull_seq %d is beyond the highest seq served to this device (%d)", model.ErrCursorAhead, op.seq, marks[k])
			continue
		}
		op.stored = stored[k]
	}
	return nil
}
