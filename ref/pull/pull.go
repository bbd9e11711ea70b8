// Package pull owns the read side of the inbox (seed 000): sync/pull by
// seq cursor (never OFFSET), conv/pull on idx_uid_conv, sync/ack with a
// monotonic cursor that can never pass what the device was served, the
// served high-water mark, the per-uid pull rate limit, and the explicit
// "latest N + unread summary" answer past the unread threshold.
//
// MySQL is the truth: sync_cursor (the cursor), sync_served (the highest
// seq returned to each device), offline_msg/msg_content (the inbox),
// seq_fence (the highest committed seq). The hot cache (ref/hotcache) answers
// pages it can prove equal to MySQL's; a page that reaches the cache's top is
// checked against seq_fence.max_seq before it may say "nothing more", so a
// cache that missed a hook (a crash between COMMIT and the hook) costs a
// MySQL read, never a message.
//
// Cursor writes (MarkServed, Ack, MarkServedAck, Register) are
// group-committed per uid shard: concurrent calls share one transaction
// (cursorbatch.go), so a crowd of acknowledging devices costs a few
// statements per batch instead of four autocommits per ack.
//
// A device is known to the store from its first contact: a pull (an empty
// page registers it with served_seq 0), a conversation pull, an ack, or a
// WebSocket upgrade (ref/api calls Register), each before it is answered.
// Retention (ref/retention) counts every known device, so the early
// deletion of a uid's rows waits for each of them.
//
// It must not write inbox rows, message bodies or the fence.
package pull

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"imlab/ref/defect"
	"imlab/ref/hotcache"
	"imlab/ref/model"
)

// Config tunes the read path. Every limit is enforced on input.
type Config struct {
	// Defects are shipped defects enabled on purpose (ref/defect; empty
	// by default): the lab's negative controls.
	Defects defect.Set
	// MaxLimit bounds sync/pull's limit (seed: 500).
	MaxLimit int
	// DefaultLimit is used when a caller passes limit 0.
	DefaultLimit int
	// MaxConvLimit bounds conv/pull's limit (seed: 50).
	MaxConvLimit int
	// DefaultConvLimit is used when ConvPull gets limit 0.
	DefaultConvLimit int
	// RateLimit is pulls (sync and conv together) per second per uid (seed: 5).
	RateLimit float64
	// RateBurst is how many pulls may go at once before the rate applies.
	RateBurst int
	// UnreadThreshold: past this many unread (seq > cursor) a pull without
	// full=true gets the truncated answer (seed: 100000).
	UnreadThreshold uint64
	// TruncatedLatest is how many newest messages a truncated answer holds
	// (seed: 500).
	TruncatedLatest int
	// SummaryMaxConvs bounds a truncated answer's summary (the conversations
	// with the newest unread first).
	SummaryMaxConvs int
	// CheckFence makes a cache page that reaches the ZSet's top compare the
	// top with seq_fence.max_seq (one primary-key read) before answering
	// "no more". Turning it off trades a bounded staleness after a lost hook
	// (until the uid's next commit) for that read.
	CheckFence bool
	// FenceCheckInterval lets a process skip that read when it verified the
	// same top for the same uid less than this long ago (0: read every
	// time). The price is bounded: a commit whose hook was lost (a crash
	// between COMMIT and the hook) becomes visible to cache readers at most
	// this much later; nothing is ever skipped.
	FenceCheckInterval time.Duration
	// FenceMemoMaxUIDs bounds that memo; when full it is cleared.
	FenceMemoMaxUIDs int
	// KnownDevicesMax bounds the memo of devices this process knows to
	// have a sync_served row (Register writes nothing for them); when full
	// it is cleared (the next Register of each writes a no-op upsert).
	KnownDevicesMax int
	// QueryTimeout bounds each MySQL statement.
	QueryTimeout time.Duration
	// RateLimitTimeout bounds the Redis rate-limit call; past it (or on a
	// Redis error) the local limiter decides.
	RateLimitTimeout time.Duration
	// LocalLimiterMaxUIDs bounds the local (fallback) limiter's memory; when
	// full it forgets every uid (fail open).
	LocalLimiterMaxUIDs int
	// CursorShards is the number of cursor-write queues (uid hash); each
	// commits its queued MarkServed/Ack calls as one transaction at a time
	// (cursorbatch.go).
	CursorShards int
	// CursorMaxBatch bounds the operations of one cursor transaction.
	CursorMaxBatch int
	// CursorMaxQueue bounds each cursor queue; past it a call fails with
	// ErrUnavailable.
	CursorMaxQueue int
	// Logger receives degraded-mode warnings (default slog.Default()).
	Logger *slog.Logger
}

