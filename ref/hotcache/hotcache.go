// Package hotcache owns the Redis hot layer of the read path (seed 000,
// "Redis 加速层"): the per-user inbox ZSet im:offline:inbox:{uid} (score =
// seq, member = msg_id, newest InboxKeep, InboxTTL), the per-message cache
// im:msg:{msg_id}, and the device cursor cache
// im:offline:cursor:{uid}:{did}.
//
// Redis is a cache here, never the truth: every answer this package gives is
// either provably equal to what MySQL would give or reported as a miss, and
// every Redis failure is a miss (counted), never a wrong answer. It must not
// read or write MySQL; ref/pull fills misses and calls Rebuild.
//
// # The inbox ZSet is a gap-free suffix
//
// Besides message members, a valid ZSet holds one member named "floor" whose
// score F says: every inbox seq in (F, top] is in the set (top = the set's
// highest score; F = top when it holds no message). Seqs have holes (the
// segment allocator), so coverage cannot be computed from seq arithmetic; F
// is what makes it decidable: a read after seq c is served from the set iff
// c >= F. The invariant is kept by three atomic Lua scripts:
//
//   - Committed appends entry e only when top == e.PrevSeq (the uid's highest
//     committed seq before e, exact because the write path commits a uid's
//     seqs in order under the seq_fence lock); any other gap deletes the key.
//     Appends never create a missing key. Re-applying an entry is a no-op.
//   - Trimming to the newest InboxKeep raises F to the highest removed seq.
//   - Rebuild writes a whole suffix read from MySQL (with its own F) and
//     only replaces a set that is older (lower top, or same top with a
//     higher floor).
//
// So the set can be behind the truth (a hook that never ran, a rebuild that
// raced a commit whose hook found no key), never wrong below its top. A
// page that reaches the top must therefore be checked against the fence
// (seq_fence.max_seq) by the caller before it may say "no more": ref/pull
// does that.
//
// Seqs and scores are exact up to 2^53 (Redis scores are doubles).
package hotcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"imlab/ref/defect"
	"imlab/ref/model"
	"imlab/ref/rkeys"
)

// MaxSeq is the highest seq a Redis score holds exactly.
const MaxSeq = 1 << 53

// Config tunes the cache.
type Config struct {
	// Defects are shipped defects enabled on purpose (ref/defect; empty
	// by default): the lab's negative controls.
	Defects defect.Set
	// InboxKeep is how many newest messages each inbox ZSet keeps (seed: 200).
	InboxKeep int
	// InboxTTL is the ZSet's TTL, refreshed by every append (seed: 7 days).
	InboxTTL time.Duration
	// CursorTTL is the cursor cache's TTL (seed: 1 day).
	CursorTTL time.Duration
	// MsgTTL is the per-message cache's TTL. Default 1 h, shorter than the
	// inbox's 7 d on purpose: a message body is the bulk of the memory (the
	// ZSet member is only the msg_id), recent messages are what devices pull,
	// and an expired body costs one primary-key lookup per message, not a
	// cache miss of the whole page.
	MsgTTL time.Duration
	// Timeout bounds each Redis round trip made by this package, so a slow
	// Redis turns into a miss rather than a slow pull.
	Timeout time.Duration
	// ErrorCooldown: after a Redis error the cache answers "miss" without
	// calling Redis for this long (counted as result="bypass"), so a dead
	// Redis costs one timeout per cooldown, not one per request. 0 disables.
	ErrorCooldown time.Duration
	// Logger receives cache errors (default slog.Default()).
	Logger *slog.Logger
}

