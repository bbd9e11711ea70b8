// Package retention owns the deletion of old inbox rows (seed 000/003): an
// offline_msg row goes once it is older than MaxAge (30 days by default), or
// earlier once every device of its user has pulled past it and it is older
// than PulledMinAge (a day by default); never a row some
// device has not pulled unless it is past MaxAge. Rows go in small (uid,
// seq) batches, each its own short autocommit statement, so no long
// transaction holds locks against the write path. It also trims mq_dedup
// rows past their useful life. History in MongoDB is not touched.
//
// It must not change seq_fence (a seq is never reused after its row is
// gone), cursors, or msg_content.
package retention

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"imlab/ref/model"
)

// Config bounds a retention run.
type Config struct {
	// MaxAge: rows older than this go whatever the cursors say.
	MaxAge time.Duration
	// PulledMinAge: a row every device has pulled past goes early, but not
	// before it is this old (0: at once). The grace keeps what a device was
	// just served in the store of record for a while: a device that
	// reinstalls, or one registered moments later, can still pull it, and
	// a store witness taken after a run still sees every message of the
	// run instead of a hole that retention made.
	PulledMinAge time.Duration
	// ScanPage bounds rows read per key-order page.
	ScanPage int
	// DeleteBatch bounds rows per DELETE statement.
	DeleteBatch int
	// Pause between DELETE statements, to leave room to the write path.
	Pause time.Duration
	// DedupMaxAge: mq_dedup rows older than this are deleted (they guard
	// redeliveries; uk_uid_msg stays the final guard after).
	DedupMaxAge time.Duration
	// Interval between timer runs (the reconciler role runs retention too).
	Interval time.Duration
	Logger   *slog.Logger
}

// DefaultConfig: 30 days, pages of 1000, deletes of 500, dedup rows kept 48 h.
func DefaultConfig() Config {
	return Config{MaxAge: 30 * 24 * time.Hour, PulledMinAge: 24 * time.Hour, ScanPage: 1000, DeleteBatch: 500, Pause: time.Millisecond,
		DedupMaxAge: 48 * time.Hour, Interval: 10 * time.Minute}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.MaxAge < time.Minute:
		return fmt.Errorf("%w: retention max age below 1m", model.ErrInvalid)
	case c.PulledMinAge < 0 || c.PulledMinAge > c.MaxAge:
		return fmt.Errorf("%w: retention pulled min age out of 0..max age", model.ErrInvalid)
	case c.ScanPage < 1 || c.ScanPage > 10_000:
		return fmt.Errorf("%w: retention scan page out of 1..10000", model.ErrInvalid)
	case c.DeleteBatch < 1 || c.DeleteBatch > 5_000:
		return fmt.Errorf("%w: retention delete batch out of 1..5000", model.ErrInvalid)
	case c.Pause < 0 || c.Pause > time.Second:
		return fmt.Errorf("%w: retention pause out of 0..1s", model.ErrInvalid)
	case c.DedupMaxAge < time.Hour:
		return fmt.Errorf("%w: retention dedup max age below 1h", model.ErrInvalid)
	case c.Interval < time.Second:
		return fmt.Errorf("%w: retention interval below 1s", model.ErrInvalid)
	}
	return nil
}

// Report is one run.
type Report struct {
	Scanned       int64 `json:"scanned"`
	DeletedAged   int64 `json:"deleted_aged"`   // past MaxAge
	DeletedPulled int64 `json:"deleted_pulled"` // every device pulled past
	DedupDeleted  int64 `json:"dedup_deleted"`
	Statements    int64 `json:"statements"`
}

// Retention deletes what the rules allow.
type Retention struct {
	cfg Config
	db  *sql.DB
	log *slog.Logger
}

// New builds a retention job.
func New(cfg Config, db *sql.DB) (*Retention, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, fmt.Errorf("%w: retention needs a database", model.ErrInvalid)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Retention{cfg: cfg, db: db, log: log.With("job", "retention")}, nil
}

