package hotcache

import "github.com/redis/go-redis/v9"

// floorMember is the one non-message member of an inbox ZSet. Its score is
// the floor F: every inbox seq in (F, top] is a member of the ZSet. It has
// the lowest score of the set (every message member is > F), so it is always
// rank 0. A key without it is not a valid cache (missing or foreign) and is
// never read from. Message members are decimal msg_ids, so "floor" cannot
// collide with one.
const floorMember = "floor"

// appendScript applies one uid's committed entries, in seq order, under the
// chain rule. KEYS[1] = inbox key. ARGV[1] = keep, ARGV[2] = ttl ms, then
// triples (prev_seq, seq, msg_id).
//
//   - a missing key (no floor member) is never created: return -2;
//   - seq > top and prev == top: ZADD (after checking the member is not
//     already present at another score, which would move it and open a hole);
//   - seq > top and prev != top: a link is missing: DEL, return -1;
//   - seq <= floor: below the cached suffix, nothing to do;
//   - floor < seq <= top: already applied (the member must be there with
//     this score, else the set disagrees with the truth: DEL, return -1).
//
// Scores are passed to ZADD as the caller's strings (Lua would format a
// number with 14 significant digits). Then trim to the newest keep messages, raising the floor to the highest
// removed seq, and refresh the TTL. Returns the number of members added.
var appendScript = redis.NewScript(`
local key = KEYS[1]
local fl = redis.call('ZSCORE', key, 'floor')
if not fl then return -2 end
fl = tonumber(fl)
local t = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local top = tonumber(t[2])
local keep = tonumber(ARGV[1])
local added = 0
for i = 3, #ARGV, 3 do
  local prev = tonumber(ARGV[i])
  local seqs = ARGV[i+1]
  local seq = tonumber(seqs)
  local m = ARGV[i+2]
  if seq > top then
    if prev ~= top then
      redis.call('DEL', key)
      return -1
    end
    if redis.call('ZSCORE', key, m) then
      redis.call('DEL', key)
      return -1
    end
    redis.call('ZADD', key, seqs, m)
    top = seq
    added = added + 1
  elseif seq > fl then
    local s = redis.call('ZSCORE', key, m)
    if (not s) or tonumber(s) ~= seq then
      redis.call('DEL', key)
      return -1
    end
  end
end
local n = redis.call('ZCARD', key) - 1
if n > keep then
  local cut = n - keep
  local r = redis.call('ZRANGE', key, cut, cut, 'WITHSCORES')
  redis.call('ZREMRANGEBYRANK', key, 1, cut)
  redis.call('ZADD', key, r[2], 'floor')
end
redis.call('PEXPIRE', key, ARGV[2])
return added
`)

// rangeScript reads one page atomically with the floor that decides whether
// it may be trusted. KEYS[1] = inbox key, ARGV[1] = after seq, ARGV[2] =
// max members to return.
//
// Returns {0} when the key is missing or has no floor, else
// {1, floor, top, count_above_after, seq1, msg1, seq2, msg2, ...}; members
// are returned only when after >= floor (covered).
var rangeScript = redis.NewScript(`
local key = KEYS[1]
local fl = redis.call('ZSCORE', key, 'floor')
if not fl then return {0} end
local t = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local after = tonumber(ARGV[1])
local out = {1, fl, t[2], 0}
if tonumber(fl) > after then return out end
out[4] = redis.call('ZCOUNT', key, '(' .. ARGV[1], '+inf')
local r = redis.call('ZRANGEBYSCORE', key, '(' .. ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #r, 2 do
  out[#out+1] = r[i+1]
  out[#out+1] = r[i]
end
return out
`)

// rangeNoFloorScript is rangeScript with the zset-short-page defect
// (ref/defect): it does not stop at a floor above after, so it returns the
// set's members above after although the set does not reach down to it
// (the floor member itself left out).
var rangeNoFloorScript = redis.NewScript(`
local key = KEYS[1]
local fl = redis.call('ZSCORE', key, 'floor')
if not fl then return {0} end
local t = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local out = {1, fl, t[2], 0}
out[4] = redis.call('ZCOUNT', key, '(' .. ARGV[1], '+inf')
local r = redis.call('ZRANGEBYSCORE', key, '(' .. ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]) + 1)
local n = 0
for i = 1, #r, 2 do
  if r[i] ~= 'floor' and n < tonumber(ARGV[2]) then
    out[#out+1] = r[i+1]
    out[#out+1] = r[i]
    n = n + 1
  end
end
return out
`)

// rebuildScript replaces the ZSet with a suffix read from the truth, but only
// if that suffix is at least as new as what is there. KEYS[1] = inbox key,
// ARGV[1] = floor, ARGV[2] = ttl ms, ARGV[3] = top of the new data, then
// pairs (seq, msg_id) ascending.
//
// An existing valid set wins when its top is higher, or equal with a floor
// at most the new one (it covers at least as much). Returns 1 when written,
// 0 when the existing set was kept.
var rebuildScript = redis.NewScript(`
local key = KEYS[1]
local fl = redis.call('ZSCORE', key, 'floor')
local newfl = tonumber(ARGV[1])
local newtop = tonumber(ARGV[3])
if fl then
  local t = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local top = tonumber(t[2])
  if top > newtop or (top == newtop and tonumber(fl) <= newfl) then
    return 0
  end
end
redis.call('DEL', key)
redis.call('ZADD', key, ARGV[1], 'floor')
for i = 4, #ARGV, 2 do
  redis.call('ZADD', key, ARGV[i], ARGV[i+1])
end
redis.call('PEXPIRE', key, ARGV[2])
return 1
`)

// maxSetScript sets a numeric string key to ARGV[1] unless it already holds
// a higher value, and refreshes its TTL (ARGV[2] ms). Returns the stored value.
var maxSetScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur and tonumber(cur) >= tonumber(ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return cur
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ARGV[1]
`)
