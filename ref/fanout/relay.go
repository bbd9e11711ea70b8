package fanout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/ref/model"
)

// RelayConfig configures the outbox relay.
type RelayConfig struct {
	// BatchSize bounds rows read and published per round.
	BatchSize int
	// IdleWait is how long the relay sleeps when there is nothing to
	// publish (Wake cuts it short).
	IdleWait time.Duration
	// ConfirmTimeout: a row published (status 1) and not confirmed by a
	// consumer (status 2) this long after its publish is set back to 0 and
	// published again (the queue lost it). Consumers are idempotent.
	ConfirmTimeout time.Duration
	// MaintainEvery is how often stale rows are requeued and confirmed rows
	// deleted.
	MaintainEvery time.Duration
	// CleanupBatch bounds rows deleted per statement.
	CleanupBatch int
	// BackoffMax caps the wait after a failed publish or a failed attempt
	// to open the lock connection (MySQL unreachable).
	BackoffMax time.Duration
	// LockName is the MySQL advisory lock that keeps one relay active (a
	// second relay waits as a standby): one scanner keeps (status, id)
	// order per shard key.
	LockName string
	Logger   *slog.Logger
}

// DefaultRelayConfig: 500 rows per round, 30 s confirm timeout.
func DefaultRelayConfig() RelayConfig {
	return RelayConfig{
		BatchSize: 500, IdleWait: 20 * time.Millisecond, ConfirmTimeout: 30 * time.Second,
		MaintainEvery: time.Second, CleanupBatch: 1000, BackoffMax: 2 * time.Second, LockName: "imlab_outbox_relay",
	}
}

// Validate checks the configuration.
func (c RelayConfig) Validate() error {
	switch {
	case c.BatchSize < 1 || c.BatchSize > 10_000:
		return fmt.Errorf("%w: relay batch size out of 1..10000", model.ErrInvalid)
	case c.IdleWait < time.Millisecond || c.IdleWait > 10*time.Second:
		return fmt.Errorf("%w: relay idle wait out of 1ms..10s", model.ErrInvalid)
	case c.ConfirmTimeout < 100*time.Millisecond:
		return fmt.Errorf("%w: relay confirm timeout below 100ms", model.ErrInvalid)
	case c.MaintainEvery < 10*time.Millisecond:
		return fmt.Errorf("%w: relay maintenance interval below 10ms", model.ErrInvalid)
	case c.CleanupBatch < 1 || c.CleanupBatch > 10_000:
		return fmt.Errorf("%w: relay cleanup batch out of 1..10000", model.ErrInvalid)
	case c.BackoffMax < time.Millisecond:
		return fmt.Errorf("%w: relay backoff", model.ErrInvalid)
	case c.LockName == "" || len(c.LockName) > 64:
		return fmt.Errorf("%w: relay lock name", model.ErrInvalid)
	}
	return nil
}

// RelayStats counts what one relay did.
type RelayStats struct {
	Published, Failed, Requeued, Deleted int64
	// LockLost counts the times the lock's session ended under this relay.
	LockLost int64
}

// Relay publishes mq_outbox rows (seed 003): it scans status 0 in (status,
// id) order, publishes each batch in order (one shard key keeps its
// relative order), marks the rows 1, and leaves status 2 to the consumers'
// confirmation. Rows stuck at 1 are published again after ConfirmTimeout;
// rows at 2 are deleted in small batches.
type Relay struct {
	cfg  RelayConfig
	db   *sql.DB
	prod *Producer
	m    *Metrics
	log  *slog.Logger
	wake chan struct{}

	mu    sync.Mutex
	stats RelayStats
	// marks are (time, highest id marked 1 by then): a row at status 1 with
	// an id at or below a mark older than ConfirmTimeout has waited at
	// least that long since its publish.
	marks []relayMark
}

type relayMark struct {
	at time.Time
	id uint64
}

// NewRelay builds a relay.
func NewRelay(cfg RelayConfig, db *sql.DB, prod *Producer, m *Metrics) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil || prod == nil {
		return nil, fmt.Errorf("%w: relay needs a database and a producer", model.ErrInvalid)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Relay{cfg: cfg, db: db, prod: prod, m: m, log: log.With("role", "relay"), wake: make(chan struct{}, 1)}, nil
}

