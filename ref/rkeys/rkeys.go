// Package rkeys names every Redis key the reference server uses, so that the
// key layout of seed 000 and seed 003 lives in one place and a namespace
// prefix (for tests and for several labs sharing one Redis) applies to all.
//
// It builds strings only; it must not talk to Redis.
package rkeys

import "strconv"

// Keys builds keys under an optional prefix ("" in production, so the keys
// are exactly the seed's: im:offline:seq:{uid} and so on).
type Keys struct {
	Prefix string
}

func (k Keys) p(s string) string { return k.Prefix + s }

func u(v uint64) string { return strconv.FormatUint(v, 10) }

// SeqCounter is the Redis INCR allocator's counter: im:offline:seq:{uid}.
func (k Keys) SeqCounter(uid uint64) string { return k.p("im:offline:seq:" + u(uid)) }

// Inbox is the hot ZSet (score=seq, member=msg_id): im:offline:inbox:{uid}.
func (k Keys) Inbox(uid uint64) string { return k.p("im:offline:inbox:" + u(uid)) }

// Cursor caches sync_cursor: im:offline:cursor:{uid}:{deviceID}.
func (k Keys) Cursor(uid uint64, did string) string {
	return k.p("im:offline:cursor:" + u(uid) + ":" + did)
}

// Msg caches one message body and metadata: im:msg:{msgID}.
func (k Keys) Msg(msgID uint64) string { return k.p("im:msg:" + u(msgID)) }

// MQDedup is the Redis SET NX dedup key of seed 003: im:mq:dedup:{msgID}:{uid}.
func (k Keys) MQDedup(msgID, uid uint64) string {
	return k.p("im:mq:dedup:" + u(msgID) + ":" + u(uid))
}

// RateLimit is the per-uid pull rate limiter's key.
func (k Keys) RateLimit(uid uint64) string { return k.p("im:ratelimit:pull:" + u(uid)) }

// HistoryMsg is the per-message history cache (seed 004): im:history:{convID}:{convSeq}.
func (k Keys) HistoryMsg(convID, convSeq uint64) string {
	return k.p("im:history:" + u(convID) + ":" + u(convSeq))
}

// Pattern is a SCAN pattern matching every key under the prefix.
func (k Keys) Pattern() string { return k.Prefix + "*" }

// PushChannel is the push bus's pub/sub channel of one shard:
// im:push:{shard} (shard = uid % shard count, chosen by ref/pushbus).
func (k Keys) PushChannel(shard int) string { return k.p("im:push:" + strconv.Itoa(shard)) }
