// Package lagpoll owns a scenario run's lag timeline: it polls the
// server's lag endpoint (server.LagNowPath: each consumer group's lag age
// and records, the outbox backlog, the dead letters) once a second and
// counts the inbox rows in the run's database directly (not through a
// proxy, so that a MySQL fault does not blind it), spacing the counts by
// their own cost (RowCountDuty). A failed measurement is an unknown sample
// (its Err says why), never 0; when only the outbox query failed (the
// server names that error apart, outbox_error) the sample keeps its
// consumer lag, with Err "" and the outbox's error in OutboxErr, and has
// no outbox figures. It must not start or stop processes, nor judge the
// samples (imlab/recovery and imlab/expect do).
package lagpoll

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"imlab/ref/server"
	"imlab/result"
	"imlab/runner/proc"
)

// Named limits of a poller.
const (
	// Interval is the lag poll period.
	Interval = time.Second
	// timeout bounds one lag poll and one row count.
	timeout = 2 * time.Second
	// MaxSamples bounds the lag timeline.
	MaxSamples = 4 * 3600
	// RowCountDuty bounds the lab's inbox row count to about 1/RowCountDuty
	// of the time: SELECT COUNT(*) walks the whole inbox table (InnoDB keeps
	// no row count), so once a count takes d the next one waits until
	// d*RowCountDuty after it started (at least Interval). Counted every
	// second, it took 21.7 s of MariaDB's time in one 60 s burst-50k run, at
	// 0.1-0.3 s a count, beside the server it measures.
	RowCountDuty = 20
)

// answer is the part of GET /v1/lab/lag the runner reads.
type answer struct {
	At         time.Time `json:"at"`
	Partitions []struct {
		Group   string `json:"group"`
		End     int64  `json:"end"`
		Records int64  `json:"records"`
	} `json:"partitions"`
	MaxAgeSeconds          map[string]float64 `json:"max_age_seconds"`
	UnknownAge             map[string]int     `json:"unknown_age"`
	Records                map[string]int64   `json:"records"`
	OutboxBacklog          int64              `json:"outbox_backlog"`
	OutboxOldestAgeSeconds float64            `json:"outbox_oldest_age_seconds"`
	DLQRecords             int64              `json:"dlq_records"`
	Errors                 []string           `json:"errors"`
	// OutboxError is the outbox query's error, also one of Errors (a
	// server that does not name it apart leaves it "": its outbox error
	// then counts against the whole sample).
	OutboxError string `json:"outbox_error"`
}

// otherErrors are the answer's errors but the outbox's (the one entry
// equal to OutboxError).
func (a *answer) otherErrors() []string {
	out := make([]string, 0, len(a.Errors))
	skipped := a.OutboxError == ""
	for _, e := range a.Errors {
		if !skipped && e == a.OutboxError {
			skipped = true
			continue
		}
		out = append(out, e)
	}
	return out
}

// outboxInto copies the outbox's error, backlog and oldest age and the
// dead letters into s: the outbox figures when the server measured them
// (its age is not negative, -1: no database or its query failed, and no
// outbox error came with the answer), the dead letters when no error
// other than the outbox's did.
func (a *answer) outboxInto(s *result.LagSample) {
	s.OutboxErr = a.OutboxError
	if a.OutboxOldestAgeSeconds >= 0 && a.OutboxError == "" {
		n, age := a.OutboxBacklog, a.OutboxOldestAgeSeconds
		s.OutboxBacklog, s.OutboxOldestAge = &n, &age
	}
	if len(a.otherErrors()) == 0 {
		d := a.DLQRecords
		s.DLQRecords = &d
	}
}

// consumed is each group's position summed over the partitions (end
// offset minus records behind): the records it has consumed.
func (a *answer) consumed() map[string]int64 {
	out := map[string]int64{}
	for _, p := range a.Partitions {
		out[p.Group] += p.End - p.Records
	}
	return out
}

// Log is the lag timeline, appended by the poller and read by the run
// while it waits for recovery.
type Log struct {
	mu      sync.Mutex
	samples []result.LagSample
}

// Add appends a sample.
func (l *Log) Add(s result.LagSample) {
	l.mu.Lock()
	l.samples = append(l.samples, s)
	l.mu.Unlock()
}

