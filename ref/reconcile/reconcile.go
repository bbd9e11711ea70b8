// Package reconcile owns the repair jobs between the queue and storage
// (seed 003 对账与补偿): forward (msg_content whose recipients lack inbox
// rows: written through the same fenced, idempotent inbox path), reverse
// (inbox rows without content: reported, and repaired from history when a
// history source can find the message) and push (inbox rows no device has
// pulled N minutes after they were written: one offline_push record each).
// Every step is keyed by msg_id / (uid, msg_id), so a re-run finds nothing
// new to do and writes nothing twice; each run reports what it found and
// what it repaired.
//
// Run covers a range given whole. The timer (RunTimer, Timer.Run) covers
// the window [now-Window, now-Grace) in a full run every FullInterval (30
// minutes) and, in the runs between (every Interval, a minute), only what
// was written since the previous run, less Overlap (15 s): forward reads
// msg_content along idx_created, reverse and push read offline_msg along
// idx_created_msg (created_at, msg_id, conv_id; migration 008), so such a
// run costs the rows written since the last one, not the table. A message
// or row is looked at by the first run after it passed now-Grace (push:
// now-PushAfter); what only goes wrong later (a body or an inbox row that
// vanished after its row was looked at, a row written long after its
// created_at) waits for the next full run while it is in the window.
//
// Forward repair appends: a repaired row can land behind a later message
// of its conversation that already reached the recipient; such rows are
// counted (ForwardReport.Reordered, see Forward for the exact guarantee).
// The reverse pass's history source is ref/history's Store.FindMessage
// (conv_id and msg_id only: an inbox row carries no conv_seq).
//
// A recipient's row that retention deleted is not missing: the forward
// pass reads a (uid, msg_id) with a tombstone in offline_tombstone
// (ref/retention writes one in the deleting transaction) as delivered, and
// it does not look at messages older than Config.Horizon, past which a
// deleted row may have left no tombstone. Without both, a row delivered,
// pulled by every device and deleted early would be taken for one the
// fan-out lost and written again at a new seq: the message twice in one
// inbox.
//
// It must not allocate seqs or insert offline_msg rows other than through
// ref/inbox, nor talk to Kafka.
package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"imlab/ref/dbtime"
	"imlab/ref/fanout"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/send"
)

// Config bounds a reconciler.
type Config struct {
	// PageSize bounds rows read per query.
	PageSize int
	// MaxRepairs bounds inbox rows written by one forward pass (the rest
	// is left for the next run, and reported).
	MaxRepairs int
	// PushAfter is N of "unpulled for N minutes".
	PushAfter time.Duration
	// Grace keeps timer runs away from messages the consumers are still
	// fanning out: no timer run looks at rows written after now-Grace.
	Grace time.Duration
	// Window is how far back a timer run looks: a full run covers
	// [now-Window, now-Grace), an incremental one no more than that.
	Window time.Duration
	// Interval between timer runs.
	Interval time.Duration
	// Overlap: an incremental timer run starts this far before the end of
	// the previous run's range (each pass its own), so that a row whose
	// created_at was taken before a commit that the previous run did not
	// see yet (a send transaction lasts at most send.Config.TxTimeout, 5
	// s; ref/server refuses an overlap not above it), or a writer's clock
	// a little behind this one's, is still looked at.
	Overlap time.Duration
	// FullInterval: a timer run covers the whole window when this long
	// has passed since the last full run (and always first, and after the
	// clock went back); the runs between cover only what was written since
	// the previous run (see RunTimer). The full run finds what the
	// incremental ones cannot: a body or an inbox row that vanished after
	// its row was looked at, a row written long after its created_at (an
	// inbox tier lagging more than Grace+Overlap, or PushAfter for push).
	// Equal to Interval: every run is a full one (the cost of the window
	// every Interval).
	FullInterval time.Duration
	// Horizon: the forward pass does not write a row for a message created
	// more than Horizon before the pass (retention.Config.Horizon: its row
	// may have been deleted without a tombstone); 0: no limit (no
	// retention deletes anything the pass may look at).
	Horizon time.Duration
	Logger  *slog.Logger
}