// DefaultConfig returns the seed's values.
func DefaultConfig() Config {
	return Config{
		MaxLimit:            model.MaxPullLimit,
		DefaultLimit:        100,
		MaxConvLimit:        model.MaxConvPullLimit,
		DefaultConvLimit:    model.MaxConvPullLimit,
		RateLimit:           5,
		RateBurst:           10,
		UnreadThreshold:     100000,
		TruncatedLatest:     500,
		SummaryMaxConvs:     1000,
		CheckFence:          true,
		FenceCheckInterval:  time.Second,
		FenceMemoMaxUIDs:    100000,
		KnownDevicesMax:     100000,
		QueryTimeout:        10 * time.Second,
		RateLimitTimeout:    200 * time.Millisecond,
		LocalLimiterMaxUIDs: 100000,
		CursorShards:        2,
		CursorMaxBatch:      1000,
		CursorMaxQueue:      100000,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	bad := func(msg string) error { return fmt.Errorf("%w: pull: %s", model.ErrInvalid, msg) }
	switch {
	case c.MaxLimit < 1 || c.MaxLimit > 10000:
		return bad("MaxLimit must be in 1..10000")
	case c.DefaultLimit < 1 || c.DefaultLimit > c.MaxLimit:
		return bad("DefaultLimit must be in 1..MaxLimit")
	case c.MaxConvLimit < 1 || c.MaxConvLimit > 10000:
		return bad("MaxConvLimit must be in 1..10000")
	case c.DefaultConvLimit < 1 || c.DefaultConvLimit > c.MaxConvLimit:
		return bad("DefaultConvLimit must be in 1..MaxConvLimit")
	case !(c.RateLimit > 0) || c.RateLimit > 1e6:
		return bad("RateLimit must be in (0, 1e6]")
	case c.RateBurst < 1 || c.RateBurst > 1e6:
		return bad("RateBurst must be in 1..1e6")
	case c.UnreadThreshold < 1:
		return bad("UnreadThreshold must be >= 1")
	case c.TruncatedLatest < 1 || c.TruncatedLatest > 10000:
		return bad("TruncatedLatest must be in 1..10000")
	case c.SummaryMaxConvs < 1:
		return bad("SummaryMaxConvs must be >= 1")
	case c.QueryTimeout <= 0 || c.RateLimitTimeout <= 0:
		return bad("timeouts must be > 0")
	case c.LocalLimiterMaxUIDs < 1:
		return bad("LocalLimiterMaxUIDs must be >= 1")
	case c.FenceCheckInterval < 0 || c.FenceCheckInterval > time.Minute:
		return bad("FenceCheckInterval must be in [0, 1m]")
	case c.FenceMemoMaxUIDs < 1:
		return bad("FenceMemoMaxUIDs must be >= 1")
	case c.KnownDevicesMax < 1:
		return bad("KnownDevicesMax must be >= 1")
	case c.CursorShards < 1 || c.CursorShards > 256:
		return bad("CursorShards must be in 1..256")
	case c.CursorMaxBatch < 1 || c.CursorMaxBatch > 10000:
		return bad("CursorMaxBatch must be in 1..10000")
	case c.CursorMaxQueue < c.CursorMaxBatch:
		return bad("CursorMaxQueue must be >= CursorMaxBatch")
	}
	return nil
}

// Service is the read path. Safe for concurrent use; it owns no goroutines.
type Service struct {
	db      *sql.DB
	cache   *hotcache.Cache
	cfg     Config
	log     *slog.Logger
	latency *prometheus.HistogramVec // imlab_pull_latency_seconds{kind,source}
	reqs    *prometheus.CounterVec   // imlab_cache_requests_total{cache,result}
	limiter *limiter

	memoMu sync.Mutex
	memo   map[uint64]verified // uid -> last top seen equal to the fence

	knownMu sync.Mutex
	known   map[devKey]struct{} // devices with a sync_served row (Register)

	cursorShards  []*cursorShard
	cursorBatch   prometheus.Histogram // imlab_pull_cursor_batch_size
	cursorOps     prometheus.Counter   // imlab_pull_cursor_ops_total
	cursorRetries prometheus.Counter   // imlab_pull_cursor_retries_total
}

type verified struct {
	top uint64
	at  time.Time
}

// Latency label values.
const (
	KindSync = "sync"
	KindConv = "conv"
	KindAck  = "ack"

	SourceCache     = "cache"
	SourceMySQL     = "mysql"
	SourceTruncated = "truncated"
)

// New builds the service. cache may be nil (every read goes to MySQL and
// the rate limiter is local only); reg may be nil.
func New(db *sql.DB, cache *hotcache.Cache, cfg Config, reg prometheus.Registerer) (*Service, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: pull: nil db", model.ErrInvalid)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "imlab_pull_latency_seconds",
		Help:    "Read path latency by kind (sync, conv, ack) and source (cache, mysql, truncated).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	}, []string{"kind", "source"})
	if reg != nil {
		if err := reg.Register(latency); err != nil {
			return nil, fmt.Errorf("pull: register metrics: %w", err)
		}
	}
	reqs, err := hotcache.CacheRequests(reg)
	if err != nil {
		return nil, err
	}
	cursorBatch := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "imlab_pull_cursor_batch_size",
		Help:    "Cursor writes (MarkServed, Ack) per group-committed transaction.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	})
	cursorOps := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "imlab_pull_cursor_ops_total",
		Help: "Cursor writes (MarkServed, Ack) committed or refused in group-committed transactions.",
	})
	cursorRetries := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "imlab_pull_cursor_retries_total",
		Help: "Group-committed cursor transactions retried after a deadlock or lock wait timeout.",
	})
	if reg != nil {
		for _, c := range []prometheus.Collector{cursorBatch, cursorOps, cursorRetries} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("pull: register metrics: %w", err)
			}
		}
	}
	s := &Service{db: db, cache: cache, cfg: cfg, log: cfg.Logger, latency: latency, reqs: reqs, cursorBatch: cursorBatch, cursorOps: cursorOps, cursorRetries: cursorRetries}
	s.limiter = newLimiter(s)
	s.memo = make(map[uint64]verified)
	s.known = make(map[devKey]struct{})
	s.cursorShards = make([]*cursorShard, cfg.CursorShards)
	for i := range s.cursorShards {
		s.cursorShards[i] = &cursorShard{s: s}
	}
	return s, nil
}