// Snapshot is a copy of the samples so far.
func (l *Log) Snapshot() []result.LagSample {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]result.LagSample(nil), l.samples...)
}

// Len is the number of samples so far.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.samples)
}

// rowCounter reads the inbox row count for the lag samples, directly from
// MySQL (not through the proxy, so that a MySQL fault does not blind it),
// at most once per RowCountDuty times the last count's duration (see
// RowCountDuty): a sample between two counts has no row count.
type rowCounter struct {
	db   *sql.DB
	next time.Time // no count before this
}

// count is the inbox row count now; nil when it is not due yet or could
// not be read.
func (c *rowCounter) count(ctx context.Context) *int64 {
	if c.db == nil || time.Now().Before(c.next) {
		return nil
	}
	t0 := time.Now()
	n := countRows(ctx, c.db)
	c.next = t0.Add(time.Since(t0) * RowCountDuty)
	return n
}

// countRows is the inbox row count; nil when it could not be read.
func countRows(ctx context.Context, db *sql.DB) *int64 {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM offline_msg").Scan(&n); err != nil {
		return nil
	}
	return &n
}

// Stale is how old the server's latest measurement may be when the
// runner reads it: an older one (the monitor is stuck, e.g. on a broker
// that does not answer) is an unknown sample, not a current one.
const Stale = 10 * time.Second

// unknownReason says why an answer is not a measurement of the consumer
// lag now ("" when it is one): the monitor's own errors but the outbox's
// (outboxInto records that one apart), partitions whose age it could not
// read, a snapshot never taken or too old. A failed measurement is
// unknown, never 0.
func (a *answer) unknownReason(now time.Time) string {
	var why []string
	switch {
	case a.At.IsZero():
		why = append(why, "not measured yet")
	case now.Sub(a.At) > Stale:
		why = append(why, fmt.Sprintf("the latest measurement is %s old", now.Sub(a.At).Round(time.Second)))
	}
	groups := make([]string, 0, len(a.UnknownAge))
	for g := range a.UnknownAge {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		why = append(why, fmt.Sprintf("%s: age of %d partitions unknown", g, a.UnknownAge[g]))
	}
	why = append(why, a.otherErrors()...)
	return strings.Join(why, "; ")
}

// Config is what a poller reads: the run's time base, the server's
// address (empty while no process runs), the run's database for the row
// count (nil: none) and where the lines go (nil: nowhere).
type Config struct {
	Base     time.Time
	Addr     func() string
	DB       *sql.DB
	Progress io.Writer
	// LineBase, when set, is the clock of the live lines (UnixNano) once
	// it is not 0: the load's start, from which its live line counts,
	// after its set-up; until then, and without it, Base. The samples' T
	// stay on Base.
	LineBase *atomic.Int64
}

// Poll polls the lag endpoint every Interval until ctx ends, appending
// the samples (T relative to cfg.Base: when each was asked) to out, at
// most MaxSamples; with a database it also counts the inbox rows (at most
// as often as RowCountDuty allows). It asks for a measurement of the
// moment (server.LagNowPath): the monitor's own snapshot is up to its
// interval old, which had put every sample, and the peak and recovery
// times read from them, about half a second late. It prints one line per
// sample to cfg.Progress when the sample is complete (LiveLine): in time
// order with the load's live lines even when a poll takes longer than an
// interval, and saying which polls a slow one cost.
func Poll(ctx context.Context, cfg Config, out *Log) {
	hc := &http.Client{Timeout: timeout}
	defer hc.CloseIdleConnections()
	tk := time.NewTicker(Interval)
	defer tk.Stop()
	ticks := clock{start: time.Now()}
	rows := rowCounter{db: cfg.DB}
	prev := -1 // the previous sample's tick (none yet)
	for out.Len() < MaxSamples {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		asked := time.Now()
		s := result.LagSample{T: asked.Sub(cfg.Base).Seconds()}
		if addr := cfg.Addr(); addr == "" {
			s.Err = "no process running"
		} else if a, err := fetch(ctx, hc, "http://"+addr+server.LagNowPath); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.Err = err.Error()
		} else {
			s.Err = a.unknownReason(time.Now())
			s.MaxAge, s.Records, s.Consumed = a.MaxAgeSeconds, a.Records, a.consumed()
			a.outboxInto(&s)
		}
		s.InboxRows = rows.count(ctx)
		out.Add(s)
		tick := ticks.slot(asked)
		if cfg.Progress != nil {
			skipped := 0
			if prev >= 0 {
				skipped = max(0, tick-prev-1)
			}
			ls, base := s, cfg.Base
			if cfg.LineBase != nil && cfg.LineBase.Load() != 0 {
				lb := time.Unix(0, cfg.LineBase.Load())
				base, ls.T = lb, s.T-lb.Sub(cfg.Base).Seconds()
			}
			fmt.Fprintln(cfg.Progress, LiveLine(ls, time.Since(base).Seconds(), skipped))
		}
		prev = tick
	}
	<-ctx.Done()
}