// DefaultOverlap is Config.Overlap's default: three times the send
// path's transaction bound (a message's created_at is taken inside its
// transaction), a quarter more rows read than a minute's.
const DefaultOverlap = 15 * time.Second

// DefaultFullInterval is Config.FullInterval's default: a timer run over
// the whole window every 30 minutes, so a row is in at least one full run
// while it is in the one-hour window; the minute's runs between read only
// the rows written since the run before (and Overlap).
const DefaultFullInterval = 30 * time.Minute

// DefaultConfig: pages of 1000, 100k repairs per run, push after 10
// minutes, timer runs every minute over [now-1h, now-30s), incremental
// ones (DefaultOverlap) between full ones every DefaultFullInterval.
func DefaultConfig() Config {
	return Config{PageSize: 1000, MaxRepairs: 100_000, PushAfter: 10 * time.Minute,
		Grace: 30 * time.Second, Window: time.Hour, Interval: time.Minute,
		Overlap: DefaultOverlap, FullInterval: DefaultFullInterval}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.PageSize < 1 || c.PageSize > 10_000:
		return fmt.Errorf("%w: reconcile page size out of 1..10000", model.ErrInvalid)
	case c.MaxRepairs < 1:
		return fmt.Errorf("%w: reconcile max repairs < 1", model.ErrInvalid)
	case c.PushAfter < 0 || c.Grace < 0:
		return fmt.Errorf("%w: reconcile durations negative", model.ErrInvalid)
	case c.Window <= c.Grace:
		return fmt.Errorf("%w: reconcile window must exceed the grace period", model.ErrInvalid)
	case c.Interval < time.Second:
		return fmt.Errorf("%w: reconcile interval below 1s", model.ErrInvalid)
	case c.Horizon < 0:
		return fmt.Errorf("%w: reconcile horizon negative", model.ErrInvalid)
	case c.Overlap <= 0 || c.Overlap > c.Window:
		return fmt.Errorf("%w: reconcile overlap out of (0, window]: an incremental run must reach back before the previous one's end", model.ErrInvalid)
	case c.FullInterval < c.Interval:
		return fmt.Errorf("%w: reconcile full interval below the interval", model.ErrInvalid)
	}
	return nil
}

// HistorySource finds a message's body in the history store, for reverse
// repair. (An inbox row names conv_id and msg_id, not conv_seq.)
type HistorySource interface {
	FindMessage(ctx context.Context, convID, msgID uint64) (model.Message, bool, error)
}

// Metrics: imlab_reconcile_repairs_total{kind}.
type Metrics struct {
	Repairs *prometheus.CounterVec
}

// NewMetrics registers the series on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{Repairs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imlab_reconcile_repairs_total",
		Help: "Repairs by reconciliation: forward (inbox rows written), reverse (bodies restored), push (offline-push records)."},
		[]string{"kind"})}
	if err := reg.Register(m.Repairs); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Metrics) add(kind string, n int64) {
	if m != nil && n > 0 {
		m.Repairs.WithLabelValues(kind).Add(float64(n))
	}
}

// Reconciler runs the three passes.
type Reconciler struct {
	cfg     Config
	db      *sql.DB
	w       *inbox.Writer
	members fanout.MembersFunc
	history HistorySource
	hooks   []send.CommitHook
	m       *Metrics
	log     *slog.Logger
}