// DefaultConfig returns the seed's values.
func DefaultConfig() Config {
	return Config{
		InboxKeep: 200,
		InboxTTL:  7 * 24 * time.Hour,
		CursorTTL: 24 * time.Hour,
		MsgTTL:    time.Hour,
		Timeout:   500 * time.Millisecond,

		ErrorCooldown: time.Second,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.InboxKeep < 1 || c.InboxKeep > 100000:
		return fmt.Errorf("%w: hotcache: InboxKeep must be in 1..100000", model.ErrInvalid)
	case c.InboxTTL < time.Second:
		return fmt.Errorf("%w: hotcache: InboxTTL must be >= 1s", model.ErrInvalid)
	case c.CursorTTL < time.Second:
		return fmt.Errorf("%w: hotcache: CursorTTL must be >= 1s", model.ErrInvalid)
	case c.MsgTTL < time.Second:
		return fmt.Errorf("%w: hotcache: MsgTTL must be >= 1s", model.ErrInvalid)
	case c.Timeout <= 0:
		return fmt.Errorf("%w: hotcache: Timeout must be > 0", model.ErrInvalid)
	case c.ErrorCooldown < 0:
		return fmt.Errorf("%w: hotcache: ErrorCooldown must be >= 0", model.ErrInvalid)
	}
	return nil
}

// Cache is the hot layer. It is safe for concurrent use and holds no
// goroutines.
type Cache struct {
	rdb  redis.UniversalClient
	keys rkeys.Keys
	cfg  Config
	log  *slog.Logger
	reqs *prometheus.CounterVec // imlab_cache_requests_total{cache,result}

	downUntil atomic.Int64 // unix ns; Redis is skipped until then
}

// errBypass is returned while the cache skips Redis after an error.
var errBypass = fmt.Errorf("%w: hotcache: redis recently failed, bypassed", model.ErrUnavailable)

// Available reports whether the cache calls Redis now (false during the
// cooldown after an error).
func (c *Cache) Available() bool { return time.Now().UnixNano() >= c.downUntil.Load() }

// bypass reports (and counts) whether cache should skip Redis now.
func (c *Cache) bypass(cache string) bool {
	if c.Available() {
		return false
	}
	c.count(cache, "bypass")
	return true
}

// Failed records a Redis failure seen by ctx's caller: unless the caller
// itself gave up, Redis is skipped for ErrorCooldown. ref/pull's rate limiter
// reports its own Redis errors here too.
func (c *Cache) Failed(ctx context.Context, err error) {
	if err == nil || errors.Is(err, redis.Nil) || ctx.Err() != nil && errors.Is(err, context.Canceled) || c.cfg.ErrorCooldown == 0 {
		return
	}
	c.downUntil.Store(time.Now().Add(c.cfg.ErrorCooldown).UnixNano())
}

// New builds a cache on rdb. reg may be nil (metrics then go nowhere).
func New(rdb redis.UniversalClient, keys rkeys.Keys, cfg Config, reg prometheus.Registerer) (*Cache, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: hotcache: nil redis client", model.ErrInvalid)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	reqs, err := CacheRequests(reg)
	if err != nil {
		return nil, err
	}
	return &Cache{rdb: rdb, keys: keys, cfg: cfg, log: cfg.Logger, reqs: reqs}, nil
}

// CacheRequests registers (or finds already registered) the shared counter
// imlab_cache_requests_total{cache,result} on reg. Labels used here: cache =
// inbox|msg|cursor|append|rebuild, result = hit|miss|uncovered|error|ok|
// broken|absent|kept. reg may be nil.
func CacheRequests(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "imlab_cache_requests_total",
		Help: "Hot cache requests by cache and result.",
	}, []string{"cache", "result"})
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
		return nil, fmt.Errorf("hotcache: register metrics: %w", err)
	}
	return c, nil
}

// Config returns the configuration in use.
func (c *Cache) Config() Config { return c.cfg }

func (c *Cache) count(cache, result string) { c.reqs.WithLabelValues(cache, result).Inc() }

func (c *Cache) tctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.Timeout)
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }

