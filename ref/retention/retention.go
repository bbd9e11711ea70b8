// Package retention owns the deletion of old inbox rows (seed 000/003): an
// offline_msg row goes once it is older than MaxAge (30 days by default), or
// earlier once every device of its user has pulled past it and it is older
// than PulledMinAge (a day by default); never a row some device has not
// pulled unless it is past MaxAge. Rows go in small (uid, seq) batches, each
// its own short transaction, so no long transaction holds locks against the
// write path. It also trims mq_dedup rows past their useful life. History in
// MongoDB is not touched.
//
// # Which devices count
//
// A device is any (uid, device_id) with a row in sync_served (a device with
// a cursor has one: an ack is refused past the served mark). ref/pull
// writes a device's sync_served row (served_seq 0 when nothing was served
// yet) the first time the device pulls, pulls a conversation, acknowledges
// or connects over WebSocket, before it answers; so a device
// the server has heard of holds back the early deletion of its uid's rows
// until its cursor (sync_cursor.pull_seq, 0 when it never acknowledged) is
// at or past them. A device the server never heard of cannot: its rows are
// kept only by MaxAge. A uid without any device keeps everything until
// MaxAge.
//
// The rule is one SQL aggregate (the uid's floor, the lowest cursor of its
// devices) evaluated twice: by the scan, per page, to pick candidates, and
// again in the deleting transaction, on the rows it locks, so a device that
// appears or falls behind between the two holds its rows back.
//
// # What a pass reads
//
// Both kinds of rows that may go are older than the later of the two
// cut-offs (now less PulledMinAge, since PulledMinAge is at most MaxAge):
// a pass reads only those, along idx_created_msg (created_at, msg_id,
// conv_id; migration 008) from its start, a page at a time after the last
// entry read, index only. A pass over a table of young rows reads none of
// them, instead of walking every row by the primary key. The bounds are
// rounded to created_at's millisecond (ref/dbtime), so MariaDB reads a
// range of the index, not the whole of it; the trims read a range of
// offline_tombstone's and mq_dedup's idx_created (migrations 006 and 009)
// likewise.
//
// # What was deleted
//
// Every deleted row is handed to the Sinks given to New (uid, seq, msg_id,
// conv_id, created_at, deleted_at, reason expired or pulled) and every pass
// is reported; Log is a bounded Sink the server serves to the lab.
//
// # Tombstones
//
// A row deleted while younger than TombstoneAge (by its created_at, at the
// pass's clock) leaves a tombstone, (uid, msg_id, seq) in
// offline_tombstone, written in the deleting transaction: the forward
// repair (ref/reconcile) reads a tombstoned pair as delivered, so a message
// whose row was delivered, pulled by every device and deleted early is not
// taken for one the fan-out lost and written a second time at a new seq.
// Tombstones older than TombstoneAge are trimmed by each pass; the repair
// does not look further back than its horizon (server: half the tombstone
// age, or the youngest age at which retention deletes at all if that is
// longer). Outside the lab, rows go early only after PulledMinAge (a day),
// well past the tombstone age (two hours), so no tombstone is written.
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

	"imlab/ref/dbtime"
	"imlab/ref/defect"
	"imlab/ref/model"
)