// New builds a reconciler. history, m and hooks may be nil/empty.
func New(cfg Config, db *sql.DB, w *inbox.Writer, members fanout.MembersFunc, history HistorySource, m *Metrics, hooks ...send.CommitHook) (*Reconciler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil || w == nil || members == nil {
		return nil, fmt.Errorf("%w: reconciler needs a database, an inbox writer and a member source", model.ErrInvalid)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Reconciler{cfg: cfg, db: db, w: w, members: members, history: history, hooks: hooks, m: m, log: log.With("role", "reconciler")}, nil
}

// ForwardReport is what the forward pass found and did.
type ForwardReport struct {
	Messages    int64 `json:"messages"`     // msg_content rows scanned
	MissingRows int64 `json:"missing_rows"` // recipient inbox rows absent
	Repaired    int64 `json:"repaired"`     // inbox rows written
	Incomplete  bool  `json:"incomplete"`   // MaxRepairs reached; run again
	Errors      int64 `json:"errors"`       // messages that could not be resolved (e.g. unknown group)
	// Reordered counts repaired rows written behind a later message of the
	// same conversation already in that recipient's inbox (see Forward):
	// the lab checker reports those as "reordered".
	Reordered int64 `json:"reordered"`
	// Horizon, when the pass was limited by Config.Horizon: messages
	// created before it were not looked at.
	Horizon *time.Time `json:"horizon,omitempty"`
}

// ReverseReport: inbox rows whose body is missing.
type ReverseReport struct {
	Rows     int64    `json:"rows"`     // inbox rows scanned in range
	Missing  int64    `json:"missing"`  // rows without msg_content
	Repaired int64    `json:"repaired"` // bodies restored from history
	Sample   []string `json:"sample,omitempty"`
}

// PushReport: unpulled rows turned into offline-push records.
type PushReport struct {
	Rows     int64 `json:"rows"`     // inbox rows read in range (written before now - PushAfter)
	Unpulled int64 `json:"unpulled"` // rows no device pulled after PushAfter
	Recorded int64 `json:"recorded"` // new offline_push records
}

// Report is one run.
type Report struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Timer says what a timer run covered: TimerFull (the window) or
	// TimerIncremental (from the previous run's end less Overlap); empty
	// for Run over a range given.
	Timer string `json:"timer,omitempty"`
	// PushSince is where the push pass began when not at Since (an
	// incremental run: its own previous end less Overlap).
	PushSince time.Time `json:"push_since,omitzero"`

	Forward  ForwardReport `json:"forward"`
	Reverse  ReverseReport `json:"reverse"`
	Push     PushReport    `json:"push"`
	Duration time.Duration `json:"duration_ns"`
}

// Run runs forward, reverse and push over [since, until), the whole range
// whatever the timer runs covered.
func (r *Reconciler) Run(ctx context.Context, since, until time.Time) (Report, error) {
	return r.run(ctx, since, until, since, time.Time{})
}

// run runs forward and reverse over [since, until) and push over
// [pushSince, until) up to now-PushAfter (now zero: the time push starts).
func (r *Reconciler) run(ctx context.Context, since, until, pushSince, now time.Time) (Report, error) {
	rep := Report{Since: since.UTC(), Until: until.UTC()}
	if !pushSince.Equal(since) {
		rep.PushSince = pushSince.UTC()
	}
	if !since.Before(until) {
		return rep, fmt.Errorf("%w: reconcile --since must be before --until", model.ErrInvalid)
	}
	t0 := time.Now()
	var err error
	if rep.Forward, err = r.Forward(ctx, since, until); err != nil {
		return rep, err
	}
	if rep.Reverse, err = r.Reverse(ctx, since, until); err != nil {
		return rep, err
	}
	if now.IsZero() {
		now = time.Now()
	}
	if rep.Push, err = r.Push(ctx, pushSince, until, now); err != nil {
		return rep, err
	}
	rep.Duration = time.Since(t0)
	return rep, nil
}

type pair struct{ uid, msgID uint64 }