// Committed is the write path's hook: after a COMMIT, append each uid's new
// entries (seq order, PrevSeq set) to its ZSet under the chain rule and cache
// the message bodies. It never returns an error: a failure is logged and
// counted, and the next pull of that uid falls back to MySQL.
func (c *Cache) Committed(ctx context.Context, entries []model.InboxEntry) {
	if len(entries) == 0 {
		return
	}
	if c.bypass("append") {
		return
	}
	groups := groupByUID(entries)
	ctx, cancel := c.tctx(ctx)
	defer cancel()

	pipe := c.rdb.Pipeline()
	seen := make(map[uint64]struct{}, len(entries))
	msgTTL := c.cfg.MsgTTL
	for _, e := range entries {
		if _, ok := seen[e.MsgID]; ok || e.Missing {
			continue
		}
		seen[e.MsgID] = struct{}{}
		pipe.Set(ctx, c.keys.Msg(e.MsgID), encodeMsg(e), msgTTL)
	}
	type call struct {
		uid  uint64
		args []any
		cmd  *redis.Cmd
	}
	calls := make([]call, 0, len(groups))
	ttl := c.cfg.InboxTTL.Milliseconds()
	for _, g := range groups {
		args := make([]any, 0, 2+3*len(g))
		args = append(args, c.cfg.InboxKeep, ttl)
		for _, e := range g {
			args = append(args, e.PrevSeq, e.Seq, u64(e.MsgID))
		}
		uid := g[0].UID
		calls = append(calls, call{uid: uid, args: args, cmd: appendScript.EvalSha(ctx, pipe, []string{c.keys.Inbox(uid)}, args...)})
	}
	_, _ = pipe.Exec(ctx)
	for i := range calls {
		cl := &calls[i]
		res, err := cl.cmd.Int64()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			res, err = appendScript.Run(ctx, c.rdb, []string{c.keys.Inbox(cl.uid)}, cl.args...).Int64()
		}
		switch {
		case err != nil:
			c.Failed(ctx, err)
			c.count("append", "error")
			c.log.Warn("hotcache: append failed", "uid", cl.uid, "err", err)
			// The set may now lag; it is behind, never wrong. Try to drop it so
			// that the next pull rebuilds rather than relying on the fence check.
			dctx, dcancel := c.tctx(context.WithoutCancel(ctx))
			_ = c.rdb.Del(dctx, c.keys.Inbox(cl.uid)).Err()
			dcancel()
		case res == -2:
			c.count("append", "absent")
		case res == -1:
			c.count("append", "broken")
		default:
			c.count("append", "ok")
		}
	}
}

// groupByUID splits entries per uid, each group sorted by seq (the write
// path already sends them so; sorting keeps a caller's mistake from being
// read as a broken chain).
func groupByUID(entries []model.InboxEntry) [][]model.InboxEntry {
	idx := make(map[uint64]int, 4)
	var groups [][]model.InboxEntry
	for _, e := range entries {
		i, ok := idx[e.UID]
		if !ok {
			i = len(groups)
			idx[e.UID] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], e)
	}
	for _, g := range groups {
		sort.SliceStable(g, func(a, b int) bool { return g[a].Seq < g[b].Seq })
	}
	return groups
}

// Ref is one ZSet member: an inbox seq and its msg_id.
type Ref struct {
	Seq   uint64
	MsgID uint64
}

// Span is what the ZSet says about a read after some seq.
type Span struct {
	// Present is false when the key is missing or not a valid cache.
	Present bool
	// Covered is true when after >= Floor: Refs are then exactly the inbox's
	// seqs in (after, ...] up to the set's top, at most the asked count.
	Covered bool
	Floor   uint64
	Top     uint64
	// Above counts the set's members with seq > after (covered only).
	Above int
	Refs  []Ref
}

// Span reads up to n members above after, with the floor and top, in one
// atomic step. A Redis error is returned (and counted); the caller treats it
// as a miss.
func (c *Cache) Span(ctx context.Context, uid, after uint64, n int) (Span, error) {
	if n < 0 {
		return Span{}, fmt.Errorf("%w: hotcache: negative count", model.ErrInvalid)
	}
	if c.bypass("inbox") {
		return Span{}, errBypass
	}
	ctx, cancel := c.tctx(ctx)
	defer cancel()
	raw, err := c.rangeScript().Run(ctx, c.rdb, []string{c.keys.Inbox(uid)}, after, n).Slice()
	return c.spanResult(ctx, raw, err, after)
}