// Wake nudges the relay (the outbox policy calls it after a commit).
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Stats returns the counters so far.
func (r *Relay) Stats() RelayStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// errLockLost: the session holding the relay lock ended (killed,
// network cut, server restart); MySQL released the lock with it.
var errLockLost = errors.New("fanout: relay lock session lost")

// Run takes the relay lock (waiting as a standby while another relay holds
// it) and relays until ctx is done. When the session holding the lock ends
// (the lock went with it, and a standby may hold it already) the relay
// stops publishing at its next check (every MaintainEvery) and goes back to
// waiting as a standby. It returns nil once ctx is done.
func (r *Relay) Run(ctx context.Context) error {
	for {
		conn, err := r.lock(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		err = r.relayHolding(ctx, conn)
		_, _ = conn.ExecContext(context.Background(), "SELECT RELEASE_LOCK(?)", r.cfg.LockName)
		conn.Close()
		if ctx.Err() != nil {
			return nil
		}
		r.log.Warn("relay lock lost; back to standby", "err", err)
		r.count(func(s *RelayStats) { s.LockLost++ })
	}
}

// relayHolding relays while conn holds the lock; it returns errLockLost
// when conn's session is gone, or nil when ctx is done.
func (r *Relay) relayHolding(ctx context.Context, conn *sql.Conn) error {
	// Rows a previous relay marked 1 count as published now.
	var top sql.NullInt64
	if err := r.db.QueryRowContext(ctx, "SELECT MAX(id) FROM mq_outbox WHERE status = 1").Scan(&top); err == nil && top.Valid {
		r.addMark(uint64(top.Int64))
	}
	lastMaint := time.Time{}
	fails := 0
	for ctx.Err() == nil {
		if time.Since(lastMaint) >= r.cfg.MaintainEvery {
			lastMaint = time.Now()
			// The lock's session must still be there: a lost session means
			// a standby may be relaying already.
			if err := conn.PingContext(ctx); err != nil && ctx.Err() == nil {
				return fmt.Errorf("%w: %w", errLockLost, err)
			}
			if err := r.Maintain(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("outbox maintenance failed", "err", err)
			}
		}
		n, err := r.PublishOnce(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			fails++
			d := r.backoff(fails)
			r.log.Warn("outbox publish failed", "err", err, "backoff", d)
			sleepCtx(ctx, d)
			continue
		}
		fails = 0
		if n < r.cfg.BatchSize {
			select {
			case <-ctx.Done():
			case <-r.wake:
			case <-time.After(r.cfg.IdleWait):
			}
		}
	}
	return nil
}

// backoff is the wait after the fails-th failure in a row (a publish, or
// opening the lock connection): 20 ms doubling, capped at BackoffMax.
func (r *Relay) backoff(fails int) time.Duration {
	return min(r.cfg.BackoffMax, time.Duration(1<<min(fails, 10))*10*time.Millisecond)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// lock waits until this relay holds the lock, and returns the connection
// whose session holds it. MySQL being unreachable (no connection can be
// opened) is waited out like another relay holding the lock: a relay that
// gave up here would leave the outbox unpublished after MySQL came back.
// Only ctx's end returns an error.
func (r *Relay) lock(ctx context.Context) (*sql.Conn, error) {
	fails := 0
	for {
		conn, err := r.db.Conn(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			fails++
			d := r.backoff(fails)
			r.log.Warn("relay lock connection", "err", err, "backoff", d)
			sleepCtx(ctx, d)
			continue
		}
		fails = 0
		var got sql.NullInt64
		err = conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 1)", r.cfg.LockName).Scan(&got)
		if err == nil && got.Valid && got.Int64 == 1 {
			return conn, nil
		}
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			r.log.Warn("relay lock", "err", err)
			sleepCtx(ctx, time.Second)
		}
	}
}

func (r *Relay) addMark(id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if n := len(r.marks); n > 0 && now.Sub(r.marks[n-1].at) < r.cfg.ConfirmTimeout/10 {
		r.marks[n-1].id = max(r.marks[n-1].id, id)
		return
	}
	r.marks = append(r.marks, relayMark{at: now, id: id})
	if len(r.marks) > 64 {
		r.marks = r.marks[len(r.marks)-64:]
	}
}

// staleBound is the highest id published at least ConfirmTimeout ago.
func (r *Relay) staleBound() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b uint64
	for _, m := range r.marks {
		if time.Since(m.at) >= r.cfg.ConfirmTimeout {
			b = max(b, m.id)
		}
	}
	return b
}

