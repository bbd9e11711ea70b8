// Package inbox owns the fenced, idempotent writes of offline_msg rows: the
// per-user seq fence (seq_fence), stale-seq detection, and telling a
// (uid, seq) PRIMARY collision apart from a (uid, msg_id) duplicate; and
// the order of its creation index (created.go) that reconciliation and
// retention read the table along.
//
// Write algorithm (WriteTx, inside the caller's READ COMMITTED transaction):
//  1. lock the seq_fence rows of the distinct uids (ascending) with SELECT
//     uid, max_seq ... FOR UPDATE, creating the missing ones first (upsert,
//     then lock them too);
//  2. drop the (uid, msg_id) pairs that are already delivered (Dedup, read
//     after the lock, so a committed row of a racing writer is seen;
//     WriteKeyCheckedTx leaves this to the INSERT's uk_uid_msg, step 4);
//  3. allocate seqs: one Next per uid for its count, the uid's items in input
//     order; any uid whose first seq is <= its max_seq is stale: the fence is
//     counted (imlab_seq_fence_raised_total{reason="stale"}), the allocator is
//     raised to max_seq, and the uid is allocated again (bounded rounds).
//     WriteFreshTx takes the first proposals before step 1, so the allocator
//     round trip does not lengthen the time the fence rows stay locked; they
//     are checked against max_seq under the lock all the same;
//  4. multi-row INSERT offline_msg (plain INSERT). On 1062 the key name is
//     read: PRIMARY means the fence was behind the table (restored rows): the
//     fence is raised from MAX(seq) (reason="pk_collision") and the rows are
//     allocated again; uk_uid_msg means the row already exists: it is dropped
//     (idempotent) and the rest is written again;
//  5. raise seq_fence max_seq to each uid's new top (one UPDATE of the
//     locked rows by each uid's difference, see raiseFence).
//
// Because a uid's fence row stays locked from step 1 to COMMIT, seqs are
// committed in increasing order per uid and each new entry's PrevSeq is the
// uid's fence before it (its highest committed seq, or above it by the holes
// a shrunken batch left, guarded.go).
//
// WriteFreshGuardedTx (guarded.go, the strict send path) replaces steps 1,
// 3 and 5 by one UPDATE that bets every uid's fence is exactly its first
// proposal minus one: the row is locked, checked and raised at once. A bet
// that does not hold fails with FenceMovedError; the caller rolls back and
// writes with WriteFreshProposedTx (steps 1-5, same proposals).
//
// It must not read inboxes for clients or talk to Kafka. Dedup strategies
// other than the native uk_uid_msg one plug in through Dedup.
package inbox

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"imlab/ref/defect"
	"imlab/ref/model"
	"imlab/ref/seqalloc"
	"imlab/ref/sqlin"
)

// Item is one recipient's inbox row to write.
type Item struct {
	UID       uint64
	MsgID     uint64
	ConvID    uint64
	ConvType  model.ConvType
	ConvSeq   uint64
	SenderUID uint64
	CreatedAt time.Time
	Content   string // carried into the returned entry, not stored here
}

// Config bounds a Writer.
type Config struct {
	// MaxItems bounds one WriteTx call.
	MaxItems int
	// MaxRounds bounds re-allocations within one WriteTx (stale seqs,
	// PRIMARY collisions, uk_uid_msg duplicates).
	MaxRounds int
	// MaxAttempts bounds whole-transaction attempts of Write (deadlock,
	// lock wait timeout).
	MaxAttempts int
	// InsertChunk is the most rows one INSERT statement carries.
	InsertChunk int
	// Dedup filters already-delivered items; nil means UKUidMsg.
	Dedup Dedup
	// Defects are shipped defects enabled on purpose (ref/defect; empty
	// by default): the lab's negative controls.
	Defects defect.Set
}

// DefaultConfig: 50k items per call, 8 rounds, 5 attempts, 4096 rows per
// INSERT: the inbox tier's transactions hold up to 4096 rows
// (fanout.InboxSinkConfig.MaxRowsPerTx), so each is one INSERT without a
// savepoint (a statement of ~0.4 MB, far under max_allowed_packet: 16 MB
// on MariaDB, 64 MB on MySQL 8).
func DefaultConfig() Config {
	return Config{MaxItems: 50_000, MaxRounds: 8, MaxAttempts: 5, InsertChunk: 4096}
}

