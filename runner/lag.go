package runner

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"imlab/ref/server"
	"imlab/result"
	"imlab/runner/proc"
)

// lagAnswer is the part of GET /v1/lab/lag the runner reads.
type lagAnswer struct {
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
}

// consumed is each group's position summed over the partitions (end
// offset minus records behind): the records it has consumed.
func (a *lagAnswer) consumed() map[string]int64 {
	out := map[string]int64{}
	for _, p := range a.Partitions {
		out[p.Group] += p.End - p.Records
	}
	return out
}

// lagLog is the lag timeline, appended by the poller and read by the run
// while it waits for recovery.
type lagLog struct {
	mu      sync.Mutex
	samples []result.LagSample
}

func (l *lagLog) add(s result.LagSample) {
	l.mu.Lock()
	l.samples = append(l.samples, s)
	l.mu.Unlock()
}

// snapshot is a copy of the samples so far.
func (l *lagLog) snapshot() []result.LagSample {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]result.LagSample(nil), l.samples...)
}

func (l *lagLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.samples)
}

// countRows is the inbox row count, read by the lab directly from MySQL
// (not through the proxy, so that a MySQL fault does not blind it);
// nil when it could not be read.
func countRows(ctx context.Context, db *sql.DB) *int64 {
	if db == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, lagTimeout)
	defer cancel()
	var n int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM offline_msg").Scan(&n); err != nil {
		return nil
	}
	return &n
}

// LagStale is how old the server's latest measurement may be when the
// runner reads it: an older one (the monitor is stuck, e.g. on a broker
// that does not answer) is an unknown sample, not a current one.
const LagStale = 10 * time.Second

// unknownReason says why an answer is not a measurement of now ("" when
// it is one): the monitor's own errors, partitions whose age it could not
// read, a snapshot never taken or too old. A failed measurement is
// unknown, never 0.
func (a *lagAnswer) unknownReason(now time.Time) string {
	var why []string
	switch {
	case a.At.IsZero():
		why = append(why, "not measured yet")
	case now.Sub(a.At) > LagStale:
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
	why = append(why, a.Errors...)
	return strings.Join(why, "; ")
}

// pollLag polls the lag endpoint of the first live process every
// LagInterval until ctx ends, appending the samples (T relative to base)
// to out; with db it also counts the inbox rows. It asks for a
// measurement of the moment (server.LagNowPath): the monitor's own
// snapshot is up to its interval old, which had put every sample, and the
// peak and recovery times read from them, about half a second late. It prints one line per
// sample to the progress writer.
func (r *run) pollLag(ctx context.Context, base time.Time, db *sql.DB, out *lagLog) {
	if !r.f.UsesKafka() {
		<-ctx.Done()
		return
	}
	hc := &http.Client{Timeout: lagTimeout}
	defer hc.CloseIdleConnections()
	tk := time.NewTicker(LagInterval)
	defer tk.Stop()
	for out.len() < MaxLagSamples {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		s := result.LagSample{T: time.Since(base).Seconds()}
		addr := ""
		for _, p := range r.procs {
			if addr = p.Addr(); addr != "" {
				break
			}
		}
		if addr == "" {
			s.Err = "no process running"
		} else if a, err := fetchLag(ctx, hc, "http://"+addr+server.LagNowPath); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.Err = err.Error()
		} else {
			s.Err = a.unknownReason(time.Now())
			s.MaxAge, s.Records, s.Consumed = a.MaxAgeSeconds, a.Records, a.consumed()
			s.OutboxBacklog, s.OutboxOldestAge, s.DLQRecords = a.OutboxBacklog, a.OutboxOldestAgeSeconds, a.DLQRecords
		}
		s.InboxRows = countRows(ctx, db)
		out.add(s)
		if r.cfg.Progress != nil {
			fmt.Fprintln(r.cfg.Progress, lagLine(s))
		}
	}
	<-ctx.Done()
}

func fetchLag(ctx context.Context, hc *http.Client, url string) (*lagAnswer, error) {
	var a lagAnswer
	if err := proc.GetJSON(ctx, hc, url, &a); err != nil {
		return nil, fmt.Errorf("lag: %w", err)
	}
	return &a, nil
}

func lagLine(s result.LagSample) string {
	if s.Err != "" && s.MaxAge == nil {
		return fmt.Sprintf("t=%5.1fs lag: unknown: %s", s.T, s.Err)
	}
	groups := make([]string, 0, len(s.MaxAge))
	for g := range s.MaxAge {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	var b strings.Builder
	fmt.Fprintf(&b, "t=%5.1fs lag:", s.T)
	for _, g := range groups {
		fmt.Fprintf(&b, " %s age=%.2fs records=%d", g, s.MaxAge[g], s.Records[g])
	}
	fmt.Fprintf(&b, " outbox=%d (oldest %.2fs) dlq=%d", s.OutboxBacklog, s.OutboxOldestAge, s.DLQRecords)
	if s.InboxRows != nil {
		fmt.Fprintf(&b, " inbox_rows=%d", *s.InboxRows)
	}
	if s.Err != "" {
		fmt.Fprintf(&b, " (unknown: %s)", s.Err)
	}
	return b.String()
}