// Forward writes the inbox rows missing for messages created in [since,
// until), in (created_at, msg_id) pages; within a page the missing items
// are written in conversation order (conv_id, conv_seq).
//
// Order guarantee, precisely: a repaired row is appended to its
// recipient's inbox (a new seq above every committed one, through the
// fence); rows repaired by one run for one (recipient, conversation) get
// increasing seqs in conv_seq order within a page, and pages follow
// created_at. Nothing can place a row below rows already committed, so
// when a later message of the same conversation already reached that
// recipient (the queue lost an earlier message and delivered a later one),
// the repaired row lands behind it: the only alternative is not to deliver
// it at all. Such rows are counted in ForwardReport.Reordered (the
// recipient's newest row of that conversation, by seq, has a higher
// conv_seq) and the lab checker reports them as "reordered", never as lost.
// A run over messages the consumers are still fanning out can itself cause
// reorders (it appends a later message before the consumer writes an
// earlier one): timer runs stay Grace behind now, and a one-off run should
// end (--until) at least the consumers' lag before now.
//
// Rows retention deleted are not missing (see the package doc): a
// tombstoned (uid, msg_id) counts as delivered, and since is raised to
// Config.Horizon before now.
func (r *Reconciler) Forward(ctx context.Context, since, until time.Time) (ForwardReport, error) {
	var rep ForwardReport
	if r.cfg.Horizon > 0 {
		if h := time.Now().Add(-r.cfg.Horizon).UTC(); since.Before(h) {
			since, rep.Horizon = h, &h
		}
	}
	lastAt, lastID := dbtime.Ceil(since), uint64(0)
	first := true
	for {
		ms, err := r.page(ctx, lastAt, lastID, first, dbtime.Ceil(until))
		if err != nil {
			return rep, err
		}
		first = false
		if len(ms) == 0 {
			return rep, nil
		}
		lastAt, lastID = ms[len(ms)-1].CreatedAt, ms[len(ms)-1].MsgID
		rep.Messages += int64(len(ms))
		var items []fanoutItem
		groups := map[uint64][]uint64{}
		for _, m := range ms {
			t, a, _, err := model.ParseConvID(m.ConvID)
			if err != nil {
				rep.Errors++
				continue
			}
			var members []uint64
			if t == model.ConvGroup {
				if members = groups[a]; members == nil {
					members, err = r.members(ctx, a)
					if err != nil {
						if errors.Is(err, model.ErrNotFound) {
							rep.Errors++
							continue
						}
						return rep, fmt.Errorf("reconcile: members of %d: %w", a, err)
					}
					groups[a] = members
				}
			}
			rcpts, err := fanout.Recipients(m.ConvID, members)
			if err != nil {
				rep.Errors++
				continue
			}
			for _, it := range fanout.ItemsOf(m, rcpts) {
				items = append(items, fanoutItem{it})
			}
		}
		have, err := r.existing(ctx, items)
		if err != nil {
			return rep, err
		}
		var missing []inbox.Item
		for _, it := range items {
			if !have[pair{it.UID, it.MsgID}] {
				missing = append(missing, it.Item)
			}
		}
		rep.MissingRows += int64(len(missing))
		sort.SliceStable(missing, func(i, j int) bool {
			if missing[i].ConvID != missing[j].ConvID {
				return missing[i].ConvID < missing[j].ConvID
			}
			return missing[i].ConvSeq < missing[j].ConvSeq
		})
		newest, err := r.newestConvSeq(ctx, missing)
		if err != nil {
			return rep, err
		}
		for start := 0; start < len(missing); start += 2000 {
			if rep.Repaired >= int64(r.cfg.MaxRepairs) {
				rep.Incomplete = true
				return rep, nil
			}
			end := min(start+2000, len(missing))
			entries, err := r.w.Write(ctx, r.db, missing[start:end])
			if err != nil {
				return rep, fmt.Errorf("reconcile: forward write: %w", err)
			}
			rep.Repaired += int64(len(entries))
			for _, e := range entries {
				if e.ConvSeq < newest[pair{e.UID, e.ConvID}] {
					rep.Reordered++
				}
			}
			r.m.add("forward", int64(len(entries)))
			for _, h := range r.hooks {
				h.Committed(ctx, entries)
			}
		}
	}
}