// Config returns the configuration in use.
func (s *Service) Config() Config { return s.cfg }

func (s *Service) observe(kind, source string, start time.Time) {
	s.latency.WithLabelValues(kind, source).Observe(time.Since(start).Seconds())
}

func (s *Service) qctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.QueryTimeout)
}

func checkDevice(uid uint64, did string) error {
	if uid == 0 || uid > model.MaxUID {
		return fmt.Errorf("%w: uid must be in 1..%d", model.ErrInvalid, model.MaxUID)
	}
	if did == "" || len(did) > model.MaxDeviceIDLen {
		return fmt.Errorf("%w: device id must be 1..%d bytes", model.ErrInvalid, model.MaxDeviceIDLen)
	}
	return nil
}

func dbErr(what string, err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("pull: %s: %w", what, err)
	}
	return fmt.Errorf("%w: pull: %s: %v", model.ErrUnavailable, what, err)
}

// Pull answers one page of uid's inbox after cursor (nil: the device's
// stored cursor), at most limit entries (0: DefaultLimit). Past the unread
// threshold and without full it answers the newest TruncatedLatest entries
// and a per-conversation summary, with Truncated set. The served high-water
// mark is raised to the last returned seq before the page is returned.
func (s *Service) Pull(ctx context.Context, uid uint64, did string, cursor *uint64, limit int, full bool) (model.PullResult, error) {
	start := time.Now()
	if err := checkDevice(uid, did); err != nil {
		return model.PullResult{}, err
	}
	switch {
	case limit == 0:
		limit = s.cfg.DefaultLimit
	case limit < 0:
		return model.PullResult{}, fmt.Errorf("%w: limit must be >= 1", model.ErrInvalid)
	case limit > s.cfg.MaxLimit:
		return model.PullResult{}, fmt.Errorf("%w: limit %d exceeds the page limit %d", model.ErrInvalid, limit, s.cfg.MaxLimit)
	}
	cur, pre, spanDone, err := s.begin(ctx, uid, did, cursor, limit)
	if err != nil {
		return model.PullResult{}, err
	}
	res, fence, ok := s.fromCache(ctx, uid, cur, limit, full, pre, spanDone)
	if !ok {
		var err error
		res, err = s.fromMySQL(ctx, uid, cur, limit, full, fence)
		if err != nil {
			return model.PullResult{}, err
		}
	}
	if len(res.Msgs) > 0 {
		mark := s.MarkServed
		if s.cfg.Defects.Has(defect.CursorOnPull) {
			// Defect: the cursor moves when the page is served, as if the
			// device had acked it.
			mark = func(ctx context.Context, uid uint64, did string, seq uint64) error {
				_, err := s.MarkServedAck(ctx, uid, did, seq)
				return err
			}
		}
		if err := mark(ctx, uid, did, res.NextCursor); err != nil {
			return model.PullResult{}, err
		}
	} else if err := s.Register(ctx, uid, did); err != nil {
		// Served nothing: the device must still be known before it is
		// answered, or retention could delete its uid's next rows as soon
		// as the other devices pulled them.
		return model.PullResult{}, err
	}
	source := res.Source
	if res.Truncated {
		source = SourceTruncated
	}
	s.observe(KindSync, source, start)
	return res, nil
}

// fenceUnknown marks "seq_fence not read yet".
const fenceUnknown = ^uint64(0)