// Named floors of the ages and interval (Config.Validate).
const (
	// MinMaxAge is the shortest MaxAge outside the lab: below it a device
	// that is merely offline for a while loses what it has not pulled.
	MinMaxAge = time.Hour
	// MinInterval is the shortest pass interval outside the lab.
	MinInterval = time.Minute
	// LabMinMaxAge and LabMinInterval are the floors with LabShortAges.
	LabMinMaxAge   = time.Second
	LabMinInterval = 100 * time.Millisecond
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
	// LabShortAges is LAB ONLY: it lowers the floors of MaxAge and Interval
	// from MinMaxAge and MinInterval to LabMinMaxAge and LabMinInterval, so
	// that both the early deletion and the expiry run inside a scenario of
	// minutes. A server that serves people never sets it.
	LabShortAges bool
	// ScanPage bounds rows read per key-order page.
	ScanPage int
	// DeleteBatch bounds rows per deleting transaction.
	DeleteBatch int
	// Pause between deleting transactions, to leave room to the write path.
	Pause time.Duration
	// TombstoneAge: a row deleted while younger than this leaves a
	// tombstone (see the package doc); tombstones older are trimmed. 0: no
	// tombstones (then nothing deleted may be younger than the forward
	// repair's horizon).
	TombstoneAge time.Duration
	// DedupMaxAge: mq_dedup rows older than this are deleted (they guard
	// redeliveries; uk_uid_msg stays the final guard after).
	DedupMaxAge time.Duration
	// Interval between timer runs (the reconciler role runs retention too).
	Interval time.Duration
	// Defects are shipped defects enabled on purpose (ref/defect; empty by
	// default): the lab's negative controls.
	Defects defect.Set
	Logger  *slog.Logger
}

// DefaultTombstoneAge is Config.TombstoneAge's default: twice the forward
// repair's default window (reconcile.DefaultConfig: one hour).
const DefaultTombstoneAge = 2 * time.Hour

// DefaultConfig: 30 days, pages of 1000, deletes of 500, tombstones of rows
// younger than 2 h, dedup rows kept 48 h.
func DefaultConfig() Config {
	return Config{MaxAge: 30 * 24 * time.Hour, PulledMinAge: 24 * time.Hour, ScanPage: 1000, DeleteBatch: 500, Pause: time.Millisecond,
		TombstoneAge: DefaultTombstoneAge, DedupMaxAge: 48 * time.Hour, Interval: 10 * time.Minute}
}

// Horizon is how far back a message's rows are either all still in
// offline_msg or tombstoned (as long as tombstones are trimmed at
// TombstoneAge): the longer of half the tombstone age (the other half is
// the margin for a repair pass still running while a trim goes on) and the
// youngest age at which retention deletes anything (the shorter of
// PulledMinAge and MaxAge). A forward repair must not write a row for a
// message older than that: its row may have been delivered and deleted
// without a trace.
func (c Config) Horizon() time.Duration {
	return max(c.TombstoneAge/2, min(c.PulledMinAge, c.MaxAge))
}

// Validate checks the configuration.
func (c Config) Validate() error {
	minAge, minInterval, lab := MinMaxAge, MinInterval, ""
	if c.LabShortAges {
		minAge, minInterval, lab = LabMinMaxAge, LabMinInterval, " (lab short ages)"
	}
	switch {
	case c.MaxAge < minAge:
		return fmt.Errorf("%w: retention max age %s below %s%s", model.ErrInvalid, c.MaxAge, minAge, lab)
	case c.PulledMinAge < 0 || c.PulledMinAge > c.MaxAge:
		return fmt.Errorf("%w: retention pulled min age %s out of 0..max age", model.ErrInvalid, c.PulledMinAge)
	case c.ScanPage < 1 || c.ScanPage > 10_000:
		return fmt.Errorf("%w: retention scan page out of 1..10000", model.ErrInvalid)
	case c.DeleteBatch < 1 || c.DeleteBatch > 5_000:
		return fmt.Errorf("%w: retention delete batch out of 1..5000", model.ErrInvalid)
	case c.Pause < 0 || c.Pause > time.Second:
		return fmt.Errorf("%w: retention pause out of 0..1s", model.ErrInvalid)
	case c.TombstoneAge < 0 || c.TombstoneAge > 30*24*time.Hour:
		return fmt.Errorf("%w: retention tombstone age %s out of 0..720h", model.ErrInvalid, c.TombstoneAge)
	case c.DedupMaxAge < time.Hour:
		return fmt.Errorf("%w: retention dedup max age below 1h", model.ErrInvalid)
	case c.Interval < minInterval:
		return fmt.Errorf("%w: retention interval %s below %s%s", model.ErrInvalid, c.Interval, minInterval, lab)
	}
	return nil
}