// clock numbers the poller's ticks: a slow poll makes the ticker drop
// the ticks that came while it ran, and the gap in the tick numbers is
// the polls it cost.
type clock struct{ start time.Time }

// slot is the number of the last tick due at t.
func (c clock) slot(t time.Time) int { return int(t.Sub(c.start) / Interval) }

// LiveLine is a sample's live line, printed when the sample is complete
// (now and s.T, seconds on the live lines' clock: Config.LineBase): its t is now in whole seconds,
// as the load's live line counts them (a sample asked at t=5.0s whose
// answer took 1.5 s had been printed after the load's t=6s line), and it
// says when the sample was asked when that is not this second; skipped
// says how many polls were not made because the poll before took too
// long (the timeline has no sample there).
func LiveLine(s result.LagSample, now float64, skipped int) string {
	sec := math.Floor(now)
	head := fmt.Sprintf("t=%3.0fs lag", sec)
	var notes []string
	if s.T < sec {
		notes = append(notes, fmt.Sprintf("asked at t=%.1fs, complete %.1fs later", s.T, now-s.T))
	}
	if skipped > 0 {
		notes = append(notes, fmt.Sprintf("%d %s skipped before it: the poll before took more than %s", skipped, plural(skipped, "poll", "polls"), Interval))
	}
	if len(notes) > 0 {
		head += " (" + strings.Join(notes, "; ") + ")"
	}
	return head + ":" + body(s)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func fetch(ctx context.Context, hc *http.Client, url string) (*answer, error) {
	var a answer
	if err := proc.GetJSON(ctx, hc, url, &a); err != nil {
		return nil, fmt.Errorf("lag: %w", err)
	}
	return &a, nil
}

// Line is a sample's line, stamped with the time it was asked: each
// group's lag, the outbox (or why it is unknown), the dead letters, the
// inbox rows, and why the sample is unknown.
func Line(s result.LagSample) string {
	return fmt.Sprintf("t=%5.1fs lag:", s.T) + body(s)
}

// body is a sample's figures after its line's t: each group's lag age and
// records, the outbox, the dead letters and the inbox rows, or why the
// sample is unknown.
func body(s result.LagSample) string {
	if s.Err != "" && s.MaxAge == nil {
		return " unknown: " + s.Err
	}
	groups := make([]string, 0, len(s.MaxAge))
	for g := range s.MaxAge {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	var b strings.Builder
	for _, g := range groups {
		fmt.Fprintf(&b, " %s age=%.2fs records=%d", g, s.MaxAge[g], s.Records[g])
	}
	switch {
	case s.OutboxErr != "":
		fmt.Fprintf(&b, " outbox=unknown (%s)", s.OutboxErr)
	case s.OutboxBacklog != nil && s.OutboxOldestAge != nil:
		fmt.Fprintf(&b, " outbox=%d (oldest %.2fs)", *s.OutboxBacklog, *s.OutboxOldestAge)
	default:
		b.WriteString(" outbox=unknown")
	}
	if s.DLQRecords != nil {
		fmt.Fprintf(&b, " dlq=%d", *s.DLQRecords)
	} else {
		b.WriteString(" dlq=unknown")
	}
	if s.InboxRows != nil {
		fmt.Fprintf(&b, " inbox_rows=%d", *s.InboxRows)
	}
	if s.Err != "" {
		fmt.Fprintf(&b, " (unknown: %s)", s.Err)
	}
	return b.String()
}