// begin is a pull's rate limit and where it starts: the given cursor, or
// the device's. Each takes one Redis round trip for the limit and the first
// read: with a cursor the ZSet's span (pre, spanDone; pre nil when the read
// failed), without one the cursor cache and, when it hits, the span after
// it (a miss reads MySQL, and the span is read apart).
func (s *Service) begin(ctx context.Context, uid uint64, did string, cursor *uint64, limit int) (cur uint64, pre *hotcache.Span, spanDone bool, err error) {
	now := time.Now()
	var rl *redis.Cmd
	switch {
	case cursor != nil && s.cache != nil && *cursor < hotcache.MaxSeq:
		cur = *cursor
		sp, serr := s.cache.SpanAlong(ctx, uid, cur, limit+1, s.limiter.queue(uid, now, &rl))
		if err := s.limiter.result(ctx, uid, now, rl); err != nil {
			return 0, nil, false, err
		}
		if serr == nil {
			pre = &sp
		}
		return cur, pre, true, nil
	case cursor == nil && s.cache != nil && !s.cache.ShortPageDefect():
		// The cursor cache and, when it hits, the span after it: one
		// round trip with the limit.
		cs, cerr := s.cache.CursorSpanAlong(ctx, uid, did, limit+1, s.limiter.queue(uid, now, &rl))
		if err := s.limiter.result(ctx, uid, now, rl); err != nil {
			return 0, nil, false, err
		}
		if cerr == nil && cs.Found {
			if cs.SpanErr == nil {
				pre = &cs.Span
			}
			return cs.Cursor, pre, true, nil
		}
		cur, err = s.storedCursor(ctx, uid, did)
		return cur, nil, false, err
	case cursor == nil && s.cache != nil:
		v, ok, cerr := s.cache.GetCursorAlong(ctx, uid, did, s.limiter.queue(uid, now, &rl))
		if err := s.limiter.result(ctx, uid, now, rl); err != nil {
			return 0, nil, false, err
		}
		if cerr == nil && ok {
			return v, nil, false, nil
		}
		cur, err = s.storedCursor(ctx, uid, did)
		return cur, nil, false, err
	}
	if err := s.limiter.allow(ctx, uid); err != nil {
		return 0, nil, false, err
	}
	if cursor != nil {
		return *cursor, nil, false, nil
	}
	cur, err = s.Cursor(ctx, uid, did)
	return cur, nil, false, err
}

// fromCache serves the page from the hot cache when it can prove it equal
// to MySQL's. It returns the fence if it read it (else fenceUnknown).
// pre is the span already read along with the rate limit (spanDone: that
// read was attempted; a nil pre then means it failed).
func (s *Service) fromCache(ctx context.Context, uid, cur uint64, limit int, full bool, pre *hotcache.Span, spanDone bool) (model.PullResult, uint64, bool) {
	fence := fenceUnknown
	if s.cache == nil || cur >= hotcache.MaxSeq || (spanDone && pre == nil) {
		return model.PullResult{}, fence, false
	}
	var sp hotcache.Span
	if pre != nil {
		sp = *pre
	} else {
		var err error
		if sp, err = s.cache.Span(ctx, uid, cur, limit+1); err != nil {
			return model.PullResult{}, fence, false
		}
	}
	if !sp.Covered {
		return model.PullResult{}, fence, false
	}
	if !full && uint64(sp.Above) > s.cfg.UnreadThreshold {
		return model.PullResult{}, fence, false
	}
	refs := sp.Refs
	hasMore := len(refs) > limit
	if hasMore {
		refs = refs[:limit]
	} else if s.cfg.CheckFence && !s.recentlyVerified(uid, sp.Top) {
		f, err := s.readFence(ctx, uid)
		if err != nil {
			return model.PullResult{}, fence, false
		}
		fence = f
		if f <= sp.Top {
			s.verified(uid, sp.Top)
		} else {
			// The set lags the truth (a hook not applied yet, or lost). What
			// it has is still exact from cur up: answer that with has_more;
			// with nothing to answer, read MySQL (which also rebuilds).
			if len(refs) == 0 {
				s.reqs.WithLabelValues("inbox", "stale").Inc()
				return model.PullResult{}, fence, false
			}
			s.reqs.WithLabelValues("inbox", "stale_partial").Inc()
			hasMore = true
		}
	}
	entries, missing, err := s.cache.Fill(ctx, uid, refs)
	if err != nil {
		return model.PullResult{}, fence, false
	}
	if len(missing) > 0 {
		seqs := make([]uint64, len(missing))
		for i, m := range missing {
			seqs[i] = entries[m].Seq
		}
		rows, err := s.rowsBySeq(ctx, uid, seqs)
		if err != nil {
			return model.PullResult{}, fence, false
		}
		filled := make([]model.InboxEntry, 0, len(missing))
		for _, m := range missing {
			e, ok := rows[entries[m].Seq]
			if !ok || e.MsgID != entries[m].MsgID {
				// The set names a row MySQL no longer has (retention) or
				// disagrees with it: drop the set and read MySQL.
				s.reqs.WithLabelValues("inbox", "disagrees").Inc()
				_ = s.cache.Invalidate(ctx, uid)
				return model.PullResult{}, fence, false
			}
			entries[m] = e
			filled = append(filled, e)
		}
		_ = s.cache.SetMessages(ctx, filled)
	}
	res := model.PullResult{Msgs: entries, HasMore: hasMore, NextCursor: cur, Source: SourceCache}
	if len(entries) > 0 {
		res.NextCursor = entries[len(entries)-1].Seq
	}
	return res, fence, true
}

