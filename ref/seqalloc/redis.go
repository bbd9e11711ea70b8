package seqalloc

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"imlab/ref/rkeys"
)

// raiseScript sets the counter to ARGV[1] if it is lower (or missing) and
// returns the value it had.
var raiseScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local floor = tonumber(ARGV[1])
if cur < floor then
  redis.call('SET', KEYS[1], ARGV[1])
end
return cur`)

// Redis allocates with INCRBY on im:offline:seq:{uid}. The counter is not
// durable (failover, FLUSHALL, restore can set it back); the fence covers it.
type Redis struct {
	rdb  redis.UniversalClient
	keys rkeys.Keys
	// counterPrefix is keys.SeqCounter(uid) without the uid, when the
	// layout is prefix+uid (NextMany then writes a batch's keys into one
	// string instead of building each apart); "" otherwise.
	counterPrefix string
}

// NewRedis returns a Redis allocator using keys for key names.
func NewRedis(rdb redis.UniversalClient, keys rkeys.Keys) *Redis {
	r := &Redis{rdb: rdb, keys: keys}
	if p, ok := strings.CutSuffix(keys.SeqCounter(1), "1"); ok && keys.SeqCounter(9876543210) == p+"9876543210" {
		r.counterPrefix = p
	}
	return r
}

// counterKeys is keys.SeqCounter of each uid, as substrings of one string.
func (r *Redis) counterKeys(uids []uint64) []string {
	keys := make([]string, len(uids))
	if r.counterPrefix == "" {
		for i, uid := range uids {
			keys[i] = r.keys.SeqCounter(uid)
		}
		return keys
	}
	buf := make([]byte, 0, len(uids)*(len(r.counterPrefix)+20))
	ends := make([]int, len(uids))
	for i, uid := range uids {
		buf = append(buf, r.counterPrefix...)
		buf = strconv.AppendUint(buf, uid, 10)
		ends[i] = len(buf)
	}
	all, start := string(buf), 0
	for i, end := range ends {
		keys[i], start = all[start:end], end
	}
	return keys
}

// Name implements Allocator.
func (r *Redis) Name() string { return "redis" }

// Next implements Allocator.
func (r *Redis) Next(ctx context.Context, uid uint64, n int) (uint64, error) {
	if err := checkArgs(uid, n); err != nil {
		return 0, err
	}
	last, err := r.rdb.IncrBy(ctx, r.keys.SeqCounter(uid), int64(n)).Result()
	if err != nil {
		return 0, fmt.Errorf("seqalloc: redis incrby uid %d: %w", uid, err)
	}
	if last < int64(n) {
		return 0, fmt.Errorf("seqalloc: redis counter of uid %d is %d after incrby %d (negative counter)", uid, last, n)
	}
	return uint64(last) - uint64(n) + 1, nil
}

// NextMany implements Allocator with one pipelined round trip.
func (r *Redis) NextMany(ctx context.Context, want map[uint64]int) (map[uint64]uint64, error) {
	if len(want) == 0 {
		return map[uint64]uint64{}, nil
	}
	uids := make([]uint64, 0, len(want))
	for uid, n := range want {
		if err := checkArgs(uid, n); err != nil {
			return nil, err
		}
		uids = append(uids, uid)
	}
	cmds := make([]*redis.IntCmd, len(uids))
	keys := r.counterKeys(uids)
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, uid := range uids {
			cmds[i] = p.IncrBy(ctx, keys[i], int64(want[uid]))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("seqalloc: redis pipelined incrby (%d uids): %w", len(uids), err)
	}
	out := make(map[uint64]uint64, len(uids))
	for i, uid := range uids {
		last, n := cmds[i].Val(), int64(want[uid])
		if last < n {
			return nil, fmt.Errorf("seqalloc: redis counter of uid %d is %d after incrby %d (negative counter)", uid, last, n)
		}
		out[uid] = uint64(last - n + 1)
	}
	return out, nil
}

// Raise implements Allocator: "set if lower", atomically in Lua.
func (r *Redis) Raise(ctx context.Context, uid uint64, floor uint64) error {
	if uid == 0 {
		return fmt.Errorf("%w (uid=0)", ErrBadCount)
	}
	if err := raiseScript.Run(ctx, r.rdb, []string{r.keys.SeqCounter(uid)}, floor).Err(); err != nil {
		return fmt.Errorf("seqalloc: redis raise uid %d to %d: %w", uid, floor, err)
	}
	return nil
}