type fanoutItem struct{ inbox.Item }

// newestConvSeq returns, per (uid, conv_id) of items (the pair's msgID
// field holds the conv_id), the conv_seq of the newest inbox row (highest
// seq) of that conversation in that recipient's inbox; absent when the
// recipient has none (or its body is gone). One loose index scan of
// idx_uid_conv per chunk.
func (r *Reconciler) newestConvSeq(ctx context.Context, items []inbox.Item) (map[pair]uint64, error) {
	seen := map[pair]bool{}
	var keys []pair
	for _, it := range items {
		k := pair{it.UID, it.ConvID}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	out := make(map[pair]uint64, len(keys))
	const chunk = 500
	for start := 0; start < len(keys); start += chunk {
		end := min(start+chunk, len(keys))
		args := make([]any, 0, 2*(end-start))
		for _, k := range keys[start:end] {
			args = append(args, k.uid, k.msgID)
		}
		q := `SELECT o.uid, o.conv_id, c.conv_seq FROM (SELECT uid, conv_id, MAX(seq) AS seq FROM offline_msg
			WHERE (uid, conv_id) IN (` + strings.TrimSuffix(strings.Repeat("(?,?),", end-start), ",") + `) GROUP BY uid, conv_id) t
			JOIN offline_msg o ON o.uid = t.uid AND o.seq = t.seq JOIN msg_content c ON c.msg_id = o.msg_id`
		rows, err := r.db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("reconcile: newest inbox rows: %w", err)
		}
		for rows.Next() {
			var k pair
			var cs uint64
			if err := rows.Scan(&k.uid, &k.msgID, &cs); err != nil {
				rows.Close()
				return nil, fmt.Errorf("reconcile: newest inbox row: %w", err)
			}
			out[k] = cs
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("reconcile: newest inbox rows: %w", err)
		}
	}
	return out, nil
}

func (r *Reconciler) page(ctx context.Context, afterAt time.Time, afterID uint64, first bool, until time.Time) ([]model.Message, error) {
	var rows *sql.Rows
	var err error
	const cols = `SELECT msg_id, conv_id, conv_type, conv_seq, sender_uid, client_msg_id, content, created_at FROM msg_content `
	if first {
		rows, err = r.db.QueryContext(ctx, cols+`WHERE created_at >= ? AND created_at < ?
			ORDER BY created_at, msg_id LIMIT ?`, afterAt, until, r.cfg.PageSize)
	} else {
		rows, err = r.db.QueryContext(ctx, cols+`WHERE created_at >= ? AND created_at < ?
			AND (created_at > ? OR msg_id > ?) ORDER BY created_at, msg_id LIMIT ?`,
			afterAt, until, afterAt, afterID, r.cfg.PageSize)
	}
	if err != nil {
		return nil, fmt.Errorf("reconcile: scan msg_content: %w", err)
	}
	defer rows.Close()
	var out []model.Message
	for rows.Next() {
		var m model.Message
		var content []byte
		if err := rows.Scan(&m.MsgID, &m.ConvID, &m.ConvType, &m.ConvSeq, &m.SenderUID, &m.ClientMsgID, &content, &m.CreatedAt); err != nil {
			return nil, fmt.Errorf("reconcile: scan msg_content row: %w", err)
		}
		m.Content = string(content)
		m.CreatedAt = m.CreatedAt.UTC()
		out = append(out, m)
	}
	return out, rows.Err()
}