func (s *Service) recentlyVerified(uid, top uint64) bool {
	if s.cfg.FenceCheckInterval == 0 {
		return false
	}
	s.memoMu.Lock()
	defer s.memoMu.Unlock()
	v, ok := s.memo[uid]
	return ok && v.top == top && time.Since(v.at) < s.cfg.FenceCheckInterval
}

func (s *Service) verified(uid, top uint64) {
	if s.cfg.FenceCheckInterval == 0 {
		return
	}
	s.memoMu.Lock()
	defer s.memoMu.Unlock()
	if _, ok := s.memo[uid]; !ok && len(s.memo) >= s.cfg.FenceMemoMaxUIDs {
		clear(s.memo)
	}
	s.memo[uid] = verified{top: top, at: time.Now()}
}

func (s *Service) fromMySQL(ctx context.Context, uid, cur uint64, limit int, full bool, fence uint64) (model.PullResult, error) {
	qctx, cancel := s.qctx(ctx)
	defer cancel()
	rows, err := s.db.QueryContext(qctx, selectEntries+` WHERE o.uid = ? AND o.seq > ? ORDER BY o.seq LIMIT ?`, uid, cur, limit+1)
	if err != nil {
		return model.PullResult{}, dbErr("pull query", err)
	}
	entries, err := scanEntries(rows, uid, limit+1)
	if err != nil {
		return model.PullResult{}, dbErr("pull scan", err)
	}
	hasMore := len(entries) > limit
	if !full {
		// Unread past the threshold? A page without more has len(entries)
		// unread; otherwise bound it by the fence, then count (bounded).
		over := uint64(len(entries)) > s.cfg.UnreadThreshold
		if hasMore && !over {
			if fence == fenceUnknown {
				if fence, err = s.readFence(ctx, uid); err != nil {
					return model.PullResult{}, err
				}
			}
			if fence > cur && fence-cur > s.cfg.UnreadThreshold {
				n, err := s.countAbove(ctx, uid, cur, s.cfg.UnreadThreshold+1)
				if err != nil {
					return model.PullResult{}, err
				}
				over = n > s.cfg.UnreadThreshold
			}
		}
		if over {
			return s.truncated(ctx, uid, cur)
		}
	}
	res := model.PullResult{HasMore: hasMore, NextCursor: cur, Source: SourceMySQL}
	if hasMore {
		entries = entries[:limit]
	} else {
		s.rebuild(ctx, uid, cur, entries, fence)
	}
	res.Msgs = entries
	if len(entries) > 0 {
		res.NextCursor = entries[len(entries)-1].Seq
	}
	return res, nil
}

// rebuild refills uid's ZSet after a MySQL page that reached the newest
// row: tail holds every row above cur (one statement), so (cur, top] is a
// valid suffix. When it is shorter than InboxKeep, the rows at or below cur
// are added (they are all committed: seqs commit in order per uid), so that
// other devices of the uid hit the cache too. An empty tail is used only
// when cur is known not to be above the fence (a cursor from the future
// would make a set whose top is above the truth).
func (s *Service) rebuild(ctx context.Context, uid, cur uint64, tail []model.InboxEntry, fence uint64) {
	if s.cache == nil || cur >= hotcache.MaxSeq {
		return
	}
	if len(tail) == 0 {
		if fence == fenceUnknown && s.cache.Available() {
			f, err := s.readFence(ctx, uid)
			if err != nil {
				return
			}
			fence = f
		}
		if fence == fenceUnknown || cur > fence {
			return
		}
	}
	floor := cur
	keep := s.cache.Config().InboxKeep
	rows := tail
	if len(tail) < keep && cur > 0 {
		qctx, cancel := s.qctx(ctx)
		defer cancel()
		need := keep - len(tail) + 1
		r, err := s.db.QueryContext(qctx, selectEntries+` WHERE o.uid = ? AND o.seq <= ? ORDER BY o.seq DESC LIMIT ?`, uid, cur, need)
		if err != nil {
			return
		}
		older, err := scanEntries(r, uid, need)
		if err != nil {
			return
		}
		floor = 0
		if len(older) == need {
			floor = older[need-1].Seq
			older = older[:need-1]
		}
		rows = make([]model.InboxEntry, 0, len(older)+len(tail))
		rows = append(rows, older...)
		rows = append(rows, tail...)
	}
	if err := s.cache.RebuildFloor(ctx, uid, rows, floor); err != nil {
		s.log.Debug("pull: cache rebuild failed", "uid", uid, "err", err)
	}
}

