package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"imlab/ref/model"
	"imlab/ref/rkeys"
)

// The per-message cache (seed 004, layer one): key rkeys.HistoryMsg(conv,
// seq), value "{v}|{json slot}", TTL Config.CacheTTL. It caches the whole
// shared slot (message and tags), never a projection, and only slots that
// hold a message or are purged: an empty slot may be filled any moment.
//
// Every mutation of a slot ($set revoke, $addToSet del_list, is_read)
// increments the slot's version v in the same update; after the update the
// mutator reads the slot back and stores it. Every store goes through a
// compare-and-set that keeps the higher version, so a reader that fetched
// the slot before a revoke can never put the pre-revoke state back after
// the revoke's own store. A purged slot is stored with purgedVersion, above
// any real version, so it is final.
type cache struct {
	rdb  redis.UniversalClient
	keys rkeys.Keys
	ttl  time.Duration
}

const purgedVersion = int64(1) << 53 // exact in Lua's doubles

// casSource keeps the higher version: SET only if the key is absent or
// holds a lower version.
const casSource = `
local cur = redis.call('GET', KEYS[1])
if cur then
  local sep = string.find(cur, '|', 1, true)
  if sep then
    local cv = tonumber(string.sub(cur, 1, sep - 1))
    if cv and cv >= tonumber(ARGV[1]) then return 0 end
  end
end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[2], 'PX', ARGV[3])
return 1`

// get returns the cached slots among seqs (one MGET). An unreadable value is
// a miss.
func (c *cache) get(ctx context.Context, convID uint64, seqs []uint64) (map[uint64]Slot, error) {
	out := make(map[uint64]Slot)
	if c == nil || len(seqs) == 0 {
		return out, nil
	}
	keys := make([]string, len(seqs))
	for i, seq := range seqs {
		keys[i] = c.keys.HistoryMsg(convID, seq)
	}
	vals, err := c.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: history cache mget: %w", model.ErrUnavailable, err)
	}
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue
		}
		sl, ok := decodeCached(str)
		if !ok || sl.Seq != seqs[i] {
			continue
		}
		if sl.Msg != nil {
			sl.Msg.ConvID = convID
		}
		out[seqs[i]] = sl
	}
	return out, nil
}

func decodeCached(v string) (Slot, bool) {
	ver, body, ok := strings.Cut(v, "|")
	if !ok {
		return Slot{}, false
	}
	if _, err := strconv.ParseInt(ver, 10, 64); err != nil {
		return Slot{}, false
	}
	var sl Slot
	if err := json.Unmarshal([]byte(body), &sl); err != nil {
		return Slot{}, false
	}
	return sl, sl.State == SlotFilled || sl.State == SlotPurged
}

// put stores slots that hold a message or are purged, each keeping the
// higher version (one pipeline).
func (c *cache) put(ctx context.Context, convID uint64, slots []Slot) error {
	if c == nil {
		return nil
	}
	pipe := c.rdb.Pipeline()
	n := 0
	for _, sl := range slots {
		if sl.State == SlotEmpty {
			continue
		}
		ver := sl.Version
		if sl.State == SlotPurged {
			ver = purgedVersion
		}
		body, err := json.Marshal(sl)
		if err != nil {
			return fmt.Errorf("history cache encode: %w", err)
		}
		pipe.Eval(ctx, casSource, []string{c.keys.HistoryMsg(convID, sl.Seq)},
			strconv.FormatInt(ver, 10), string(body), strconv.FormatInt(c.ttl.Milliseconds(), 10))
		n++
	}
	if n == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("%w: history cache put: %w", model.ErrUnavailable, err)
	}
	return nil
}
