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
	MaxAgeSeconds          map[string]float64 `json:"max_age_seconds"`
	Records                map[string]int64   `json:"records"`
	OutboxBacklog          int64              `json:"outbox_backlog"`
	OutboxOldestAgeSeconds float64            `json:"outbox_oldest_age_seconds"`
	DLQRecords             int64              `json:"dlq_records"`
	Errors                 []string           `json:"errors"`
}

// maxLagBody bounds a lag answer.
const maxLagBody = 1 << 20

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
	if s.Err != "" {
		return fmt.Sprintf("t=%5.1fs lag: %s", s.T, s.Err)
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
	return b.String()
}