// Report is one run.
type Report struct {
	Scanned           int64 `json:"scanned"`        // inbox rows read: those created before the later cut-off
	DeletedAged       int64 `json:"deleted_aged"`   // past MaxAge
	DeletedPulled     int64 `json:"deleted_pulled"` // every device pulled past
	Tombstones        int64 `json:"tombstones"`     // tombstones written (rows deleted younger than TombstoneAge)
	TombstonesTrimmed int64 `json:"tombstones_trimmed"`
	DedupDeleted      int64 `json:"dedup_deleted"`
	Statements        int64 `json:"statements"`
}

// Deletion reasons.
const (
	ReasonExpired = "expired" // past MaxAge
	ReasonPulled  = "pulled"  // every device pulled past it, older than PulledMinAge
)

// Deletion is one offline_msg row retention deleted.
type Deletion struct {
	UID, Seq, MsgID, ConvID uint64
	CreatedAt               time.Time // the row's created_at
	DeletedAt               time.Time // the pass's clock (Run's now)
	Reason                  string
}

// Sink receives what retention did: each committed batch of deletions, in
// order, and the end of each pass (err nil when it completed). Calls come
// from the goroutine running the pass.
type Sink interface {
	Deleted(rows []Deletion)
	Passed(rep Report, err error)
}

// Retention deletes what the rules allow.
type Retention struct {
	cfg   Config
	db    *sql.DB
	log   *slog.Logger
	sinks []Sink
}