// RunTimer runs every Interval until ctx is done.
func (r *Retention) RunTimer(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		rep, err := r.Run(ctx, time.Now())
		if err != nil && ctx.Err() == nil {
			r.log.Warn("retention run failed", "err", err)
		} else if err == nil {
			r.log.Info("retention run", "scanned", rep.Scanned, "aged", rep.DeletedAged, "pulled", rep.DeletedPulled, "dedup", rep.DedupDeleted)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type key struct{ uid, seq uint64 }

// Run walks offline_msg in (uid, seq) order and deletes what may go as of now.
func (r *Retention) Run(ctx context.Context, now time.Time) (Report, error) {
	var rep Report
	cutoff := now.Add(-r.cfg.MaxAge).UTC()
	pulledCutoff := now.Add(-r.cfg.PulledMinAge).UTC()
	var lastUID, lastSeq uint64
	for {
		rows, err := r.db.QueryContext(ctx, `SELECT uid, seq, created_at FROM offline_msg
			WHERE uid > ? OR (uid = ? AND seq > ?) ORDER BY uid, seq LIMIT ?`, lastUID, lastUID, lastSeq, r.cfg.ScanPage)
		if err != nil {
			return rep, fmt.Errorf("retention: scan: %w", err)
		}
		type row struct {
			key
			at time.Time
		}
		var page []row
		for rows.Next() {
			var x row
			if err := rows.Scan(&x.uid, &x.seq, &x.at); err != nil {
				rows.Close()
				return rep, fmt.Errorf("retention: scan row: %w", err)
			}
			page = append(page, x)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return rep, fmt.Errorf("retention: rows: %w", err)
		}
		if len(page) == 0 {
			break
		}
		lastUID, lastSeq = page[len(page)-1].uid, page[len(page)-1].seq
		rep.Scanned += int64(len(page))
		uids := map[uint64]bool{}
		for _, x := range page {
			uids[x.uid] = true
		}
		floor, err := r.pulledByAll(ctx, uids)
		if err != nil {
			return rep, err
		}
		var del []key
		for _, x := range page {
			switch {
			case x.at.Before(cutoff):
				rep.DeletedAged++
			case x.seq <= floor[x.uid] && !x.at.After(pulledCutoff):
				rep.DeletedPulled++
			default:
				continue
			}
			del = append(del, x.key)
		}
		if err := r.delete(ctx, del, &rep); err != nil {
			return rep, err
		}
		if len(page) < r.cfg.ScanPage {
			break
		}
	}
	n, err := r.trimDedup(ctx, now, &rep)
	rep.DedupDeleted = n
	return rep, err
}

// pulledByAll returns, per uid, the highest seq every one of its devices
// has pulled past: the minimum device cursor, where a device is any row in
// sync_cursor or sync_served (a device served but never acknowledged
// counts as 0). A uid with no device gets 0: nothing goes before MaxAge.
func (r *Retention) pulledByAll(ctx context.Context, uids map[uint64]bool) (map[uint64]uint64, error) {
	args := make([]any, 0, len(uids))
	for u := range uids {
		args = append(args, u)
	}
	in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(args)), ",") + ")"
	type dev struct {
		uid uint64
		did string
	}
	cursor := map[dev]uint64{}
	devices := map[dev]bool{}
	for i, q := range []string{
		"SELECT uid, device_id, pull_seq FROM sync_cursor WHERE uid IN " + in,
		"SELECT uid, device_id, 0 FROM sync_served WHERE uid IN " + in,
	} {
		rows, err := r.db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("retention: device cursors: %w", err)
		}
		for rows.Next() {
			var d dev
			var seq uint64
			if err := rows.Scan(&d.uid, &d.did, &seq); err != nil {
				rows.Close()
				return nil, fmt.Errorf("retention: device cursor row: %w", err)
			}
			devices[d] = true
			if i == 0 {
				cursor[d] = seq
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	out := map[uint64]uint64{}
	seen := map[uint64]bool{}
	for d := range devices {
		c := cursor[d] // 0 when the device never acknowledged
		if !seen[d.uid] || c < out[d.uid] {
			out[d.uid] = c
			seen[d.uid] = true
		}
	}
	return out, nil
}

func (r *Retention) delete(ctx context.Context, keys []key, rep *Report) error {
	for start := 0; start < len(keys); start += r.cfg.DeleteBatch {
		end := min(start+r.cfg.DeleteBatch, len(keys))
		args := make([]any, 0, 2*(end-start))
		for _, k := range keys[start:end] {
			args = append(args, k.uid, k.seq)
		}
		q := "DELETE FROM offline_msg WHERE (uid, seq) IN (" + strings.TrimSuffix(strings.Repeat("(?,?),", end-start), ",") + ")"
		if _, err := r.db.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("retention: delete: %w", err)
		}
		rep.Statements++
		if r.cfg.Pause > 0 {
			t := time.NewTimer(r.cfg.Pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	return nil
}

func (r *Retention) trimDedup(ctx context.Context, now time.Time, rep *Report) (int64, error) {
	cutoff := now.Add(-r.cfg.DedupMaxAge).UTC()
	var total int64
	for i := 0; i < 10_000; i++ {
		res, err := r.db.ExecContext(ctx, "DELETE FROM mq_dedup WHERE created_at < ? LIMIT ?", cutoff, r.cfg.DeleteBatch)
		if err != nil {
			return total, fmt.Errorf("retention: trim mq_dedup: %w", err)
		}
		rep.Statements++
		n, _ := res.RowsAffected()
		total += n
		if n < int64(r.cfg.DeleteBatch) {
			break
		}
	}
	return total, nil
}