func (c *Cache) SpanAlong(ctx context.Context, uid, after uint64, n int, queue func(context.Context, redis.Pipeliner)) (Span, error) {
	if n < 0 {
		return Span{}, fmt.Errorf("%w: hotcache: negative count", model.ErrInvalid)
	}
	if c.bypass("inbox") {
		return Span{}, errBypass
	}
	ctx, cancel := c.tctx(ctx)
	defer cancel()
	pipe := c.rdb.Pipeline()
	queue(ctx, pipe)
	keys := []string{c.keys.Inbox(uid)}
	script := c.rangeScript()
	cmd := script.EvalSha(ctx, pipe, keys, after, n)
	_, _ = pipe.Exec(ctx)
	raw, err := cmd.Slice()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		raw, err = script.Run(ctx, c.rdb, keys, after, n).Slice()
	}
	return c.spanResult(ctx, raw, err, after)
}

// rangeScript is the page read: the correct one, or the zset-short-page
// defect's.
func (c *Cache) rangeScript() *redis.Script {
	if c.cfg.Defects.Has(defect.ZSetShortPage) {
		return rangeNoFloorScript
	}
	return rangeScript
}

func (c *Cache) spanResult(ctx context.Context, raw []any, err error, after uint64) (Span, error) {
	if err != nil {
		c.Failed(ctx, err)
		c.count("inbox", "error")
		return Span{}, fmt.Errorf("%w: hotcache: inbox range: %v", model.ErrUnavailable, err)
	}
	sp, err := parseSpan(raw, after, c.cfg.Defects.Has(defect.ZSetShortPage))
	if err != nil {
		c.count("inbox", "error")
		return Span{}, err
	}
	switch {
	case !sp.Present:
		c.count("inbox", "miss")
	case !sp.Covered:
		c.count("inbox", "uncovered")
	default:
		c.count("inbox", "hit")
	}
	return sp, nil
}

// parseSpan reads the range script's reply; ignoreFloor is the
// zset-short-page defect (a set that does not reach down to after is
// taken as covering it).
func parseSpan(raw []any, after uint64, ignoreFloor bool) (Span, error) {
	bad := func(what string) (Span, error) {
		return Span{}, fmt.Errorf("%w: hotcache: malformed range reply (%s)", model.ErrUnavailable, what)
	}
	if len(raw) == 0 {
		return bad("empty")
	}
	if f, _ := raw[0].(int64); f == 0 {
		return Span{}, nil
	}
	if len(raw) < 4 || (len(raw)-4)%2 != 0 {
		return bad("length")
	}
	var sp Span
	var err error
	sp.Present = true
	if sp.Floor, err = scoreOf(raw[1]); err != nil {
		return bad("floor")
	}
	if sp.Top, err = scoreOf(raw[2]); err != nil {
		return bad("top")
	}
	above, _ := raw[3].(int64)
	sp.Above = int(above)
	sp.Covered = after >= sp.Floor || ignoreFloor
	if !sp.Covered {
		return sp, nil
	}
	sp.Refs = make([]Ref, 0, (len(raw)-4)/2)
	for i := 4; i < len(raw); i += 2 {
		seq, err := scoreOf(raw[i])
		if err != nil {
			return bad("seq")
		}
		s, _ := raw[i+1].(string)
		id, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return bad("member")
		}
		sp.Refs = append(sp.Refs, Ref{Seq: seq, MsgID: id})
	}
	return sp, nil
}

func scoreOf(v any) (uint64, error) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return 0, errors.New("negative")
		}
		return uint64(x), nil
	case string:
		if n, err := strconv.ParseUint(x, 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(x, 64)
		if err != nil || f < 0 || f > MaxSeq || f != math.Trunc(f) {
			return 0, fmt.Errorf("bad score %q", x)
		}
		return uint64(f), nil
	}
	return 0, fmt.Errorf("bad score type %T", v)
}

// Range returns up to limit inbox entries with seq > afterSeq from the hot
// layer. covered is false (and entries nil) when the ZSet is missing, does
// not reach down to afterSeq (afterSeq < floor), or a message body is not
// cached; the caller then reads MySQL. A covered page ends at the ZSet's top,
// which may lag the truth: see the package comment.
func (c *Cache) Range(ctx context.Context, uid, afterSeq uint64, limit int) (entries []model.InboxEntry, covered bool, err error) {
	if limit < 1 {
		return nil, false, fmt.Errorf("%w: hotcache: limit must be >= 1", model.ErrInvalid)
	}
	sp, err := c.Span(ctx, uid, afterSeq, limit)
	if err != nil || !sp.Covered {
		return nil, false, err
	}
	entries, missing, err := c.Fill(ctx, uid, sp.Refs)
	if err != nil || len(missing) > 0 {
		return nil, false, err
	}
	return entries, true, nil
}