// Validate checks the limits.
func (c Config) Validate() error {
	switch {
	case c.MaxItems < 1:
		return fmt.Errorf("inbox: MaxItems %d must be >= 1", c.MaxItems)
	case c.MaxRounds < 1:
		return fmt.Errorf("inbox: MaxRounds %d must be >= 1", c.MaxRounds)
	case c.MaxAttempts < 1:
		return fmt.Errorf("inbox: MaxAttempts %d must be >= 1", c.MaxAttempts)
	case c.InsertChunk < 1 || c.InsertChunk > 10_000:
		return fmt.Errorf("inbox: InsertChunk %d out of range 1..10000", c.InsertChunk)
	}
	return nil
}

// Dedup decides which items are already delivered. Fresh runs inside the
// write transaction, after the uids' fence rows are locked, and returns the
// items still to write, in input order. Whatever it answers, a uk_uid_msg
// collision at INSERT time is still treated as "already there".
type Dedup interface {
	Name() string
	Fresh(ctx context.Context, tx *sql.Tx, items []Item) ([]Item, error)
}

// UKUidMsg is the native dedup: the (uid, msg_id) unique key of offline_msg.
type UKUidMsg struct{}

// Name implements Dedup.
func (UKUidMsg) Name() string { return "uk_uid_msg" }

// Fresh implements Dedup: one point lookup per pair on uk_uid_msg.
func (UKUidMsg) Fresh(ctx context.Context, tx *sql.Tx, items []Item) ([]Item, error) {
	return existing(ctx, tx, items)
}

// Key names one inbox row by (uid, msg_id).
type Key struct{ UID, MsgID uint64 }

// Querier is what Delivered reads through (*sql.DB or *sql.Tx).
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

const lookupChunk = 500

// Delivered returns which of keys have an offline_msg row (point lookups
// on uk_uid_msg, lookupChunk pairs per statement).
func Delivered(ctx context.Context, q Querier, keys []Key) (map[Key]bool, error) {
	found := make(map[Key]bool)
	for start := 0; start < len(keys); start += lookupChunk {
		end := min(start+lookupChunk, len(keys))
		var sb strings.Builder
		args := make([]any, 0, 2*(end-start))
		sb.WriteString("SELECT uid, msg_id FROM offline_msg WHERE ")
		args = sqlin.Pairs(&sb, "uid", "msg_id", end-start, args, func(i int) (any, any) {
			return keys[start+i].UID, keys[start+i].MsgID
		})
		rows, err := q.QueryContext(ctx, sb.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("inbox: delivered lookup: %w", err)
		}
		for rows.Next() {
			var k Key
			if err := rows.Scan(&k.UID, &k.MsgID); err != nil {
				rows.Close()
				return nil, fmt.Errorf("inbox: delivered scan: %w", err)
			}
			found[k] = true
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("inbox: delivered rows: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("inbox: delivered rows: %w", err)
		}
	}
	return found, nil
}

// existing drops items whose (uid, msg_id) row exists.
func existing(ctx context.Context, tx *sql.Tx, items []Item) ([]Item, error) {
	keys := make([]Key, len(items))
	for i, it := range items {
		keys[i] = Key{it.UID, it.MsgID}
	}
	found, err := Delivered(ctx, tx, keys)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return items, nil
	}
	out := make([]Item, 0, len(items)-len(found))
	for _, it := range items {
		if !found[Key{it.UID, it.MsgID}] {
			out = append(out, it)
		}
	}
	return out, nil
}

// Writer writes fenced inbox rows. It is safe for concurrent use.
type Writer struct {
	alloc  seqalloc.Allocator
	cfg    Config
	dedup  Dedup
	raised *prometheus.CounterVec
	hint   PrimaryHint // the guarded raise's index hint
}

// NewWriter returns a Writer over alloc. reg may be nil (no metrics
// exported); a collector already registered on reg is shared.
func NewWriter(alloc seqalloc.Allocator, cfg Config, reg prometheus.Registerer) (*Writer, error) {
	if alloc == nil {
		return nil, errors.New("inbox: nil allocator")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := cfg.Dedup
	if d == nil {
		d = UKUidMsg{}
	}
	raised := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "imlab_seq_fence_raised_total",
		Help: "Allocator proposals refused by the persisted seq fence (stale) or by a (uid,seq) primary-key collision.",
	}, []string{"allocator", "reason"})
	raised, err := registerCounterVec(reg, raised)
	if err != nil {
		return nil, err
	}
	return &Writer{alloc: alloc, cfg: cfg, dedup: d, raised: raised}, nil
}

