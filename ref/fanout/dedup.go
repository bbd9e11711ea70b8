package fanout

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"imlab/ref/defect"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/rkeys"
)

// Dedup strategy names (seed 003, keyed by (msg_id, uid): the recipient is
// part of the key, or a group message would reach only its first member).
const (
	DedupUK    = "uk_uid_msg" // the inbox's own unique key
	DedupTable = "mq_dedup"   // a dedup row in the same transaction as the inbox row
	DedupRedis = "redis"      // SET im:mq:dedup:{msg_id}:{uid} 1 NX EX 86400
)

// DedupTTL is the Redis mark's lifetime (seed 003: EX 86400).
const DedupTTL = 24 * time.Hour

// Strategy is a consumer-side idempotency strategy: an inbox.Dedup (run
// inside the inbox transaction, after the fence rows are locked) plus a step
// after COMMIT. Whatever it answers, the inbox's uk_uid_msg stays the final
// guard, so a strategy can only save work, never add a second row or seq.
//
// The order is what keeps a crash from losing a message: a mark is never
// set before the inbox row is durable. The mq_dedup row commits in the same
// transaction as the inbox row (both or neither); the Redis mark is only
// checked before and set after COMMIT, so a crash in between leaves no mark
// and the redelivery is caught by uk_uid_msg.
type Strategy interface {
	inbox.Dedup
	// AfterCommit runs once the items' inbox rows are committed.
	AfterCommit(ctx context.Context, items []inbox.Item) error
	// Skipped counts items this strategy recognised as already delivered.
	Skipped() int64
	// atInsert tells that the strategy's whole check is offline_msg's
	// uk_uid_msg: the inbox sink then leaves the lookup to the INSERT,
	// which checks that key anyway (inbox.Writer.WriteKeyCheckedTx: a 1062 on
	// uk_uid_msg looks the rows up then, drops them and writes the rest),
	// and counts the items the write dropped (skip).
	atInsert() bool
	skip(n int)
}

// StrategyDeps is what a strategy may need: Redis and its keys ("redis"
// only), the database pool (only a shipped defect of "mq_dedup" uses it,
// to write outside the inbox transaction) and the shipped defects.
type StrategyDeps struct {
	Redis   redis.UniversalClient
	Keys    rkeys.Keys
	DB      *sql.DB
	Defects defect.Set
}

// NewStrategy builds a strategy by name.
func NewStrategy(name string, d StrategyDeps) (Strategy, error) {
	switch name {
	case DedupUK:
		return &ukStrategy{}, nil
	case DedupTable:
		if d.Defects.Has(defect.MQDedupOutsideTx) && d.DB == nil {
			return nil, fmt.Errorf("%w: dedup %q with defect %s needs the database pool", model.ErrInvalid, name, defect.MQDedupOutsideTx)
		}
		return &tableStrategy{outside: outsideTx(d)}, nil
	case DedupRedis:
		if d.Redis == nil {
			return nil, fmt.Errorf("%w: dedup %q needs a Redis client", model.ErrInvalid, name)
		}
		return &redisStrategy{rdb: d.Redis, keys: d.Keys, claim: d.Defects.Has(defect.RedisDedupMarkBeforeCommit)}, nil
	}
	return nil, fmt.Errorf("%w: dedup strategy %q (want %s, %s or %s)", model.ErrInvalid, name, DedupUK, DedupTable, DedupRedis)
}

// ukStrategy is the inbox's own unique key. The inbox sink does not call
// Fresh: the INSERT finds the duplicates (atInsert), so a batch with none
// — the steady state — costs no lookup at all, and a redelivered one costs
// one refused INSERT and one lookup (its seq proposals are not used:
// inbox seqs may have holes, ref/hotcache). Fresh stays for other writers.
type ukStrategy struct{ skipped atomic.Int64 }

func (*ukStrategy) Name() string   { return DedupUK }
func (*ukStrategy) atInsert() bool { return true }
func (s *ukStrategy) skip(n int)   { s.skipped.Add(int64(n)) }

func (s *ukStrategy) Fresh(ctx context.Context, tx *sql.Tx, items []inbox.Item) ([]inbox.Item, error) {
	out, err := inbox.UKUidMsg{}.Fresh(ctx, tx, items)
	if err == nil {
		s.skipped.Add(int64(len(items) - len(out)))
	}
	return out, err
}

func (*ukStrategy) AfterCommit(context.Context, []inbox.Item) error { return nil }
func (s *ukStrategy) Skipped() int64                                { return s.skipped.Load() }

// tableStrategy is the mq_dedup table: look the pairs up, insert the new
// ones, all in the inbox transaction.
type tableStrategy struct {
	skipped atomic.Int64
	// outside is set by the shipped defect MQDedupOutsideTx only: the
	// dedup rows go through this pool, autocommitted, not through the
	// inbox transaction.
	outside *sql.DB
}

func outsideTx(d StrategyDeps) *sql.DB {
	if d.Defects.Has(defect.MQDedupOutsideTx) {
		return d.DB
	}
	return nil
}

func (*tableStrategy) Name() string   { return DedupTable }
func (*tableStrategy) atInsert() bool { return false }
func (*tableStrategy) skip(int)       {}