// Fill turns refs into entries from the per-message cache. missing lists the
// indexes of refs whose body is not cached (their entries hold Seq, MsgID and
// UID only); the caller reads those from MySQL and may SetMessages them.
func (c *Cache) Fill(ctx context.Context, uid uint64, refs []Ref) (entries []model.InboxEntry, missing []int, err error) {
	entries = make([]model.InboxEntry, len(refs))
	if len(refs) == 0 {
		return entries, nil, nil
	}
	if c.bypass("msg") {
		return nil, nil, errBypass
	}
	keys := make([]string, len(refs))
	for i, r := range refs {
		keys[i] = c.keys.Msg(r.MsgID)
	}
	ctx, cancel := c.tctx(ctx)
	defer cancel()
	vals, err := c.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		c.Failed(ctx, err)
		c.reqs.WithLabelValues("msg", "error").Add(float64(len(refs)))
		return nil, nil, fmt.Errorf("%w: hotcache: msg mget: %v", model.ErrUnavailable, err)
	}
	hits := 0
	for i, r := range refs {
		e := model.InboxEntry{UID: uid, Seq: r.Seq, MsgID: r.MsgID}
		s, ok := vals[i].(string)
		if ok && decodeMsg(s, &e) && e.MsgID == r.MsgID {
			hits++
		} else {
			e = model.InboxEntry{UID: uid, Seq: r.Seq, MsgID: r.MsgID}
			missing = append(missing, i)
		}
		entries[i] = e
	}
	if hits > 0 {
		c.reqs.WithLabelValues("msg", "hit").Add(float64(hits))
	}
	if len(missing) > 0 {
		c.reqs.WithLabelValues("msg", "miss").Add(float64(len(missing)))
	}
	return entries, missing, nil
}

// SetMessages caches message bodies (entries with Missing set are skipped).
// Errors are counted and returned; callers may ignore them.
func (c *Cache) SetMessages(ctx context.Context, entries []model.InboxEntry) error {
	if c.bypass("msg") {
		return errBypass
	}
	ctx, cancel := c.tctx(ctx)
	defer cancel()
	pipe := c.rdb.Pipeline()
	n := 0
	for _, e := range entries {
		if e.Missing {
			continue
		}
		pipe.Set(ctx, c.keys.Msg(e.MsgID), encodeMsg(e), c.cfg.MsgTTL)
		n++
	}
	if n == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		c.Failed(ctx, err)
		c.count("msg", "error")
		return fmt.Errorf("%w: hotcache: msg set: %v", model.ErrUnavailable, err)
	}
	return nil
}

// Rebuild writes uid's ZSet from newest, which must be the inbox's newest
// rows read from MySQL in one statement: all of them when the inbox has at
// most InboxKeep rows (the floor is then 0), else at least the newest
// InboxKeep (the floor is then the lowest given seq - 1, a safe bound with
// holes). Use RebuildFloor when the exact floor is known.
func (c *Cache) Rebuild(ctx context.Context, uid uint64, newest []model.InboxEntry) error {
	var floor uint64
	if len(newest) >= c.cfg.InboxKeep {
		lo := newest[0].Seq
		for _, e := range newest {
			lo = min(lo, e.Seq)
		}
		floor = lo - 1
	}
	return c.RebuildFloor(ctx, uid, newest, floor)
}