func registerCounterVec(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if ex, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return ex, nil
			}
		}
		return nil, fmt.Errorf("inbox: register metric: %w", err)
	}
	return c, nil
}

// Allocator is the writer's seq allocator.
func (w *Writer) Allocator() seqalloc.Allocator { return w.alloc }

// Dedup is the writer's dedup strategy.
func (w *Writer) Dedup() Dedup { return w.dedup }

// FenceRaised is the fence counter for reason ("stale", "pk_collision")
// of this writer's allocator (tests and reports read it).
func (w *Writer) FenceRaised(reason string) prometheus.Counter {
	return w.raised.WithLabelValues(w.alloc.Name(), reason)
}

// WriteTx writes items inside tx (READ COMMITTED expected) and returns the
// new entries only, with Seq and PrevSeq set, grouped by uid ascending and in
// seq order within a uid. Items whose (uid, msg_id) row already exists are
// skipped and not returned. Items of one uid get increasing seqs in input
// order. On error the caller must roll tx back; Retryable tells whether the
// whole transaction may be run again.
func (w *Writer) WriteTx(ctx context.Context, tx *sql.Tx, items []Item) ([]model.InboxEntry, error) {
	return w.write(ctx, tx, items, writeLookup, nil)
}

// WriteFreshTx is WriteTx for items whose msg_ids were created inside this
// same transaction (the send path): they cannot exist yet, so the Dedup
// lookup is skipped. A uk_uid_msg collision is still handled as a duplicate.
func (w *Writer) WriteFreshTx(ctx context.Context, tx *sql.Tx, items []Item) ([]model.InboxEntry, error) {
	return w.write(ctx, tx, items, writeFresh, nil)
}

// WriteKeyCheckedTx is WriteTx for a caller whose whole dedup is
// uk_uid_msg (the inbox tier's default strategy): the Dedup lookup is left
// to the INSERT, which checks that key anyway, so a batch without
// duplicates costs no lookup; one with duplicates costs a refused INSERT,
// the lookup, and the seqs allocated for it (holes, which the seq contract
// allows). Unlike WriteFreshTx the seqs are allocated under the fence lock,
// as WriteTx does: a transaction that fails before its INSERT (a deadlock
// on the fence rows) has used none.
func (w *Writer) WriteKeyCheckedTx(ctx context.Context, tx *sql.Tx, items []Item) ([]model.InboxEntry, error) {
	return w.write(ctx, tx, items, writeKeyChecked, nil)
}

// writeMode says how write checks for rows that already exist.
type writeMode int

const (
	writeLookup     writeMode = iota // Dedup.Fresh under the fence lock (WriteTx)
	writeFresh                       // nothing can exist; seqs proposed before the lock (WriteFreshTx)
	writeKeyChecked                  // the INSERT's uk_uid_msg finds them (WriteKeyCheckedTx)
)

// Write runs WriteTx in its own READ COMMITTED transaction, retrying the
// whole transaction on deadlock or lock wait timeout (MaxAttempts).
func (w *Writer) Write(ctx context.Context, db *sql.DB, items []Item) ([]model.InboxEntry, error) {
	var lastErr error
	for attempt := 0; attempt < w.cfg.MaxAttempts; attempt++ {
		if attempt > 0 {
			if err := sleepCtx(ctx, backoff(attempt)); err != nil {
				return nil, fmt.Errorf("%w: inbox write: %v (last error: %v)", model.ErrUnavailable, err, lastErr)
			}
		}
		entries, err := w.writeOnce(ctx, db, items)
		if err == nil {
			return entries, nil
		}
		lastErr = err
		if !Retryable(err) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: inbox write gave up after %d attempts: %v", model.ErrUnavailable, w.cfg.MaxAttempts, lastErr)
}

func (w *Writer) writeOnce(ctx context.Context, db *sql.DB, items []Item) ([]model.InboxEntry, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("inbox: begin: %w", err)
	}
	entries, err := w.WriteTx(ctx, tx, items)
	if err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("inbox: commit: %w", err)
	}
	return entries, nil
}