const dedupChunk = 500

type mpair struct{ msgID, uid uint64 }

func (s *tableStrategy) Fresh(ctx context.Context, tx *sql.Tx, items []inbox.Item) ([]inbox.Item, error) {
	seen := make(map[mpair]bool, len(items))
	for start := 0; start < len(items); start += dedupChunk {
		end := min(start+dedupChunk, len(items))
		var sb strings.Builder
		args := make([]any, 0, 2*(end-start))
		sb.WriteString("SELECT msg_id, uid FROM mq_dedup WHERE (msg_id, uid) IN (")
		for i := start; i < end; i++ {
			if i > start {
				sb.WriteByte(',')
			}
			sb.WriteString("(?,?)")
			args = append(args, items[i].MsgID, items[i].UID)
		}
		sb.WriteByte(')')
		rows, err := tx.QueryContext(ctx, sb.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("fanout: mq_dedup lookup: %w", err)
		}
		for rows.Next() {
			var p mpair
			if err := rows.Scan(&p.msgID, &p.uid); err != nil {
				rows.Close()
				return nil, fmt.Errorf("fanout: mq_dedup scan: %w", err)
			}
			seen[p] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("fanout: mq_dedup rows: %w", err)
		}
	}
	fresh := make([]inbox.Item, 0, len(items))
	for _, it := range items {
		if !seen[mpair{it.MsgID, it.UID}] {
			fresh = append(fresh, it)
		}
	}
	now := time.Now().UTC()
	for start := 0; start < len(fresh); start += dedupChunk {
		end := min(start+dedupChunk, len(fresh))
		var sb strings.Builder
		args := make([]any, 0, 3*(end-start))
		// IGNORE: a racing consumer (during a rebalance) may have inserted
		// the same pair; uk_uid_msg then drops its inbox row.
		sb.WriteString("INSERT IGNORE INTO mq_dedup (msg_id, uid, created_at) VALUES ")
		for i := start; i < end; i++ {
			if i > start {
				sb.WriteByte(',')
			}
			sb.WriteString("(?,?,?)")
			args = append(args, fresh[i].MsgID, fresh[i].UID, now)
		}
		var ex execer = tx
		if s.outside != nil {
			ex = s.outside // Defect: committed whatever the inbox transaction does.
		}
		if _, err := ex.ExecContext(ctx, sb.String(), args...); err != nil {
			return nil, fmt.Errorf("fanout: mq_dedup insert: %w", err)
		}
	}
	s.skipped.Add(int64(len(items) - len(fresh)))
	return fresh, nil
}

func (*tableStrategy) AfterCommit(context.Context, []inbox.Item) error { return nil }
func (s *tableStrategy) Skipped() int64                                { return s.skipped.Load() }

// redisStrategy checks marks before the transaction (inside Fresh, which
// only reads Redis) and sets them after COMMIT.
type redisStrategy struct {
	rdb     redis.UniversalClient
	keys    rkeys.Keys
	skipped atomic.Int64
	// claim is set by the shipped defect RedisDedupMarkBeforeCommit only:
	// Fresh checks with SET NX EX (setting the mark before COMMIT).
	claim bool
}

func (*redisStrategy) Name() string   { return DedupRedis }
func (*redisStrategy) atInsert() bool { return false }
func (*redisStrategy) skip(int)       {}

func (s *redisStrategy) Fresh(ctx context.Context, _ *sql.Tx, items []inbox.Item) ([]inbox.Item, error) {
	if s.claim {
		return s.claimFresh(ctx, items)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(items))
	for i, it := range items {
		cmds[i] = pipe.Exists(ctx, s.keys.MQDedup(it.MsgID, it.UID))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		// Redis down: no mark is trusted; uk_uid_msg still guards.
		return items, nil
	}
	fresh := make([]inbox.Item, 0, len(items))
	for i, it := range items {
		if cmds[i].Val() == 0 {
			fresh = append(fresh, it)
		}
	}
	s.skipped.Add(int64(len(items) - len(fresh)))
	return fresh, nil
}

// claimFresh is the shipped defect RedisDedupMarkBeforeCommit: SET NX EX
// is the check, so the mark exists before the inbox row is committed.
func (s *redisStrategy) claimFresh(ctx context.Context, items []inbox.Item) ([]inbox.Item, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.BoolCmd, len(items))
	for i, it := range items {
		cmds[i] = pipe.SetNX(ctx, s.keys.MQDedup(it.MsgID, it.UID), 1, DedupTTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return items, nil
	}
	fresh := make([]inbox.Item, 0, len(items))
	for i, it := range items {
		if cmds[i].Val() {
			fresh = append(fresh, it)
		}
	}
	s.skipped.Add(int64(len(items) - len(fresh)))
	return fresh, nil
}

// AfterCommit sets SET NX EX 86400 for every item whose row is committed.
func (s *redisStrategy) AfterCommit(ctx context.Context, items []inbox.Item) error {
	if len(items) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	for _, it := range items {
		pipe.SetNX(ctx, s.keys.MQDedup(it.MsgID, it.UID), 1, DedupTTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("fanout: redis dedup marks: %w", err)
	}
	return nil
}

func (s *redisStrategy) Skipped() int64 { return s.skipped.Load() }
