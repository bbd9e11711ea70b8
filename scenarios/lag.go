package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"imlab/ref/server"
)

// lagAnswer is the part of GET /v1/lab/lag the runner reads.
type lagAnswer struct {
	At                     time.Time          `json:"at"`
	MaxAgeSeconds          map[string]float64 `json:"max_age_seconds"`
	UnknownAge             map[string]int     `json:"unknown_age"`
	Records                map[string]int64   `json:"records"`
	OutboxBacklog          int64              `json:"outbox_backlog"`
	OutboxOldestAgeSeconds float64            `json:"outbox_oldest_age_seconds"`
	DLQRecords             int64              `json:"dlq_records"`
	Errors                 []string           `json:"errors"`
}

// maxLagBody bounds a lag answer.
const maxLagBody = 1 << 20

// LagStale is how old the server's latest measurement may be when the
// runner reads it: an older one (the monitor is stuck, e.g. on a broker
// that does not answer) is an unknown sample, not a current one.
const LagStale = 5 * time.Second

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
// LagInterval until ctx ends and returns the samples (T relative to base).
// It prints one line per sample to the progress writer.
func (r *run) pollLag(ctx context.Context, base time.Time) []LagSample {
	if !r.f.UsesKafka() {
		<-ctx.Done()
		return nil
	}
	hc := &http.Client{Timeout: lagTimeout}
	defer hc.CloseIdleConnections()
	tk := time.NewTicker(LagInterval)
	defer tk.Stop()
	var out []LagSample
	for len(out) < MaxLagSamples {
		select {
		case <-ctx.Done():
			return out
		case <-tk.C:
		}
		s := LagSample{T: time.Since(base).Seconds()}
		addr := ""
		for _, p := range r.procs {
			if addr = p.addr(); addr != "" {
				break
			}
		}
		if addr == "" {
			s.Err = "no process running"
		} else if a, err := fetchLag(ctx, hc, "http://"+addr+server.LagPath); err != nil {
			if ctx.Err() != nil {
				return out
			}
			s.Err = err.Error()
		} else {
			s.Err = a.unknownReason(time.Now())
			s.MaxAge, s.Records = a.MaxAgeSeconds, a.Records
			s.OutboxBacklog, s.OutboxOldestAge, s.DLQRecords = a.OutboxBacklog, a.OutboxOldestAgeSeconds, a.DLQRecords
		}
		out = append(out, s)
		if r.cfg.Progress != nil {
			fmt.Fprintln(r.cfg.Progress, lagLine(s))
		}
	}
	<-ctx.Done()
	return out
}

func fetchLag(ctx context.Context, hc *http.Client, url string) (*lagAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("lag: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("lag: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxLagBody))
	if err != nil {
		return nil, fmt.Errorf("lag: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("lag: status %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var a lagAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("lag: %w", err)
	}
	return &a, nil
}

func lagLine(s LagSample) string {
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
	if s.Err != "" {
		fmt.Fprintf(&b, " (unknown: %s)", s.Err)
	}
	return b.String()
}
