package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"imlab/ref/rkeys"
)

// Limits of the Redis faults.
const (
	// DefaultBatch is the SCAN COUNT and the most keys one UNLINK or one
	// rollback script touches, when a config leaves Batch 0.
	DefaultBatch = 500
	// MaxBatch bounds Batch.
	MaxBatch = 10_000
	// MaxPrefixLen bounds a key prefix.
	MaxPrefixLen = 256
)

// checkRedis refuses a nil client or one that talks to another machine.
func checkRedis(c *redis.Client) error {
	if c == nil {
		return fmt.Errorf("%w: nil redis client", ErrInvalid)
	}
	o := c.Options()
	if o.Network == "unix" {
		return nil
	}
	if err := checkLoopbackAddr(o.Addr); err != nil {
		return fmt.Errorf("chaos: redis %s: %w", o.Addr, err)
	}
	return nil
}

func checkBatch(b int) error {
	if b < 0 || b > MaxBatch {
		return fmt.Errorf("%w: batch %d outside [0,%d] (0 = %d)", ErrInvalid, b, MaxBatch, DefaultBatch)
	}
	return nil
}

func batchOr(b int) int {
	if b == 0 {
		return DefaultBatch
	}
	return b
}

// globEscape quotes the SCAN MATCH metacharacters of a literal prefix.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// scanBatches calls fn with the keys matching pattern that start with
// prefix, at most batch keys per call, until SCAN has covered the keyspace.
// Keys created during the scan may or may not be seen (SCAN's guarantee).
func scanBatches(ctx context.Context, c *redis.Client, pattern, prefix string, batch int, fn func([]string) error) error {
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, pattern, int64(batch)).Result()
		if err != nil {
			return fmt.Errorf("chaos: scan %s: %w", pattern, err)
		}
		kept := keys[:0]
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				kept = append(kept, k)
			}
		}
		for len(kept) > 0 {
			n := min(len(kept), batch)
			if err := fn(kept[:n]); err != nil {
				return err
			}
			kept = kept[n:]
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// RedisWipeConfig configures RedisWipe.
type RedisWipeConfig struct {
	Prefix        string // key prefix of the lab instance; "" means the whole server
	AllowFlushAll bool   // required for Prefix ""
	Batch         int    // SCAN COUNT and UNLINK size; 0 = DefaultBatch
}

// DefaultRedisWipeConfig wipes nothing until a Prefix is set.
func DefaultRedisWipeConfig() RedisWipeConfig { return RedisWipeConfig{Batch: DefaultBatch} }

// Validate checks the config.
func (c RedisWipeConfig) Validate() error {
	if c.Prefix == "" && !c.AllowFlushAll {
		return fmt.Errorf("%w: redis wipe with an empty prefix would FLUSHALL the server: set AllowFlushAll", ErrInvalid)
	}
	if len(c.Prefix) > MaxPrefixLen {
		return fmt.Errorf("%w: redis prefix of %d bytes, at most %d", ErrInvalid, len(c.Prefix), MaxPrefixLen)
	}
	return checkBatch(c.Batch)
}

type redisWipe struct {
	c        *redis.Client
	cfg      RedisWipeConfig
	affected atomic.Int64
}

// RedisWipe deletes every key under the Redis key prefix (SCAN MATCH
// prefix* COUNT n + UNLINK, in bounded batches), i.e. the whole hot layer,
// counters and cursors of that lab instance: seed 000's "Redis 整片丢失".
// Prefix "" means the whole server: refused unless cfg.AllowFlushAll (then
// FLUSHALL). One-shot (Heal is a no-op). Affected is the number of keys
// deleted.
func RedisWipe(c *redis.Client, cfg RedisWipeConfig) Fault { return &redisWipe{c: c, cfg: cfg} }

func (f *redisWipe) Name() string {
	if f.cfg.Prefix == "" {
		return "redis_flushall"
	}
	return "redis_wipe"
}

func (f *redisWipe) Validate() error {
	if err := f.cfg.Validate(); err != nil {
		return err
	}
	return checkRedis(f.c)
}

func (f *redisWipe) Affected() int64 { return f.affected.Load() }

func (f *redisWipe) Inject(ctx context.Context) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if f.cfg.Prefix == "" {
		n, err := f.c.DBSize(ctx).Result()
		if err != nil {
			return fmt.Errorf("chaos: redis dbsize: %w", err)
		}
		if err := f.c.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("chaos: redis flushall: %w", err)
		}
		f.affected.Store(n)
		return nil
	}
	var deleted int64
	err := scanBatches(ctx, f.c, globEscape(f.cfg.Prefix)+"*", f.cfg.Prefix, batchOr(f.cfg.Batch), func(keys []string) error {
		n, err := f.c.Unlink(ctx, keys...).Result()
		if err != nil {
			return fmt.Errorf("chaos: redis unlink: %w", err)
		}
		deleted += n
		return nil
	})
	f.affected.Store(deleted)
	if err != nil {
		return fmt.Errorf("chaos: redis wipe %q (%d keys deleted): %w", f.cfg.Prefix, deleted, err)
	}
	return nil
}

func (f *redisWipe) Heal(context.Context) error { return nil }

// RollbackConfig configures AllocatorRollback.
type RollbackConfig struct {
	Prefix string // key prefix of the lab instance (rkeys.Keys.Prefix); "" = the unprefixed layout
	By     int64  // how far each counter goes back (floor 0); <= 0 deletes the counters
	Batch  int    // SCAN COUNT and counters per script call; 0 = DefaultBatch
}