type outboxRow struct {
	id       uint64
	topic    string
	shardKey uint64
	payload  []byte
	created  time.Time
}

// PublishOnce publishes one batch of pending rows and marks them 1. It
// returns how many rows it published.
func (r *Relay) PublishOnce(ctx context.Context) (int, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT id, topic, shard_key, payload, created_at FROM mq_outbox
		WHERE status = 0 ORDER BY id LIMIT ?`, r.cfg.BatchSize)
	if err != nil {
		return 0, fmt.Errorf("fanout: scan outbox: %w", err)
	}
	var batch []outboxRow
	for rows.Next() {
		var o outboxRow
		if err := rows.Scan(&o.id, &o.topic, &o.shardKey, &o.payload, &o.created); err != nil {
			rows.Close()
			return 0, fmt.Errorf("fanout: scan outbox row: %w", err)
		}
		batch = append(batch, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("fanout: outbox rows: %w", err)
	}
	if len(batch) == 0 {
		return 0, nil
	}
	recs := make([]*kgo.Record, len(batch))
	ids := make([]any, len(batch))
	for i, o := range batch {
		ts := o.created
		if ev, err := UnmarshalEvent(o.payload); err == nil {
			ts = ev.SentAt
		}
		recs[i] = &kgo.Record{Topic: o.topic, Key: ShardKey(o.shardKey), Value: o.payload, Timestamp: ts,
			Headers: []kgo.RecordHeader{{Key: HeaderOutboxID, Value: []byte(strconv.FormatUint(o.id, 10))}}}
		ids[i] = o.id
	}
	in := "(" + placeholders(len(ids)) + ")"
	if err := r.prod.PublishSync(ctx, recs); err != nil {
		// Count the attempt on the rows (seed: retry counter), keep them at 0.
		if _, uerr := r.db.ExecContext(ctx, "UPDATE mq_outbox SET retry = retry + 1 WHERE id IN "+in, ids...); uerr != nil {
			r.log.Warn("outbox retry counter", "err", uerr)
		}
		r.count(func(s *RelayStats) { s.Failed += int64(len(batch)) })
		r.m.relay("failed", len(batch))
		return 0, err
	}
	// AND status = 0: a consumer may already have confirmed (2).
	if _, err := r.db.ExecContext(ctx, "UPDATE mq_outbox SET status = 1 WHERE status = 0 AND id IN "+in, ids...); err != nil {
		// Published but not marked: it is published again (idempotent consumers).
		return 0, fmt.Errorf("fanout: mark outbox published: %w", err)
	}
	r.addMark(batch[len(batch)-1].id)
	r.count(func(s *RelayStats) { s.Published += int64(len(batch)) })
	r.m.relay("published", len(batch))
	return len(batch), nil
}

func (r *Relay) count(f func(*RelayStats)) {
	r.mu.Lock()
	f(&r.stats)
	r.mu.Unlock()
}

// Maintain requeues rows published but unconfirmed past ConfirmTimeout and
// deletes confirmed rows, each in bounded statements.
func (r *Relay) Maintain(ctx context.Context) error {
	if b := r.staleBound(); b > 0 {
		res, err := r.db.ExecContext(ctx, `UPDATE mq_outbox SET status = 0, retry = retry + 1
			WHERE status = 1 AND id <= ? ORDER BY id LIMIT ?`, b, r.cfg.CleanupBatch)
		if err != nil {
			return fmt.Errorf("fanout: requeue outbox: %w", err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			r.count(func(s *RelayStats) { s.Requeued += n })
			r.m.relay("republished", int(n))
			r.log.Warn("outbox rows unconfirmed past the timeout; publishing again", "rows", n)
		}
	}
	for i := 0; i < 100; i++ {
		res, err := r.db.ExecContext(ctx, `DELETE FROM mq_outbox WHERE status = 2 ORDER BY id LIMIT ?`, r.cfg.CleanupBatch)
		if err != nil {
			return fmt.Errorf("fanout: delete confirmed outbox rows: %w", err)
		}
		n, _ := res.RowsAffected()
		r.count(func(s *RelayStats) { s.Deleted += n })
		r.m.relay("deleted", int(n))
		if n < int64(r.cfg.CleanupBatch) {
			break
		}
	}
	return nil
}