// truncated answers the newest TruncatedLatest entries above cur and the
// per-conversation unread summary, from one consistent snapshot.
func (s *Service) truncated(ctx context.Context, uid, cur uint64) (model.PullResult, error) {
	qctx, cancel := s.qctx(ctx)
	defer cancel()
	tx, err := s.db.BeginTx(qctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return model.PullResult{}, dbErr("truncated begin", err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(qctx, selectEntries+` WHERE o.uid = ? AND o.seq > ? ORDER BY o.seq DESC LIMIT ?`, uid, cur, s.cfg.TruncatedLatest)
	if err != nil {
		return model.PullResult{}, dbErr("truncated query", err)
	}
	entries, err := scanEntries(rows, uid, s.cfg.TruncatedLatest)
	if err != nil {
		return model.PullResult{}, dbErr("truncated scan", err)
	}
	for i, j := 0, len(entries)-1; i < j; i, j = i+1, j-1 {
		entries[i], entries[j] = entries[j], entries[i]
	}
	srows, err := tx.QueryContext(qctx, `SELECT conv_id, MIN(conv_type), COUNT(*), MIN(seq), MAX(seq)
		FROM offline_msg WHERE uid = ? AND seq > ? GROUP BY conv_id ORDER BY MAX(seq) DESC LIMIT ?`,
		uid, cur, s.cfg.SummaryMaxConvs)
	if err != nil {
		return model.PullResult{}, dbErr("summary query", err)
	}
	var summary []model.ConvSummary
	for srows.Next() {
		var c model.ConvSummary
		if err := srows.Scan(&c.ConvID, &c.ConvType, &c.Unread, &c.MinSeq, &c.MaxSeq); err != nil {
			srows.Close()
			return model.PullResult{}, dbErr("summary scan", err)
		}
		summary = append(summary, c)
	}
	if err := srows.Err(); err != nil {
		return model.PullResult{}, dbErr("summary rows", err)
	}
	srows.Close()
	if err := tx.Commit(); err != nil {
		return model.PullResult{}, dbErr("truncated commit", err)
	}
	res := model.PullResult{Msgs: entries, NextCursor: cur, Truncated: true, Summary: summary, Source: SourceMySQL}
	if len(entries) > 0 {
		res.NextCursor = entries[len(entries)-1].Seq
	}
	return res, nil
}

// selectEntries reads inbox rows joined with their bodies. created_at is the
// message's (msg_content), so the cache and MySQL answer the same bytes;
// the inbox row's own time is used only when the body is missing.
const selectEntries = `SELECT o.seq, o.msg_id, o.conv_id, o.conv_type, o.sender_uid,
	COALESCE(c.created_at, o.created_at), c.conv_seq, c.content
	FROM offline_msg o LEFT JOIN msg_content c ON c.msg_id = o.msg_id`

func scanEntries(rows *sql.Rows, uid uint64, capHint int) ([]model.InboxEntry, error) {
	defer rows.Close()
	out := make([]model.InboxEntry, 0, min(capHint, 512))
	for rows.Next() {
		var (
			e       model.InboxEntry
			convSeq sql.NullInt64
			content []byte
		)
		if err := rows.Scan(&e.Seq, &e.MsgID, &e.ConvID, &e.ConvType, &e.SenderUID, &e.CreatedAt, &convSeq, &content); err != nil {
			return nil, err
		}
		e.UID = uid
		e.CreatedAt = e.CreatedAt.UTC()
		if convSeq.Valid {
			e.ConvSeq = uint64(convSeq.Int64)
			e.Content = string(content)
		} else {
			e.Missing = true
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// rowsBySeq reads uid's inbox rows with the given seqs (primary key).
func (s *Service) rowsBySeq(ctx context.Context, uid uint64, seqs []uint64) (map[uint64]model.InboxEntry, error) {
	qctx, cancel := s.qctx(ctx)
	defer cancel()
	var b strings.Builder
	b.WriteString(selectEntries)
	b.WriteString(` WHERE o.uid = ? AND o.seq IN (`)
	args := make([]any, 0, 1+len(seqs))
	args = append(args, uid)
	for i, q := range seqs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('?')
		args = append(args, q)
	}
	b.WriteByte(')')
	rows, err := s.db.QueryContext(qctx, b.String(), args...)
	if err != nil {
		return nil, dbErr("rows by seq", err)
	}
	entries, err := scanEntries(rows, uid, len(seqs))
	if err != nil {
		return nil, dbErr("rows by seq scan", err)
	}
	out := make(map[uint64]model.InboxEntry, len(entries))
	for _, e := range entries {
		out[e.Seq] = e
	}
	return out, nil
}

// readFence is seq_fence.max_seq (0 when the uid never had a message).
func (s *Service) readFence(ctx context.Context, uid uint64) (uint64, error) {
	qctx, cancel := s.qctx(ctx)
	defer cancel()
	var f uint64
	err := s.db.QueryRowContext(qctx, `SELECT max_seq FROM seq_fence WHERE uid = ?`, uid).Scan(&f)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, dbErr("fence read", err)
	}
	return f, nil
}

// countAbove counts uid's rows with seq > cur, stopping at bound.
func (s *Service) countAbove(ctx context.Context, uid, cur, bound uint64) (uint64, error) {
	qctx, cancel := s.qctx(ctx)
	defer cancel()
	var n uint64
	err := s.db.QueryRowContext(qctx, `SELECT COUNT(*) FROM (SELECT 1 FROM offline_msg WHERE uid = ? AND seq > ? ORDER BY seq LIMIT ?) t`, uid, cur, bound).Scan(&n)
	if err != nil {
		return 0, dbErr("unread count", err)
	}
	return n, nil
}

// ConvPull answers one page of one conversation in uid's inbox: entries of
// convID with seq > cursor (inbox seq), at most limit (0: DefaultConvLimit,
// max MaxConvLimit). It does not raise the served mark nor touch the
// cursor: a conversation page is not the whole inbox below its last seq, so
// it must not let the device ack past other conversations' messages. It
// registers the device (Register).
func (s *Service) ConvPull(ctx context.Context, uid uint64, did string, convID, cursor uint64, limit int) (model.PullResult, error) {
	start := time.Now()
	if err := checkDevice(uid, did); err != nil {
		return model.PullResult{}, err
	}
	if _, _, _, err := model.ParseConvID(convID); err != nil {
		return model.PullResult{}, err
	}
	switch {
	case limit == 0:
		limit = s.cfg.DefaultConvLimit
	case limit < 0:
		return model.PullResult{}, fmt.Errorf("%w: limit must be >= 1", model.ErrInvalid)
	case limit > s.cfg.MaxConvLimit:
		return model.PullResult{}, fmt.Errorf("%w: limit %d exceeds the conversation page limit %d", model.ErrInvalid, limit, s.cfg.MaxConvLimit)
	}
	if err := s.limiter.allow(ctx, uid); err != nil {
		return model.PullResult{}, err
	}
	qctx, cancel := s.qctx(ctx)
	defer cancel()
	after := "o.seq > ?"
	if s.cfg.Defects.Has(defect.ConvPullCursorInclusive) {
		after = "o.seq >= ?" // the defect: the row at the cursor is read again
	}
	rows, err := s.db.QueryContext(qctx, selectEntries+` WHERE o.uid = ? AND o.conv_id = ? AND `+after+` ORDER BY o.seq LIMIT ?`, uid, convID, cursor, limit+1)
	if err != nil {
		return model.PullResult{}, dbErr("conv pull query", err)
	}
	entries, err := scanEntries(rows, uid, limit+1)
	if err != nil {
		return model.PullResult{}, dbErr("conv pull scan", err)
	}
	res := model.PullResult{HasMore: len(entries) > limit, NextCursor: cursor, Source: SourceMySQL}
	if res.HasMore {
		entries = entries[:limit]
	}
	res.Msgs = entries
	if len(entries) > 0 {
		res.NextCursor = entries[len(entries)-1].Seq
	}
	if len(entries) > 0 && s.cfg.Defects.Has(defect.ConvPullAcksCursor) {
		// The defect: reading a conversation counts as reading the inbox
		// up to its last row.
		if _, err := s.MarkServedAck(ctx, uid, did, res.NextCursor); err != nil {
			return model.PullResult{}, err
		}
	}
	// The device is known before it is answered (see Register).
	if err := s.Register(ctx, uid, did); err != nil {
		return model.PullResult{}, err
	}
	s.observe(KindConv, SourceMySQL, start)
	return res, nil
}

// MarkServed raises the device's served high-water mark to seq (GREATEST;
// never lowers it). Pull calls it for every non-empty page; the api layer
// calls it for seqs pushed over WebSocket before acking them.
func (s *Service) MarkServed(ctx context.Context, uid uint64, did string, seq uint64) error {
	if err := checkDevice(uid, did); err != nil {
		return err
	}
	if seq == 0 {
		return nil
	}
	if err := s.runCursorOp(ctx, &cursorOp{uid: uid, did: did, seq: seq, served: true}); err != nil {
		return err
	}
	s.markKnown(uid, did)
	return nil
}

// Register makes the device known to the store of record: a sync_served
// row (served_seq 0 when nothing was served yet) exists once it returns
// nil. Retention counts every such device (ref/retention), so from then on
// the early deletion of the uid's rows waits for this device's cursor.
// Pull (a page with nothing in it), ConvPull, Ack and the WebSocket upgrade
// (ref/api) call it; a page that serves something marks the device served,
// which registers it too. A device this process registered before costs
// nothing (a bounded memo, KnownDevicesMax).
func (s *Service) Register(ctx context.Context, uid uint64, did string) error {
	if err := checkDevice(uid, did); err != nil {
		return err
	}
	if s.isKnown(uid, did) {
		return nil
	}
	if err := s.runCursorOp(ctx, &cursorOp{uid: uid, did: did, register: true}); err != nil {
		return err
	}
	s.markKnown(uid, did)
	return nil
}

func (s *Service) isKnown(uid uint64, did string) bool {
	s.knownMu.Lock()
	defer s.knownMu.Unlock()
	_, ok := s.known[devKey{uid, did}]
	return ok
}

func (s *Service) markKnown(uid uint64, did string) {
	s.knownMu.Lock()
	defer s.knownMu.Unlock()
	k := devKey{uid, did}
	if _, ok := s.known[k]; !ok && len(s.known) >= s.cfg.KnownDevicesMax {
		clear(s.known)
	}
	s.known[k] = struct{}{}
}

// Served is the device's served high-water mark (0 if never served).
func (s *Service) Served(ctx context.Context, uid uint64, did string) (uint64, error) {
	if err := checkDevice(uid, did); err != nil {
		return 0, err
	}
	qctx, cancel := s.qctx(ctx)
	defer cancel()
	var v uint64
	err := s.db.QueryRowContext(qctx, `SELECT served_seq FROM sync_served WHERE uid = ? AND device_id = ?`, uid, did).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, dbErr("served read", err)
	}
	return v, nil
}

// Ack advances the device's cursor to pullSeq (GREATEST: an older ack
// arriving late changes nothing) and returns the stored cursor, which is >=
// pullSeq. An ack beyond the device's served mark is refused with
// ErrCursorAhead and changes nothing.
func (s *Service) Ack(ctx context.Context, uid uint64, did string, pullSeq uint64) (uint64, error) {
	start := time.Now()
	if err := checkDevice(uid, did); err != nil {
		return 0, err
	}
	return s.ack(ctx, start, &cursorOp{uid: uid, did: did, seq: pullSeq, ack: true, register: !s.isKnown(uid, did)})
}

// MarkServedAck is MarkServed(seq) then Ack(seq) in one cursor write: for
// seqs the device was pushed (not served by a pull) and now acknowledges.
func (s *Service) MarkServedAck(ctx context.Context, uid uint64, did string, seq uint64) (uint64, error) {
	start := time.Now()
	if err := checkDevice(uid, did); err != nil {
		return 0, err
	}
	return s.ack(ctx, start, &cursorOp{uid: uid, did: did, seq: seq, served: seq > 0, ack: true, register: !s.isKnown(uid, did)})
}

func (s *Service) ack(ctx context.Context, start time.Time, op *cursorOp) (uint64, error) {
	if err := s.runCursorOp(ctx, op); err != nil {
		return 0, err
	}
	s.markKnown(op.uid, op.did)
	stored := op.stored
	s.observe(KindAck, SourceMySQL, start)
	return stored, nil
}

// Cursor is the device's stored cursor: the cache, else sync_cursor (0 when
// the device never acked).
func (s *Service) Cursor(ctx context.Context, uid uint64, did string) (uint64, error) {
	if err := checkDevice(uid, did); err != nil {
		return 0, err
	}
	if s.cache != nil {
		if v, ok, err := s.cache.GetCursor(ctx, uid, did); err == nil && ok {
			return v, nil
		}
	}
	return s.storedCursor(ctx, uid, did)
}

// storedCursor is Cursor after the cache missed: MySQL's cursor, put back
// into the cache.
func (s *Service) storedCursor(ctx context.Context, uid uint64, did string) (uint64, error) {
	v, err := s.dbCursor(ctx, uid, did)
	if err != nil {
		return 0, err
	}
	if s.cache != nil {
		_ = s.cache.SetCursor(ctx, uid, did, v)
	}
	return v, nil
}

func (s *Service) dbCursor(ctx context.Context, uid uint64, did string) (uint64, error) {
	qctx, cancel := s.qctx(ctx)
	defer cancel()
	var v uint64
	err := s.db.QueryRowContext(qctx, `SELECT pull_seq FROM sync_cursor WHERE uid = ? AND device_id = ?`, uid, did).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, dbErr("cursor read", err)
	}
	return v, nil
}