func backoff(attempt int) time.Duration {
	d := time.Duration(1<<min(attempt, 6)) * time.Millisecond
	return d + time.Duration(time.Now().UnixNano()%int64(d))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func validItems(items []Item, maxItems int) error {
	if len(items) > maxItems {
		return fmt.Errorf("%w: %d inbox items in one write (max %d)", model.ErrTooLarge, len(items), maxItems)
	}
	for i, it := range items {
		if it.UID == 0 || it.MsgID == 0 || it.ConvID == 0 {
			return fmt.Errorf("%w: inbox item %d: uid, msg_id and conv_id must be non-zero", model.ErrInvalid, i)
		}
		if it.ConvType != model.ConvSingle && it.ConvType != model.ConvGroup {
			return fmt.Errorf("%w: inbox item %d: conv_type %d", model.ErrInvalid, i, it.ConvType)
		}
	}
	return nil
}

// write is every write mode's algorithm (package doc). held, when it fits
// the items (Proposals.fits), are proposals taken for them before: a fresh
// write checks those instead of taking new ones.
func (w *Writer) write(ctx context.Context, tx *sql.Tx, items []Item, mode writeMode, held *Proposals) ([]model.InboxEntry, error) {
	if len(items) == 0 {
		return nil, nil
	}
	if err := validItems(items, w.cfg.MaxItems); err != nil {
		return nil, err
	}
	// Items grouped by uid ascending, in input order within a uid (the
	// order their seqs follow), the same (uid, msg_id) twice written once:
	// every later step walks the uids' runs of this slice, and the entries
	// come out in (uid, seq) order without a sort.
	items = uniqueItems(byUID(items))
	uids, want := runsOf(items)

	// Fresh items (the send path) take their seq proposals before the fence
	// rows are locked, so the allocator round trip is outside the time the
	// rows stay locked; they are checked against the fence under the lock
	// like any proposal (a stale one is refused and re-allocated there).
	var proposed map[uint64]uint64
	if mode == writeFresh {
		if held.fits(want) {
			proposed = held.firsts
		} else {
			var err error
			if proposed, err = w.propose(ctx, want); err != nil {
				return nil, err
			}
		}
	}

	fence, err := lockFence(ctx, tx, uids)
	if err != nil {
		return nil, err
	}
	// The rows' values as locked: raiseFence updates by the difference.
	// fence itself may be raised in memory by raiseFromTable on the way
	// (then it is a copy first).
	locked, fenceCopied := fence, false
	if mode == writeLookup && !w.cfg.Defects.Has(defect.InboxRowTwice) { // the defect trusts a key the table lacks
		if items, err = w.dedup.Fresh(ctx, tx, items); err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return nil, nil
		}
		uids, want = runsOf(items)
	}

	var seqs []uint64
	for round := 0; ; round++ {
		if round >= w.cfg.MaxRounds {
			return nil, fmt.Errorf("%w: inbox: no clean seq allocation after %d rounds", model.ErrUnavailable, w.cfg.MaxRounds)
		}
		if len(items) == 0 {
			return nil, nil
		}
		seqs, err = w.allocate(ctx, items, want, fence, proposed)
		proposed = nil
		if err != nil {
			return nil, err
		}
		err = insertRows(ctx, tx, items, seqs, w.cfg.InsertChunk, w.cfg.Defects)
		if err == nil {
			break
		}
		key, dup := DupKey(err)
		switch {
		case dup && key == "PRIMARY":
			if !fenceCopied {
				fence, fenceCopied = maps.Clone(locked), true
			}
			if err := w.raiseFromTable(ctx, tx, fence, uids); err != nil {
				return nil, err
			}
		case dup && key == "uk_uid_msg":
			if items, err = existing(ctx, tx, items); err != nil {
				return nil, err
			}
			uids, want = runsOf(items)
		default:
			return nil, fmt.Errorf("inbox: insert offline_msg: %w", err)
		}
	}

	entries := make([]model.InboxEntry, len(items))
	tops := make([]uint64, 0, len(uids))
	for i, it := range items {
		e := &entries[i]
		*e = entryOf(it, seqs[i], 0)
		if i == 0 || items[i-1].UID != it.UID {
			e.PrevSeq = fence[it.UID]
			tops = append(tops, 0)
		} else {
			e.PrevSeq = entries[i-1].Seq
		}
		tops[len(tops)-1] = e.Seq
	}
	if err := raiseFence(ctx, tx, uids, tops, locked); err != nil {
		return nil, err
	}
	return entries, nil
}

