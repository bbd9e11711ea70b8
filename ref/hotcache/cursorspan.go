package hotcache

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"imlab/ref/model"
)

// cursorSpanScript is the cursor cache's GET and, when it hits, rangeScript's
// read at that cursor, in one step. KEYS[1] = cursor key, KEYS[2] = inbox
// key, ARGV[1] = max members to return. Returns {} on a cursor miss, {cursor}
// when the cursor is not a number, else {cursor, <rangeScript's reply at
// after = cursor>}. The defect's variant
// (rangeNoFloorScript) has no twin here: with the zset-short-page defect
// the pull reads the cursor and the span apart (CursorSpanAlong is then not
// used).
var cursorSpanScript = redis.NewScript(`
local c = redis.call('GET', KEYS[1])
if not c then return {} end
local after = tonumber(c)
if not after then return {c} end
local key = KEYS[2]
local fl = redis.call('ZSCORE', key, 'floor')
if not fl then return {c, 0} end
local t = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local out = {c, 1, fl, t[2], 0}
if tonumber(fl) > after then return out end
out[5] = redis.call('ZCOUNT', key, '(' .. c, '+inf')
local r = redis.call('ZRANGEBYSCORE', key, '(' .. c, '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[1]))
for i = 1, #r, 2 do
  out[#out+1] = r[i+1]
  out[#out+1] = r[i]
end
return out
`)

// CursorSpan is what CursorSpanAlong read: the device's cached cursor and,
// when it was cached, the inbox span after it.
type CursorSpan struct {
	// Cursor is the cached cursor (0 when Found is false).
	Cursor uint64
	// Found is false on a cursor miss: the caller reads the cursor from
	// MySQL and the span apart, as before.
	Found bool
	// Span is the ZSet's read at after = Cursor (Found only).
	Span Span
	// SpanErr is why Span could not be read (Found only): the caller then
	// treats the span as a miss, as after a failed SpanAlong.
	SpanErr error
}

// CursorSpanAlong is GetCursorAlong and SpanAlong(after = the cursor it
// finds) in one round trip: a pull without a cursor (how most devices pull)
// learns where it starts and the page's span together, with the commands
// queue adds (ref/pull's rate limit) in the same pipeline. n is the span's
// member count (a page's limit + 1). It answers the cache's and the
// cursor's state exactly as the two calls would have, read in one atomic
// step. It is not for the zset-short-page defect (Has reports it: the
// caller then uses the two calls); err is a Redis failure of the cursor's
// read (the cooldown started), as GetCursorAlong's.
func (c *Cache) CursorSpanAlong(ctx context.Context, uid uint64, did string, n int, queue func(context.Context, redis.Pipeliner)) (CursorSpan, error) {
	if n < 0 {
		return CursorSpan{}, fmt.Errorf("%w: hotcache: negative count", model.ErrInvalid)
	}
	if c.bypass("cursor") {
		return CursorSpan{}, errBypass
	}
	tctx, cancel := c.tctx(ctx)
	defer cancel()
	keys := []string{c.keys.Cursor(uid, did), c.keys.Inbox(uid)}
	pipe := c.rdb.Pipeline()
	if queue != nil {
		queue(tctx, pipe)
	}
	cmd := cursorSpanScript.EvalSha(tctx, pipe, keys, n)
	_, _ = pipe.Exec(tctx)
	raw, err := cmd.Slice()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		raw, err = cursorSpanScript.Run(tctx, c.rdb, keys, n).Slice()
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		c.Failed(ctx, err)
		c.count("cursor", "error")
		return CursorSpan{}, fmt.Errorf("%w: hotcache: cursor and span: %v", model.ErrUnavailable, err)
	}
	if len(raw) == 0 {
		c.count("cursor", "miss")
		return CursorSpan{}, nil
	}
	s, _ := raw[0].(string)
	cur, perr := strconv.ParseUint(s, 10, 64)
	if perr != nil || len(raw) < 2 {
		c.count("cursor", "error")
		return CursorSpan{}, nil
	}
	c.count("cursor", "hit")
	out := CursorSpan{Cursor: cur, Found: true}
	out.Span, out.SpanErr = c.spanResult(ctx, raw[1:], nil, cur)
	return out, nil
}

// ShortPageDefect reports whether the zset-short-page defect is on (its
// range read has no CursorSpanAlong twin).
func (c *Cache) ShortPageDefect() bool { return c.rangeScript() != rangeScript }