// New builds a retention job; sinks are told what it deleted.
func New(cfg Config, db *sql.DB, sinks ...Sink) (*Retention, error) {
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
	if cfg.LabShortAges {
		log.Warn("retention: LAB short ages in force: rows expire after "+cfg.MaxAge.String(), "pulled_min_age", cfg.PulledMinAge, "interval", cfg.Interval)
	}
	return &Retention{cfg: cfg, db: db, log: log.With("job", "retention"), sinks: sinks}, nil
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
			level := slog.LevelDebug // a pass that deleted nothing is not news
			if rep.DeletedAged+rep.DeletedPulled+rep.DedupDeleted > 0 {
				level = slog.LevelInfo
			}
			r.log.Log(ctx, level, "retention run", "scanned", rep.Scanned, "aged", rep.DeletedAged, "pulled", rep.DeletedPulled, "dedup", rep.DedupDeleted)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type key struct{ uid, seq uint64 }

// The early-deletion rule: a row may go early when its seq is at or
// below its uid's floor, the lowest cursor among the uid's devices (0 for
// a device that never acknowledged). Devices are the rows of sync_served:
// every device the read path has heard of (an acknowledging device has one
// too: an ack is refused past the served mark). A uid without a device has
// no floor (NULL): nothing of it goes early. The floor is one SQL
// aggregate over devicesOf, used grouped by uid for a scanned page and
// correlated to the row in the deleting transaction.
const devicesOf = `FROM sync_served d LEFT JOIN sync_cursor c ON c.uid = d.uid AND c.device_id = d.device_id`

// floorAgg is the floor's aggregate.
func (r *Retention) floorAgg() string {
	if r.cfg.Defects.Has(defect.RetentionMostAdvancedDevice) {
		return "MAX(COALESCE(c.pull_seq, 0))" // the defect: "the user pulled it" by the most advanced device
	}
	return "MIN(COALESCE(c.pull_seq, 0))"
}

// bounds are the two age limits of a pass, both exclusive and on
// created_at's grid (dbtime.Ceil: a stored value compares with them as
// with the exact limits): rows created before expired (now less MaxAge) go
// whatever the cursors say; rows created before pulled (at or before now
// less PulledMinAge) may go early.
type bounds struct{ expired, pulled time.Time }

// until is the end of a pass's scan: every row that may go was created
// before it.
func (b bounds) until() time.Time {
	if b.expired.After(b.pulled) {
		return b.expired
	}
	return b.pulled
}

// cutoffs are the bounds of a pass at now.
func (r *Retention) cutoffs(now time.Time) bounds {
	expiry := r.cfg.MaxAge
	if r.cfg.Defects.Has(defect.RetentionExpiryFromPulledAge) {
		expiry = r.cfg.PulledMinAge // the defect: the early grace taken for the window
	}
	return bounds{expired: dbtime.Ceil(now.Add(-expiry)), pulled: dbtime.Ceil(now.Add(-r.cfg.PulledMinAge).Add(time.Nanosecond))}
}

// Run reads the rows of offline_msg old enough to go (see "What a pass
// reads") and deletes what may go as of now.
func (r *Retention) Run(ctx context.Context, now time.Time) (rep Report, err error) {
	defer func() {
		for _, s := range r.sinks {
			s.Passed(rep, err)
		}
	}()
	b := r.cutoffs(now)
	var after *entry
	for {
		page, err := r.scan(ctx, after, b)
		if err != nil {
			return rep, err
		}
		if page.n == 0 {
			break
		}
		after = &page.last
		rep.Scanned += int64(page.n)
		if err := r.delete(ctx, page.candidates, b, now.UTC(), &rep); err != nil {
			return rep, err
		}
		if page.n < r.cfg.ScanPage {
			break
		}
	}
	n, err := r.trimBefore(ctx, "offline_tombstone", now.Add(-r.cfg.TombstoneAge), &rep)
	rep.TombstonesTrimmed = n
	if err != nil {
		return rep, err
	}
	n, err = r.trimBefore(ctx, "mq_dedup", now.Add(-r.cfg.DedupMaxAge), &rep)
	rep.DedupDeleted = n
	return rep, err
}

// floors reads the floor of each uid that has a device.
func (r *Retention) floors(ctx context.Context, uids []uint64) (map[uint64]uint64, error) {
	out := make(map[uint64]uint64, len(uids))
	if len(uids) == 0 {
		return out, nil
	}
	args := make([]any, len(uids))
	for i, u := range uids {
		args[i] = u
	}
	rows, err := r.db.QueryContext(ctx, "SELECT d.uid, "+r.floorAgg()+" "+devicesOf+" WHERE d.uid IN ("+
		strings.TrimSuffix(strings.Repeat("?,", len(uids)), ",")+") GROUP BY d.uid", args...)
	if err != nil {
		return nil, fmt.Errorf("retention: device cursors: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var u, f uint64
		if err := rows.Scan(&u, &f); err != nil {
			return nil, fmt.Errorf("retention: device cursor row: %w", err)
		}
		out[u] = f
	}
	return out, rows.Err()
}

// delete deletes the candidates in batches of DeleteBatch, each one
// transaction that locks the rows still meeting the rule (checked again:
// a device may have appeared or fallen behind since the scan), deletes
// exactly those and tells the sinks.
func (r *Retention) delete(ctx context.Context, keys []key, b bounds, now time.Time, rep *Report) error {
	for start := 0; start < len(keys); start += r.cfg.DeleteBatch {
		end := min(start+r.cfg.DeleteBatch, len(keys))
		gone, tombs, err := r.deleteBatch(ctx, keys[start:end], b, now)
		if err != nil {
			return err
		}
		rep.Statements += 2
		if tombs > 0 {
			rep.Statements++
			rep.Tombstones += tombs
		}
		for _, d := range gone {
			if d.Reason == ReasonExpired {
				rep.DeletedAged++
			} else {
				rep.DeletedPulled++
			}
		}
		if len(gone) > 0 {
			for _, s := range r.sinks {
				s.Deleted(gone)
			}
		}
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

// deleteBatch deletes the rows of keys that still meet the rule, leaves
// the tombstones of those younger than TombstoneAge in the same
// transaction, and returns the rows deleted and the tombstones written.
func (r *Retention) deleteBatch(ctx context.Context, keys []key, b bounds, now time.Time) (gone []Deletion, tombs int64, err error) {
	tx, err := r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, 0, fmt.Errorf("retention: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	args := make([]any, 0, 3+2*len(keys))
	args = append(args, b.expired)
	args = appendKeys(args, keys)
	args = append(args, b.expired, b.pulled)
	// The floor's subquery is a plain read (a locking clause does not
	// reach into subqueries): under READ COMMITTED it sees every device
	// committed before this statement, and takes no lock on the cursors.
	rows, err := tx.QueryContext(ctx, `SELECT o.uid, o.seq, o.msg_id, o.conv_id, o.created_at, o.created_at < ?
		FROM offline_msg o WHERE (o.uid, o.seq) IN (`+pairs(len(keys))+`)
		AND (o.created_at < ? OR (o.created_at < ? AND o.seq <= (SELECT `+r.floorAgg()+` `+devicesOf+` WHERE d.uid = o.uid))) FOR UPDATE`, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("retention: lock rows: %w", err)
	}
	for rows.Next() {
		var d Deletion
		var isExpired bool
		if err := rows.Scan(&d.UID, &d.Seq, &d.MsgID, &d.ConvID, &d.CreatedAt, &isExpired); err != nil {
			rows.Close()
			return nil, 0, fmt.Errorf("retention: lock row: %w", err)
		}
		d.CreatedAt, d.DeletedAt, d.Reason = d.CreatedAt.UTC(), now, ReasonPulled
		if isExpired {
			d.Reason = ReasonExpired
		}
		gone = append(gone, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("retention: lock rows: %w", err)
	}
	if len(gone) > 0 {
		del := make([]key, len(gone))
		for i, d := range gone {
			del[i] = key{d.UID, d.Seq}
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM offline_msg WHERE (uid, seq) IN ("+pairs(len(del))+")", appendKeys(nil, del)...); err != nil {
			return nil, 0, fmt.Errorf("retention: delete: %w", err)
		}
		if tombs, err = r.tombstones(ctx, tx, gone, now); err != nil {
			return nil, 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, 0, fmt.Errorf("retention: commit: %w", err)
	}
	return gone, tombs, nil
}

// tombstones writes, in the deleting transaction tx, the tombstone of each
// row of gone younger than TombstoneAge at now (INSERT IGNORE: a pair
// deleted twice, once per seq, keeps its first tombstone).
func (r *Retention) tombstones(ctx context.Context, tx *sql.Tx, gone []Deletion, now time.Time) (int64, error) {
	cutoff := now.Add(-r.cfg.TombstoneAge)
	var sb strings.Builder
	var args []any
	n := int64(0)
	for _, d := range gone {
		if !d.CreatedAt.After(cutoff) {
			continue
		}
		if n == 0 {
			sb.WriteString("INSERT IGNORE INTO offline_tombstone (uid, msg_id, seq, created_at, deleted_at) VALUES ")
		} else {
			sb.WriteByte(',')
		}
		sb.WriteString("(?,?,?,?,?)")
		args = append(args, d.UID, d.MsgID, d.Seq, d.CreatedAt, now)
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
		return 0, fmt.Errorf("retention: tombstones: %w", err)
	}
	return n, nil
}

func pairs(n int) string { return strings.TrimSuffix(strings.Repeat("(?,?),", n), ",") }

func appendKeys(args []any, keys []key) []any {
	for _, k := range keys {
		args = append(args, k.uid, k.seq)
	}
	return args
}

// trimBefore deletes the rows of table (mq_dedup, offline_tombstone)
// created before cutoff, DeleteBatch at a time. Both tables have
// idx_created (created_at), so each batch reads the range of the index
// from its start to the cutoff, the expired entries only; the cutoff is
// rounded to created_at's grid (ref/dbtime), or MariaDB reads the whole
// index or table instead.
func (r *Retention) trimBefore(ctx context.Context, table string, cutoff time.Time, rep *Report) (int64, error) {
	cutoff = dbtime.Ceil(cutoff)
	var total int64
	for i := 0; i < 10_000; i++ {
		res, err := r.db.ExecContext(ctx, "DELETE FROM "+table+" WHERE created_at < ? LIMIT ?", cutoff, r.cfg.DeleteBatch)
		if err != nil {
			return total, fmt.Errorf("retention: trim %s: %w", table, err)
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
