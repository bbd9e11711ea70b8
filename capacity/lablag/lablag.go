// Package lablag reads the contract's lab lag route (GET /v1/lab/lag) for
// a capacity search: one answer (Once), or a poll once a second through a
// step's measured window (Poll).
package lablag

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
)

// Path is the contract's lab lag route.
const Path = "/v1/lab/lag"

// Answer is the part of GET /v1/lab/lag read: the largest age per
// consumer group, partitions of unknown age, the monitor's errors.
type Answer struct {
	At         time.Time          `json:"at"`
	MaxAge     map[string]float64 `json:"max_age_seconds"`
	UnknownAge map[string]int     `json:"unknown_age"`
	Errors     []string           `json:"errors"`
}

// Result is what Poll saw: the complete polls, the largest age of any
// group, and each group's largest age at the first and the last poll.
type Result struct {
	Polls       int
	Max         float64
	First, Last map[string]float64
}

// Poll polls the lag route once a second while inWindow says the
// measured window runs, until ctx ends; a poll that fails, or whose
// answer is incomplete or stale, is not counted.
func Poll(ctx context.Context, target string, inWindow func() bool) Result {
	var res Result
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return res
		case <-tk.C:
			if !inWindow() {
				continue
			}
			if a, ok := Once(ctx, hc, target); ok {
				res.Polls++
				if res.First == nil {
					res.First = a.MaxAge
				}
				res.Last = a.MaxAge
				for _, v := range a.MaxAge {
					res.Max = max(res.Max, v)
				}
			}
		}
	}
}

// Once asks the lag route once; ok is false when it did not answer, or
// its answer is incomplete (a partition of unknown age, an error) or
// stale (more than 5 s old).
func Once(ctx context.Context, hc *http.Client, target string) (Answer, bool) {
	var a Answer
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(target, "/")+Path, nil)
	if err != nil {
		return a, false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return a, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return a, false
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&a); err != nil {
		return a, false
	}
	if a.At.IsZero() || time.Since(a.At) > 5*time.Second || len(a.UnknownAge) > 0 || len(a.Errors) > 0 {
		return a, false
	}
	return a, true
}