// DefaultRollbackConfig deletes the unprefixed counters (By 0: "reset").
func DefaultRollbackConfig() RollbackConfig { return RollbackConfig{Batch: DefaultBatch} }

// Validate checks the config.
func (c RollbackConfig) Validate() error {
	if len(c.Prefix) > MaxPrefixLen {
		return fmt.Errorf("%w: redis prefix of %d bytes, at most %d", ErrInvalid, len(c.Prefix), MaxPrefixLen)
	}
	return checkBatch(c.Batch)
}

// rollbackScript sets every KEYS counter back by ARGV[1], floor 0, keeping
// its TTL. All values are checked before any is changed, so a key that is
// not an integer counter fails the batch without touching it. Counters
// already <= 0 are left alone. It returns how many counters it set back.
var rollbackScript = redis.NewScript(`
local vals = {}
for i, k in ipairs(KEYS) do
  local v = redis.call('GET', k)
  if v then
    if not string.match(v, '^%-?%d+$') then
      return redis.error_reply('ERR ' .. k .. ' is not an integer counter')
    end
    vals[i] = v
  end
end
local changed = 0
for i, k in ipairs(KEYS) do
  local v = vals[i]
  if v and v ~= '0' and string.sub(v, 1, 1) ~= '-' then
    local n = redis.call('DECRBY', k, ARGV[1])
    if n < 0 then
      redis.call('SET', k, '0', 'KEEPTTL')
    end
    changed = changed + 1
  end
end
return changed
`)

type allocatorRollback struct {
	c        *redis.Client
	cfg      RollbackConfig
	affected atomic.Int64
}

// AllocatorRollback sets the Redis INCR seq counters (key layout of
// imlab/ref/rkeys: Keys{Prefix}.SeqCounter(uid), i.e.
// "{prefix}im:offline:seq:{uid}") back by By (never below 0), or deletes
// them when By <= 0 ("reset"), as a Redis failover that lost recent INCRs
// would. Affected reports how many counters it set back (or deleted).
// One-shot.
func AllocatorRollback(c *redis.Client, cfg RollbackConfig) Fault {
	return &allocatorRollback{c: c, cfg: cfg}
}

func (f *allocatorRollback) Name() string {
	if f.cfg.By <= 0 {
		return "allocator_reset"
	}
	return fmt.Sprintf("allocator_rollback(%d)", f.cfg.By)
}

func (f *allocatorRollback) Validate() error {
	if err := f.cfg.Validate(); err != nil {
		return err
	}
	return checkRedis(f.c)
}

func (f *allocatorRollback) Affected() int64 { return f.affected.Load() }

// seqCounterBase is the counter key without the uid.
func seqCounterBase(prefix string) string {
	return strings.TrimSuffix(rkeys.Keys{Prefix: prefix}.SeqCounter(0), "0")
}

// isUID reports whether s is a decimal uid (the rest of a counter key).
func isUID(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (f *allocatorRollback) Inject(ctx context.Context) error {
	if err := f.Validate(); err != nil {
		return err
	}
	base := seqCounterBase(f.cfg.Prefix)
	pattern, batch := globEscape(base)+"*", batchOr(f.cfg.Batch)
	counters := func(keys []string) []string {
		out := keys[:0]
		for _, k := range keys {
			if isUID(k[len(base):]) {
				out = append(out, k)
			}
		}
		return out
	}
	if f.cfg.By > 0 {
		// A first, read-only pass: a key that is not an integer counter
		// refuses the whole rollback before anything is changed.
		err := scanBatches(ctx, f.c, pattern, base, batch, func(keys []string) error {
			return checkCounters(ctx, f.c, counters(keys))
		})
		if err != nil {
			return fmt.Errorf("chaos: %s under %q refused, nothing changed: %w", f.Name(), f.cfg.Prefix, err)
		}
	}
	var changed int64
	err := scanBatches(ctx, f.c, pattern, base, batch, func(keys []string) error {
		counters := counters(keys)
		if len(counters) == 0 {
			return nil
		}
		if f.cfg.By <= 0 {
			n, err := f.c.Unlink(ctx, counters...).Result()
			if err != nil {
				return fmt.Errorf("chaos: redis unlink counters: %w", err)
			}
			changed += n
			return nil
		}
		n, err := rollbackScript.Run(ctx, f.c, counters, f.cfg.By).Int64()
		if err != nil {
			return fmt.Errorf("chaos: roll counters back: %w", err)
		}
		changed += n
		return nil
	})
	f.affected.Store(changed)
	if err != nil {
		return fmt.Errorf("chaos: %s under %q (%d counters changed): %w", f.Name(), f.cfg.Prefix, changed, err)
	}
	return nil
}

func (f *allocatorRollback) Heal(context.Context) error { return nil }

// checkCounters fails if one of keys holds something other than a decimal
// integer (a missing key is fine: it was deleted meanwhile).
func checkCounters(ctx context.Context, c *redis.Client, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	pipe := c.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.Get(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return fmt.Errorf("read counters: %w", err)
	}
	for i, g := range gets {
		v, err := g.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, keys[i], err)
		}
		if _, perr := strconv.ParseInt(v, 10, 64); perr != nil {
			return fmt.Errorf("%w: %s holds %q, not an integer counter", ErrInvalid, keys[i], v)
		}
	}
	return nil
}

func isWrongType(err error) bool { return strings.HasPrefix(err.Error(), "WRONGTYPE") }
