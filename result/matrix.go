package result

import (
	"fmt"
	"strings"
)

// MatrixTable sets the recovery figures of several runs side by side, one
// line per run: what a consumer-count matrix is run for. A figure that was
// not computed says so.
func MatrixTable(results []*Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-36s %-9s %-6s %-14s %-12s %-18s %-16s %s\n", "scenario", "consumers", "passed", "verdict", "recovery", "drain records/s", "drain rows/s", "backlog peak")
	for _, r := range results {
		verdict := "not checked"
		if r.Verdict != nil {
			verdict = "invalid"
			if r.Verdict.Valid {
				verdict = "valid"
			}
		}
		rec, drain, rows, peak := "n/a", "n/a", "n/a", "n/a"
		if f := r.Recovery; f != nil {
			rec = f.Status
			if f.RecoverySeconds != nil {
				rec = Secs(*f.RecoverySeconds)
			}
			if v, _ := f.MinDrainRecordsPerSec(); v != nil {
				drain = fmt.Sprintf("%.0f", *v)
			} else {
				drain = "unknown"
			}
			rows = OptRate(f.DrainRowsPerSec)
			peak = fmt.Sprint(f.BacklogPeak)
		}
		consumers := "?"
		if r.Spec != nil {
			consumers = fmt.Sprint(r.Spec.ConsumerProcesses())
		}
		fmt.Fprintf(&b, "%-36s %-9s %-6v %-14s %-12s %-18s %-16s %s\n", r.Scenario, consumers, r.Passed, verdict, rec, drain, rows, peak)
	}
	return b.String()
}
