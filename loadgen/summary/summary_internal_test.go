package summary

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"imlab/loadgen/schedule"
)

// TestSummaryKeys: summary.json's pacer keys are snake_case, and a summary
// written with the old keys ("Scheduled", "Started") still reads; its
// outcome is computed from the counts.
func TestSummaryKeys(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, &Summary{Pacer: schedule.Stats{Scheduled: 5, Started: 4}, OK: 3, Unknown: 1, LoadSeconds: 2}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"scheduled": 5`) || strings.Contains(string(b), `"Scheduled"`) {
		t.Fatalf("pacer keys not snake_case:\n%s", b)
	}
	old := `{"run_id":"r","pacer":{"Scheduled":7,"Started":6,"Late":1,"Missed":1},"ok":90,"fail":4,"unknown":6,"achieved_per_sec":50}`
	if err := os.WriteFile(filepath.Join(dir, File), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Read(dir)
	if err != nil || s.Pacer.Scheduled != 7 || s.Pacer.Started != 6 || s.Pacer.Missed != 1 {
		t.Fatalf("old summary: %+v %v", s, err)
	}
	o := s.Outcomes(0)
	if o.Sends != 100 || o.UnknownFrac != 0.06 || o.FailFrac != 0.04 || !o.Overloaded || o.Limit != OverloadFraction {
		t.Fatalf("outcome %+v", o)
	}
	if got := o.String(); !strings.Contains(got, "OVERLOADED") || !strings.Contains(got, "unknown 6.0%") || !strings.Contains(got, "failed 4.0%") {
		t.Fatalf("outcome line %q", got)
	}
	if o := (&Summary{OK: 1000, Unknown: 5, LoadSeconds: 10}).Outcomes(0); o.Overloaded || o.AckedPerSec != 100 {
		t.Fatalf("0.5%% unknown: %+v, want within load at 100/s", o)
	}
	// Every send ACKed, but 28% only after a resent timeout: the server was
	// not keeping up, whatever the final outcomes say.
	o = (&Summary{OK: 1000, RetriedSends: 280, LoadSeconds: 10}).Outcomes(0)
	if !o.Overloaded || o.RetriedFrac != 0.28 || !strings.Contains(o.String(), "OVERLOADED: 28.0% of sends needed a second try") || !strings.Contains(o.String(), "retried above 1.0%") {
		t.Fatalf("28%% retried: %+v %q, want OVERLOADED", o, o.String())
	}
	if o := (&Summary{OK: 1000, RetriedSends: 5, LoadSeconds: 10}).Outcomes(0); o.Overloaded {
		t.Fatalf("0.5%% retried: %+v, want within load", o)
	}
	// Every send ACKed at the first try, but a quarter of them started
	// late: the target did not keep up with the offered rate.
	delay := func(p99us int64) map[string]Quantiles {
		return map[string]Quantiles{"send_delay": {Count: 1000, P99: p99us}}
	}
	o = (&Summary{OK: 1000, Pacer: schedule.Stats{Started: 1000, Late: 250}, LoadSeconds: 10, Latency: delay(2_300_000)}).Outcomes(0)
	if !o.Overloaded || o.LateFrac != 0.25 || o.Label() != "OVERLOADED: 25.0% of sends started late, start delay p99 2.3s (the target did not keep up with the offered rate)" ||
		!strings.Contains(o.String(), "late starts above their bound: more than 5.0% of sends late with a start delay p99 above 100 ms") {
		t.Fatalf("25%% late: %+v %q, want OVERLOADED", o, o.Label())
	}
	if o := (&Summary{OK: 1000, Pacer: schedule.Stats{Started: 1000, Late: 50}, LoadSeconds: 10, Latency: delay(2_300_000)}).Outcomes(0); o.Overloaded {
		t.Fatalf("5%% late: %+v, want within load (the limit is more than 5%%)", o)
	}
	// A busy machine's timers make sends a few ms late: not a queue.
	if o := (&Summary{OK: 1000, Pacer: schedule.Stats{Started: 1000, Late: 400}, LoadSeconds: 10, Latency: delay(4_000)}).Outcomes(0); o.Overloaded {
		t.Fatalf("40%% late by at most 4 ms at p99: %+v, want within load", o)
	}
}
