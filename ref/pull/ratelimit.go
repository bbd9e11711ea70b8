package pull

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"imlab/ref/model"
)

// gcraScript is a GCRA limiter (one key per uid holding the theoretical
// arrival time, microseconds). KEYS[1] = im:ratelimit:pull:{uid}; ARGV[1] =
// now µs, ARGV[2] = emission interval µs, ARGV[3] = burst. Returns 0 when
// allowed, else how many µs to wait.
var gcraScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then tat = now end
local newtat = tat + interval
local allowAt = newtat - burst * interval
if now < allowAt then return math.ceil(allowAt - now) end
redis.call('SET', KEYS[1], string.format('%.0f', newtat), 'PX', math.ceil((newtat - now) / 1000) + 1)
return 0
`)

// limiter enforces RateLimit/RateBurst per uid across api processes through
// Redis; when Redis fails it fails open to a per-process limiter (same
// rule, local state) and counts it (imlab_cache_requests_total{cache=
// "ratelimit",result="fallback"}).
type limiter struct {
	s        *Service
	interval time.Duration
	burst    int

	mu    sync.Mutex
	local map[uint64]time.Time // uid -> theoretical arrival time
}

func newLimiter(s *Service) *limiter {
	iv := time.Duration(float64(time.Second) / s.cfg.RateLimit)
	if iv < time.Microsecond {
		iv = time.Microsecond
	}
	return &limiter{s: s, interval: iv, burst: s.cfg.RateBurst, local: make(map[uint64]time.Time)}
}

func (l *limiter) args(uid uint64, now time.Time) ([]string, []any) {
	return []string{l.s.cache.Keys().RateLimit(uid)}, []any{now.UnixMicro(), l.interval.Microseconds(), l.burst}
}

func (l *limiter) allow(ctx context.Context, uid uint64) error {
	now := time.Now()
	if c := l.s.cache; c != nil && c.Available() {
		rctx, cancel := context.WithTimeout(ctx, l.s.cfg.RateLimitTimeout)
		keys, args := l.args(uid, now)
		wait, err := gcraScript.Run(rctx, c.Client(), keys, args...).Int64()
		cancel()
		return l.decide(ctx, uid, now, wait, err)
	}
	return l.decide(ctx, uid, now, 0, errNoRedis)
}

var errNoRedis = errors.New("no redis")

// queue adds the Redis check to pipe (see hotcache.SpanAlong); result then
// decides from the queued command.
func (l *limiter) queue(uid uint64, now time.Time, cmd **redis.Cmd) func(context.Context, redis.Pipeliner) {
	return func(ctx context.Context, pipe redis.Pipeliner) {
		keys, args := l.args(uid, now)
		*cmd = gcraScript.EvalSha(ctx, pipe, keys, args...)
	}
}

func (l *limiter) result(ctx context.Context, uid uint64, now time.Time, cmd *redis.Cmd) error {
	if cmd == nil { // the pipeline was not sent (cache bypassed)
		return l.decide(ctx, uid, now, 0, errNoRedis)
	}
	wait, err := cmd.Int64()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		return l.allow(ctx, uid)
	}
	return l.decide(ctx, uid, now, wait, err)
}

// decide turns the Redis answer into the verdict, falling back to the local
// limiter when Redis failed (or is not there).
func (l *limiter) decide(ctx context.Context, uid uint64, now time.Time, wait int64, err error) error {
	if err == nil {
		if wait > 0 {
			l.s.reqs.WithLabelValues("ratelimit", "limited").Inc()
			return &model.RateLimitError{RetryAfter: time.Duration(wait) * time.Microsecond}
		}
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if c := l.s.cache; c != nil {
		if err != errNoRedis {
			c.Failed(ctx, err)
			l.s.log.Warn("pull: rate limiter falls back to local", "err", err)
		}
		l.s.reqs.WithLabelValues("ratelimit", "fallback").Inc()
	}
	return l.allowLocal(uid, now)
}

func (l *limiter) allowLocal(uid uint64, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	tat, ok := l.local[uid]
	if !ok || tat.Before(now) {
		tat = now
	}
	newTat := tat.Add(l.interval)
	allowAt := newTat.Add(-time.Duration(l.burst) * l.interval)
	if now.Before(allowAt) {
		l.s.reqs.WithLabelValues("ratelimit", "limited").Inc()
		wait := allowAt.Sub(now)
		return &model.RateLimitError{RetryAfter: time.Duration(math.Max(float64(wait), float64(time.Millisecond)))}
	}
	if !ok && len(l.local) >= l.s.cfg.LocalLimiterMaxUIDs {
		clear(l.local)
	}
	l.local[uid] = newTat
	return nil
}