// Reverse reports inbox rows in range whose body is missing and restores
// the body from history when the history source finds it.
func (r *Reconciler) Reverse(ctx context.Context, since, until time.Time) (ReverseReport, error) {
	var rep ReverseReport
	tried := map[uint64]bool{} // msg_ids looked up in history, found or not
	n, err := r.scanInbox(ctx, since.UTC(), until.UTC(), true, func(page []inboxRef) error {
		for _, x := range page {
			if !x.missing {
				continue
			}
			rep.Missing++
			if len(rep.Sample) < 20 {
				rep.Sample = append(rep.Sample, fmt.Sprintf("uid=%d seq=%d msg_id=%d", x.uid, x.seq, x.msgID))
			}
			if r.history == nil || tried[x.msgID] {
				continue
			}
			tried[x.msgID] = true
			m, ok, err := r.history.FindMessage(ctx, x.convID, x.msgID)
			if err != nil {
				r.log.Warn("reverse: history lookup failed", "msg_id", x.msgID, "err", err)
				continue
			}
			if !ok || m.MsgID != x.msgID {
				continue
			}
			if err := fanout.StoreMessages(ctx, r.db, []model.Message{m}); err != nil {
				return err
			}
			rep.Repaired++
			r.m.add("reverse", 1)
		}
		return nil
	})
	rep.Rows = n
	return rep, err
}

// Push records, for every inbox row in range written more than PushAfter
// before now that no device of its uid has been served, one offline_push
// row (INSERT IGNORE on (uid, msg_id): a re-run records nothing twice).
func (r *Reconciler) Push(ctx context.Context, since, until, now time.Time) (PushReport, error) {
	var rep PushReport
	cutoff := now.Add(-r.cfg.PushAfter).UTC()
	if cutoff.Before(until) {
		until = cutoff
	}
	if !since.Before(until) {
		return rep, nil
	}
	n, err := r.scanInbox(ctx, since.UTC(), until.UTC(), false, func(page []inboxRef) error {
		uids := map[uint64]bool{}
		for _, x := range page {
			uids[x.uid] = true
		}
		pulled, err := r.pulled(ctx, uids)
		if err != nil {
			return err
		}
		var todo []inboxRef
		for _, x := range page {
			if x.seq > pulled[x.uid] {
				todo = append(todo, x)
			}
		}
		rep.Unpulled += int64(len(todo))
		if len(todo) == 0 {
			return nil
		}
		var sb strings.Builder
		args := make([]any, 0, 6*len(todo))
		sb.WriteString("INSERT IGNORE INTO offline_push (uid, msg_id, seq, conv_id, msg_created_at, created_at) VALUES ")
		for i, x := range todo {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString("(?,?,?,?,?,?)")
			args = append(args, x.uid, x.msgID, x.seq, x.convID, x.createdAt, now.UTC())
		}
		res, err := r.db.ExecContext(ctx, sb.String(), args...)
		if err != nil {
			return fmt.Errorf("reconcile: insert offline_push: %w", err)
		}
		added, _ := res.RowsAffected()
		rep.Recorded += added
		r.m.add("push", added)
		return nil
	})
	rep.Rows = n
	return rep, err
}

// pulled returns, per uid, the highest seq any of its devices was served
// (sync_served) or acknowledged (sync_cursor); 0 when none.
func (r *Reconciler) pulled(ctx context.Context, uids map[uint64]bool) (map[uint64]uint64, error) {
	out := make(map[uint64]uint64, len(uids))
	if len(uids) == 0 {
		return out, nil
	}
	args := make([]any, 0, len(uids))
	for u := range uids {
		args = append(args, u)
	}
	in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(args)), ",") + ")"
	for _, q := range []string{
		"SELECT uid, MAX(served_seq) FROM sync_served WHERE uid IN " + in + " GROUP BY uid",
		"SELECT uid, MAX(pull_seq) FROM sync_cursor WHERE uid IN " + in + " GROUP BY uid",
	} {
		rows, err := r.db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("reconcile: device cursors: %w", err)
		}
		for rows.Next() {
			var uid, seq uint64
			if err := rows.Scan(&uid, &seq); err != nil {
				rows.Close()
				return nil, fmt.Errorf("reconcile: device cursor row: %w", err)
			}
			out[uid] = max(out[uid], seq)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