// RebuildFloor writes uid's ZSet from entries read from MySQL in one
// statement: entries must be every inbox row with seq > floor at that
// moment (any order). Only the newest InboxKeep are kept (the floor then
// rises to the highest dropped seq). The set is replaced only if the new
// data is at least as new as the set's (compare top, then floor); bodies are
// cached too.
func (c *Cache) RebuildFloor(ctx context.Context, uid uint64, entries []model.InboxEntry, floor uint64) error {
	sorted := make([]model.InboxEntry, len(entries))
	copy(sorted, entries)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Seq < sorted[j].Seq })
	for i, e := range sorted {
		if e.Seq <= floor || e.Seq > MaxSeq || (i > 0 && sorted[i-1].Seq == e.Seq) {
			return fmt.Errorf("%w: hotcache: rebuild entry seq %d not a set above floor %d", model.ErrInvalid, e.Seq, floor)
		}
	}
	if k := c.cfg.InboxKeep; len(sorted) > k {
		floor = sorted[len(sorted)-k-1].Seq
		sorted = sorted[len(sorted)-k:]
	}
	top := floor
	if len(sorted) > 0 {
		top = sorted[len(sorted)-1].Seq
	}
	args := make([]any, 0, 3+2*len(sorted))
	args = append(args, floor, c.cfg.InboxTTL.Milliseconds(), top)
	for _, e := range sorted {
		args = append(args, e.Seq, u64(e.MsgID))
	}
	if c.bypass("rebuild") {
		return errBypass
	}
	rctx, cancel := c.tctx(ctx)
	defer cancel()
	n, err := rebuildScript.Run(rctx, c.rdb, []string{c.keys.Inbox(uid)}, args...).Int64()
	if err != nil {
		c.Failed(rctx, err)
		c.count("rebuild", "error")
		return fmt.Errorf("%w: hotcache: rebuild: %v", model.ErrUnavailable, err)
	}
	if n == 1 {
		c.count("rebuild", "ok")
	} else {
		c.count("rebuild", "kept")
	}
	return c.SetMessages(ctx, sorted)
}

// Invalidate deletes uid's ZSet (the next pull rebuilds it).
func (c *Cache) Invalidate(ctx context.Context, uid uint64) error {
	ctx, cancel := c.tctx(ctx)
	defer cancel()
	if err := c.rdb.Del(ctx, c.keys.Inbox(uid)).Err(); err != nil {
		c.Failed(ctx, err)
		return fmt.Errorf("%w: hotcache: invalidate: %v", model.ErrUnavailable, err)
	}
	return nil
}

// GetCursor reads the cursor cache. ok is false on a miss.
func (c *Cache) GetCursor(ctx context.Context, uid uint64, did string) (seq uint64, ok bool, err error) {
	return c.GetCursorAlong(ctx, uid, did, nil)
}

// GetCursorAlong is GetCursor with the commands queue adds (ref/pull's rate
// limit) sent in the same pipeline, ahead of the read: one round trip for
// both. queue is not called when the cache is bypassed (then neither is
// sent); nil queues nothing.
func (c *Cache) GetCursorAlong(ctx context.Context, uid uint64, did string, queue func(context.Context, redis.Pipeliner)) (seq uint64, ok bool, err error) {
	if c.bypass("cursor") {
		return 0, false, errBypass
	}
	ctx, cancel := c.tctx(ctx)
	defer cancel()
	var s string
	if queue == nil {
		s, err = c.rdb.Get(ctx, c.keys.Cursor(uid, did)).Result()
	} else {
		pipe := c.rdb.Pipeline()
		queue(ctx, pipe)
		get := pipe.Get(ctx, c.keys.Cursor(uid, did))
		_, _ = pipe.Exec(ctx)
		s, err = get.Result()
	}
	return c.cursorResult(ctx, s, err)
}

// cursorResult reads a cursor GET's answer: a miss, a Redis failure (which
// starts the cooldown) or the seq.
func (c *Cache) cursorResult(ctx context.Context, s string, err error) (seq uint64, ok bool, _ error) {
	if errors.Is(err, redis.Nil) {
		c.count("cursor", "miss")
		return 0, false, nil
	}
	if err != nil {
		c.Failed(ctx, err)
		c.count("cursor", "error")
		return 0, false, fmt.Errorf("%w: hotcache: cursor get: %v", model.ErrUnavailable, err)
	}
	seq, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		c.count("cursor", "error")
		return 0, false, nil
	}
	c.count("cursor", "hit")
	return seq, true, nil
}