// byUID returns items ordered by uid, in input order within a uid (a copy
// when it had to be reordered).
func byUID(items []Item) []Item {
	if slices.IsSortedFunc(items, func(a, b Item) int { return cmp.Compare(a.UID, b.UID) }) {
		return items
	}
	type ref struct {
		uid uint64
		i   int
	}
	order := make([]ref, len(items))
	for i, it := range items {
		order[i] = ref{it.UID, i}
	}
	slices.SortFunc(order, func(a, b ref) int {
		if c := cmp.Compare(a.uid, b.uid); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	out := make([]Item, len(items))
	for k, r := range order {
		out[k] = items[r.i]
	}
	return out
}

// uniqueItems drops a (uid, msg_id) seen earlier in items (ordered by
// uid, byUID): only runs of one uid can hold one twice.
func uniqueItems(items []Item) []Item {
	out := items
	copied := false
	var seen map[uint64]struct{}
	for start := 0; start < len(items); {
		end := start + 1
		for end < len(items) && items[end].UID == items[start].UID {
			end++
		}
		small := end-start <= 16
		if !small {
			if seen == nil {
				seen = make(map[uint64]struct{}, end-start)
			} else {
				clear(seen)
			}
		}
		for i := start; i < end; i++ {
			dup := false
			if small {
				for j := start; j < i && !dup; j++ {
					dup = items[j].MsgID == items[i].MsgID
				}
			} else if _, dup = seen[items[i].MsgID]; !dup {
				seen[items[i].MsgID] = struct{}{}
			}
			if dup && !copied {
				out, copied = slices.Clone(items[:i]), true
			}
			if copied && !dup {
				out = append(out, items[i])
			}
		}
		start = end
	}
	return out
}

// runsOf lists the distinct uids of items (ordered by uid) ascending and
// how many items each has.
func runsOf(items []Item) ([]uint64, map[uint64]int) {
	var uids []uint64
	want := make(map[uint64]int, len(items))
	for i, it := range items {
		if i == 0 || items[i-1].UID != it.UID {
			uids = append(uids, it.UID)
		}
		want[it.UID]++
	}
	return uids, want
}

func uidList(sb *strings.Builder, uids []uint64) { sqlin.Uints(sb, uids) }

// lockFence locks the uids' fence rows in ascending uid order and returns
// their max_seq. Rows that do not exist yet (a uid's first message) are
// created and then locked.
func lockFence(ctx context.Context, tx *sql.Tx, uids []uint64) (map[uint64]uint64, error) {
	fence := make(map[uint64]uint64, len(uids))
	if err := selectFence(ctx, tx, uids, fence); err != nil {
		return nil, err
	}
	if len(fence) == len(uids) {
		return fence, nil
	}
	missing := make([]uint64, 0, len(uids)-len(fence))
	for _, u := range uids {
		if _, ok := fence[u]; !ok {
			missing = append(missing, u)
		}
	}
	now := time.Now().UTC().Format("2006-01-02 15:04:05.000")
	var sb strings.Builder
	sb.WriteString("INSERT INTO seq_fence (uid, max_seq, updated_at) VALUES ")
	for i, u := range missing {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('(')
		sqlin.Uint(&sb, u)
		sb.WriteString(",0,'")
		sb.WriteString(now)
		sb.WriteString("')")
	}
	// A row created meanwhile by another writer is kept as it is (and locked).
	sb.WriteString(" ON DUPLICATE KEY UPDATE uid = uid")
	if _, err := tx.ExecContext(ctx, sb.String()); err != nil {
		return nil, fmt.Errorf("inbox: create seq_fence rows: %w", err)
	}
	if err := selectFence(ctx, tx, missing, fence); err != nil {
		return nil, err
	}
	if len(fence) != len(uids) {
		return nil, fmt.Errorf("inbox: locked %d of %d seq_fence rows", len(fence), len(uids))
	}
	return fence, nil
}

func selectFence(ctx context.Context, tx *sql.Tx, uids []uint64, fence map[uint64]uint64) error {
	var sb strings.Builder
	sb.WriteString("SELECT uid, max_seq FROM seq_fence WHERE uid IN (")
	uidList(&sb, uids)
	sb.WriteString(") ORDER BY uid FOR UPDATE")
	rows, err := tx.QueryContext(ctx, sb.String())
	if err != nil {
		return fmt.Errorf("inbox: lock seq_fence: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var uid, max uint64
		if err := rows.Scan(&uid, &max); err != nil {
			return fmt.Errorf("inbox: scan seq_fence: %w", err)
		}
		fence[uid] = max
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("inbox: read seq_fence: %w", err)
	}
	return nil
}

// propose takes each uid's first seq for its count of items (want) from
// the allocator, unchecked.
func (w *Writer) propose(ctx context.Context, want map[uint64]int) (map[uint64]uint64, error) {
	got, err := w.alloc.NextMany(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("%w: inbox: allocate seqs: %v", model.ErrUnavailable, err)
	}
	return got, nil
}

// allocate proposes seqs for items (ordered by uid, byUID; want is each
// uid's count) and refuses any uid whose first seq is not above its fence,
// raising the allocator and asking again for those uids only. proposed,
// when not nil, holds first seqs already taken for exactly these items
// (propose): they are checked instead of asking the allocator again. It
// returns the seqs parallel to items.
func (w *Writer) allocate(ctx context.Context, items []Item, want map[uint64]int, fence map[uint64]uint64, proposed map[uint64]uint64) ([]uint64, error) {
	firsts, own := proposed, proposed == nil // own: firsts may be written
	if firsts == nil {
		var err error
		if firsts, err = w.alloc.NextMany(ctx, want); err != nil {
			return nil, fmt.Errorf("%w: inbox: allocate seqs: %v", model.ErrUnavailable, err)
		}
	}
	ask := want // the uids still to check, with their counts
	for round := 0; ; round++ {
		var stale map[uint64]int
		for uid, n := range ask {
			first, ok := firsts[uid]
			if !ok {
				return nil, fmt.Errorf("inbox: allocator %s gave no seq for uid %d", w.alloc.Name(), uid)
			}
			if first <= fence[uid] && !w.cfg.Defects.Has(defect.SeqReuse) { // the defect trusts the allocator
				w.raised.WithLabelValues(w.alloc.Name(), "stale").Inc()
				if err := w.alloc.Raise(ctx, uid, fence[uid]); err != nil {
					return nil, fmt.Errorf("%w: inbox: raise allocator: %v", model.ErrUnavailable, err)
				}
				if stale == nil {
					stale = make(map[uint64]int)
				}
				stale[uid] = n
			}
		}
		if len(stale) == 0 {
			break
		}
		if round+1 >= w.cfg.MaxRounds {
			return nil, fmt.Errorf("%w: inbox: allocator %s stayed below the fence after %d raises", model.ErrUnavailable, w.alloc.Name(), w.cfg.MaxRounds)
		}
		again, err := w.alloc.NextMany(ctx, stale)
		if err != nil {
			return nil, fmt.Errorf("%w: inbox: allocate seqs: %v", model.ErrUnavailable, err)
		}
		if !own {
			firsts, own = maps.Clone(firsts), true // proposed stays the caller's
		}
		for uid := range stale {
			first, ok := again[uid]
			if !ok {
				return nil, fmt.Errorf("inbox: allocator %s gave no seq for uid %d", w.alloc.Name(), uid)
			}
			firsts[uid] = first
		}
		ask = stale
	}
	return seqsFrom(items, firsts), nil
}

// seqsFrom hands out each uid's seqs from its first one, in items' order
// (items ordered by uid, byUID): the seqs parallel to items.
func seqsFrom(items []Item, firsts map[uint64]uint64) []uint64 {
	seqs := make([]uint64, len(items))
	var next uint64
	for i, it := range items {
		if i == 0 || items[i-1].UID != it.UID {
			next = firsts[it.UID]
		}
		seqs[i] = next
		next++
	}
	return seqs
}

// entryOf is the inbox entry of item it stored at seq, prev the uid's
// fence (or entry) before it.
func entryOf(it Item, seq, prev uint64) model.InboxEntry {
	return model.InboxEntry{
		UID: it.UID, Seq: seq, PrevSeq: prev, MsgID: it.MsgID, ConvID: it.ConvID, ConvType: it.ConvType,
		ConvSeq: it.ConvSeq, SenderUID: it.SenderUID, CreatedAt: it.CreatedAt, Content: it.Content,
	}
}

// raiseFromTable handles a (uid, seq) PRIMARY collision: the fence was
// behind the rows in the table, so it is raised to MAX(seq) (in memory; the
// final UPDATE persists it) and the allocator above it.
func (w *Writer) raiseFromTable(ctx context.Context, tx *sql.Tx, fence map[uint64]uint64, uids []uint64) error {
	var sb strings.Builder
	sb.WriteString("SELECT uid, MAX(seq) FROM offline_msg WHERE uid IN (")
	uidList(&sb, uids)
	sb.WriteString(") GROUP BY uid")
	rows, err := tx.QueryContext(ctx, sb.String())
	if err != nil {
		return fmt.Errorf("inbox: read max seq after collision: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var uid, max uint64
		if err := rows.Scan(&uid, &max); err != nil {
			return fmt.Errorf("inbox: scan max seq: %w", err)
		}
		if max > fence[uid] {
			fence[uid] = max
			w.raised.WithLabelValues(w.alloc.Name(), "pk_collision").Inc()
			if err := w.alloc.Raise(ctx, uid, max); err != nil {
				return fmt.Errorf("%w: inbox: raise allocator: %v", model.ErrUnavailable, err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("inbox: read max seq: %w", err)
	}
	return nil
}

// insertRows writes the rows; with more than one statement a savepoint makes
// a failed attempt leave nothing behind. Two shipped defects live here
// (ref/defect): inbox-row-dropped leaves some rows out (their entries are
// still returned), seq-reuse-after-rollback overwrites a row whose
// (uid, seq) is taken.
func insertRows(ctx context.Context, tx *sql.Tx, items []Item, seqs []uint64, chunk int, defects defect.Set) error {
	if defects.Has(defect.InboxRowDropped) {
		kept, keptSeqs := items[:0:0], seqs[:0:0]
		for i, it := range items {
			if !defect.Sampled(it.MsgID^it.UID<<20, 16) {
				kept, keptSeqs = append(kept, it), append(keptSeqs, seqs[i])
			}
		}
		items, seqs = kept, keptSeqs
		if len(items) == 0 {
			return nil
		}
	}
	multi := len(items) > chunk
	if multi {
		if _, err := tx.ExecContext(ctx, "SAVEPOINT inbox_insert"); err != nil {
			return fmt.Errorf("inbox: savepoint: %w", err)
		}
	}
	for start := 0; start < len(items); start += chunk {
		end := min(start+chunk, len(items))
		var sb strings.Builder
		sb.Grow(64 + (end-start)*96)
		sb.WriteString("INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES ")
		// A batch's items mostly share one created_at: it is formatted once
		// per distinct value, not once per row.
		var lastAt time.Time
		var lastAtText string
		for i := start; i < end; i++ {
			it := items[i]
			if i > start {
				sb.WriteByte(',')
			}
			sb.WriteByte('(')
			sqlin.Uint(&sb, it.UID)
			sb.WriteByte(',')
			sqlin.Uint(&sb, seqs[i])
			sb.WriteByte(',')
			sqlin.Uint(&sb, it.MsgID)
			sb.WriteByte(',')
			sqlin.Uint(&sb, it.ConvID)
			sb.WriteByte(',')
			sqlin.Uint(&sb, uint64(it.ConvType))
			sb.WriteByte(',')
			sqlin.Uint(&sb, it.SenderUID)
			sb.WriteString(",'")
			if i == start || !it.CreatedAt.Equal(lastAt) {
				lastAt, lastAtText = it.CreatedAt, it.CreatedAt.UTC().Format("2006-01-02 15:04:05.000")
			}
			sb.WriteString(lastAtText)
			sb.WriteString("')")
		}
		if defects.Has(defect.SeqReuse) {
			sb.WriteString(" ON DUPLICATE KEY UPDATE msg_id = VALUES(msg_id), conv_id = VALUES(conv_id), conv_type = VALUES(conv_type), sender_uid = VALUES(sender_uid), created_at = VALUES(created_at)")
		}
		if _, err := tx.ExecContext(ctx, sb.String()); err != nil {
			if multi {
				if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT inbox_insert"); rerr != nil {
					return fmt.Errorf("inbox: rollback to savepoint: %v (after %w)", rerr, err)
				}
			}
			return err
		}
	}
	if multi {
		if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT inbox_insert"); err != nil {
			return fmt.Errorf("inbox: release savepoint: %w", err)
		}
	}
	return nil
}

// maxRaiseSteps bounds the distinct per-uid increments one raiseFence
// UPDATE carries; a batch with more is raised by the upsert.
const maxRaiseSteps = 32

// raiseFence persists each uid's new top seq (uids ascending, tops
// parallel). The rows are locked by this
// transaction since lockFence read locked[uid], so each is raised by the
// difference top - locked in one UPDATE of the locked rows: the uids are
// grouped by that difference (almost always a few values: 1 for a uid with
// one new message) and each group is a constant IN list, which both MariaDB
// and MySQL evaluate by binary search, so the statement is O(rows · log)
// and touches existing rows only (no insert attempt per row as the upsert
// makes). A batch with more than maxRaiseSteps distinct differences uses the
// upsert (raiseFenceUpsert).
func raiseFence(ctx context.Context, tx *sql.Tx, uids, tops []uint64, locked map[uint64]uint64) error {
	if len(uids) == 0 {
		return nil
	}
	steps := map[uint64][]uint64{} // difference -> uids
	for i, u := range uids {
		old, ok := locked[u]
		if !ok || tops[i] <= old {
			return raiseFenceUpsert(ctx, tx, uids, tops)
		}
		steps[tops[i]-old] = append(steps[tops[i]-old], u)
	}
	if len(steps) > maxRaiseSteps {
		return raiseFenceUpsert(ctx, tx, uids, tops)
	}
	now := time.Now().UTC().Format("2006-01-02 15:04:05.000")
	var sb strings.Builder
	sb.Grow(96 + len(uids)*24)
	sb.WriteString("UPDATE seq_fence SET updated_at = '")
	sb.WriteString(now)
	sb.WriteString("', max_seq = max_seq + ")
	sqlin.StepCase(&sb, "uid", steps)
	sb.WriteString(" WHERE uid IN (")
	uidList(&sb, uids)
	sb.WriteString(")")
	res, err := tx.ExecContext(ctx, sb.String())
	if err != nil {
		return fmt.Errorf("inbox: raise seq_fence: %w", err)
	}
	// Every row is locked by this transaction and changes (difference >
	// 0), so each is matched and counted whatever CLIENT_FOUND_ROWS says.
	if n, err := res.RowsAffected(); err == nil && n != int64(len(uids)) {
		return fmt.Errorf("inbox: raise seq_fence: %d of %d locked rows updated", n, len(uids))
	}
	return nil
}

// raiseFenceUpsert persists each uid's new top seq with one upsert.
// ON DUPLICATE KEY UPDATE with VALUES() keeps it O(rows): MariaDB and MySQL
// 8 both run it (MySQL 8.0.20+ flags VALUES() as deprecated, with a warning
// only).
func raiseFenceUpsert(ctx context.Context, tx *sql.Tx, uids, tops []uint64) error {
	now := time.Now().UTC().Format("2006-01-02 15:04:05.000")
	var sb strings.Builder
	sb.Grow(64 + len(uids)*48)
	sb.WriteString("INSERT INTO seq_fence (uid, max_seq, updated_at) VALUES ")
	for i, u := range uids {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('(')
		sqlin.Uint(&sb, u)
		sb.WriteByte(',')
		sqlin.Uint(&sb, tops[i])
		sb.WriteString(",'")
		sb.WriteString(now)
		sb.WriteString("')")
	}
	sb.WriteString(" ON DUPLICATE KEY UPDATE max_seq = GREATEST(max_seq, VALUES(max_seq)), updated_at = VALUES(updated_at)")
	if _, err := tx.ExecContext(ctx, sb.String()); err != nil {
		return fmt.Errorf("inbox: raise seq_fence: %w", err)
	}
	return nil
}