// SetCursor raises the cursor cache to seq (never lowers it) and refreshes
// its TTL. The cache may only hold values that MySQL holds (or held): callers
// write MySQL first.
func (c *Cache) SetCursor(ctx context.Context, uid uint64, did string, seq uint64) error {
	if c.bypass("cursor") {
		return errBypass
	}
	ctx, cancel := c.tctx(ctx)
	defer cancel()
	if err := maxSetScript.Run(ctx, c.rdb, []string{c.keys.Cursor(uid, did)}, seq, c.cfg.CursorTTL.Milliseconds()).Err(); err != nil {
		c.Failed(ctx, err)
		c.count("cursor", "error")
		return fmt.Errorf("%w: hotcache: cursor set: %v", model.ErrUnavailable, err)
	}
	return nil
}

// CursorValue is one device's cursor for SetCursors.
type CursorValue struct {
	UID uint64
	DID string
	Seq uint64
}

// SetCursors is SetCursor for many devices in one pipelined round trip
// (a script not loaded yet falls back to one SetCursor per device).
func (c *Cache) SetCursors(ctx context.Context, vs []CursorValue) error {
	if len(vs) == 0 {
		return nil
	}
	if c.bypass("cursor") {
		return errBypass
	}
	tctx, cancel := c.tctx(ctx)
	defer cancel()
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(vs))
	ttl := c.cfg.CursorTTL.Milliseconds()
	for i, v := range vs {
		cmds[i] = maxSetScript.EvalSha(tctx, pipe, []string{c.keys.Cursor(v.UID, v.DID)}, v.Seq, ttl)
	}
	_, _ = pipe.Exec(tctx)
	var firstErr error
	for i, cmd := range cmds {
		err := cmd.Err()
		if err == nil {
			continue
		}
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			err = c.SetCursor(ctx, vs[i].UID, vs[i].DID, vs[i].Seq)
		} else {
			c.Failed(ctx, err)
			c.count("cursor", "error")
			err = fmt.Errorf("%w: hotcache: cursor set: %v", model.ErrUnavailable, err)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// encodeMsg is the im:msg:{msg_id} value: message-level fields only (the
// per-recipient seq lives in the ZSet), "|"-separated, content last.
func encodeMsg(e model.InboxEntry) string {
	var b strings.Builder
	b.Grow(64 + len(e.Content))
	b.WriteString("1|")
	b.WriteString(u64(e.MsgID))
	b.WriteByte('|')
	b.WriteString(u64(e.ConvID))
	b.WriteByte('|')
	b.WriteString(strconv.Itoa(int(e.ConvType)))
	b.WriteByte('|')
	b.WriteString(u64(e.ConvSeq))
	b.WriteByte('|')
	b.WriteString(u64(e.SenderUID))
	b.WriteByte('|')
	b.WriteString(strconv.FormatInt(e.CreatedAt.UnixMilli(), 10))
	b.WriteByte('|')
	b.WriteString(e.Content)
	return b.String()
}

func decodeMsg(s string, e *model.InboxEntry) bool {
	var f [7]string
	for i := 0; i < 7; i++ {
		j := strings.IndexByte(s, '|')
		if j < 0 {
			return false
		}
		f[i], s = s[:j], s[j+1:]
	}
	if f[0] != "1" {
		return false
	}
	var n [6]uint64
	for i := 1; i < 7; i++ {
		if i == 6 {
			ms, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return false
			}
			e.CreatedAt = time.UnixMilli(ms).UTC()
			continue
		}
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return false
		}
		n[i-1] = v
	}
	if n[2] > 255 {
		return false
	}
	e.MsgID, e.ConvID, e.ConvType, e.ConvSeq, e.SenderUID = n[0], n[1], model.ConvType(n[2]), n[3], n[4]
	e.Content = s
	return true
}

// Client is the Redis client the cache uses (ref/pull's rate limiter shares it).
func (c *Cache) Client() redis.UniversalClient { return c.rdb }

// Keys is the key builder the cache uses.
func (c *Cache) Keys() rkeys.Keys { return c.keys }
