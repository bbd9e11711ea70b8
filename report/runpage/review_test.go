package runpage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"imlab/checker"
	"imlab/expect"
	"imlab/report"
	"imlab/result"
	"imlab/result/resulttest"
	"imlab/scenario"
)

// reviewRun is a hand-made result of a burst run with consumers
// consumer processes whose burst started at burstAt (time base seconds).
func reviewRun(t *testing.T, name string, consumers int, burstAt float64, lagAges ...float64) *result.Result {
	t.Helper()
	lag := resulttest.LagTimeline(lagAges...)
	fig, err := expect.RecoveryFigures(expect.RecoveryConfig(scenario.ExpectSpec{}, burstAt+2, time.Minute), "end of the burst", lag)
	if err != nil {
		t.Fatal(err)
	}
	r := &result.Result{Format: result.ResultFormat, Scenario: name, StartedAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Seconds: 20, Passed: true,
		Verdict: &checker.Verdict{Valid: true}, Checks: []result.Check{{Name: "verdict", Want: "valid", Got: "valid", OK: true}},
		Settings: []result.Setting{{Name: "policy", Value: "store"}, {Name: "consumer_processes", Value: string(rune('0' + consumers))},
			{Name: "redis_prefix", Value: "imlab:scn:" + name}, {Name: "processes", Value: "api=api (exec, log /tmp/" + name + "/process-api.log)"}},
		Lag: lag, Recovery: fig,
		Burst: &result.BurstFigures{From: burstAt, To: burstAt + 2, PeakPerSec: 50000, IntendedPerSec: 50000, StartedPerSec: 49800, Intended: 100400, Started: 100100, Ratio: 0.997, StartDelayP99ms: f64(3.5)},
		Spec:  &scenario.File{Name: name}}
	for i := 0; i < len(lagAges); i++ {
		r.Sends = append(r.Sends, result.SendSecond{T: float64(i), OK: 100, AckP99: result.AckMs(100, 12000)})
	}
	return r
}

func writeRun(t *testing.T, r *result.Result) string {
	t.Helper()
	dir := t.TempDir()
	if err := result.WriteFile(filepath.Join(dir, result.ResultFile), r.WriteJSON); err != nil {
		t.Fatal(err)
	}
	return dir
}

func reviewPage(t *testing.T, runs ...*result.Result) string {
	t.Helper()
	var read []*result.Result
	for _, r := range runs {
		back, err := result.ReadRun(writeRun(t, r))
		if err != nil {
			t.Fatal(err)
		}
		read = append(read, back)
	}
	rep, err := Review(read)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := report.WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestReviewPage(t *testing.T) {
	a := reviewRun(t, "burst-50k.consumers-1", 1, 3, 0, 0, 0, 0.5, 4, 6, 5, 3, 0.5, 0.2, 0, 0)
	a.Spec.Variant = "consumers=1"
	b := reviewRun(t, "burst-50k.consumers-2", 2, 4, 0, 0, 0, 0, 0.5, 3, 1.5, 0.4, 0.1, 0, 0, 0)
	b.Spec.Variant = "consumers=2"
	page := reviewPage(t, a, b)
	for _, want := range []string{
		"imlab review: 2 runs of burst-50k",
		"#1 burst-50k.consumers-1", "#2 burst-50k.consumers-2",
		"ACK latency, whole run #1 burst-50k.consumers-1", "nothing measured (0 ACKed sends only): no send was ACKed",
		"Settings that differ (1 differ, 2 the same",
		"consumer_processes",
		"Recovery (from the end of the burst",
		"end of the burst",
		"Generator during the burst",
		"100100 of 100400 (0.997)",
		"Consumer lag age", "Records behind", "Throughput", "ACK latency p99",
		"t=3.0s (burst start)", "t=4.0s (burst start)",
		"valid: 2 of 2 verdicts valid; 2 of 2 runs passed their checks",
		"every run within load",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "different scenarios") {
		t.Error("two variants of one scenario are flagged as different scenarios")
	}
	// The alignment line is drawn, but it is no fault: the fault schedule
	// of two runs without faults says none was injected; the header's
	// time is the runs' summed, and says so.
	if !strings.Contains(page, "no faults injected") || strings.Contains(page, "<td>align</td>") ||
		!strings.Contains(page, "alignment point of every run") || !strings.Contains(page, "<th>Runs&#39; time, summed</th><td>40s</td>") {
		t.Error("the alignment line is listed as a fault, missing from the charts, or the summed time is not labelled")
	}
	if strings.Contains(page, "redis_prefix") {
		t.Error("the run-specific Redis prefix is listed as a difference")
	}
	// recovery: a's burst ends at t=5 and its lag is under 1 s from t=8
	// on (3 s); b's ends at t=6, under from t=7 (1 s).
	if !strings.Contains(page, "<td>#1 burst-50k.consumers-1</td><td>recovered</td><td>3s</td>") ||
		!strings.Contains(page, "<td>#2 burst-50k.consumers-2</td><td>recovered</td><td>1s</td>") {
		t.Errorf("recovery rows missing:\n%s", page[strings.Index(page, "Recovery (from"):][:1500])
	}

	// every curve is shifted to its run's burst start.
	rep, err := Review([]*result.Result{a, b})
	if err != nil {
		t.Fatal(err)
	}
	// (a lag sample is drawn at its time, a second of sends at its middle)
	for _, ch := range rep.Charts {
		a0, b0 := -3.0, -4.0
		if ch.Unit != "s" && ch.Unit != "records" {
			a0, b0 = -3.5, -4.5
		}
		if len(ch.Series) != 2 || ch.Series[0].Points[0].T != a0 || ch.Series[1].Points[0].T != b0 {
			t.Fatalf("chart %q not aligned at the burst starts (want %g and %g): %+v", ch.Title, a0, b0, ch.Series)
		}
	}
	if p := rep.Charts[0].Series[0].Points[5]; p.T != 2 || p.V != 6 {
		t.Fatalf("lag of run a at 2 s after its burst start: %+v", p)
	}

	// an incomplete run lists its first errors only.
	inc := reviewRun(t, "burst-50k", 1, 3, 0, 0, 0)
	inc.Incomplete, inc.Passed = true, false
	for i := 0; i < 50; i++ {
		inc.Errors = append(inc.Errors, fmt.Sprintf("device %d ack 1: timeout", i))
	}
	if page := reviewPage(t, inc); !strings.Contains(page, "47 more in its result.json") || strings.Contains(page, "device 10 ack") {
		t.Errorf("an incomplete run's errors are not capped: %v %v", strings.Contains(page, "47 more in its result.json"), strings.Contains(page, "device 10 ack"))
	}

	// different scenarios are allowed, and said at the top.
	c := reviewRun(t, "consumer-kill", 1, 2, 0, 0, 3, 0.5, 0.1, 0, 0)
	c.Burst = nil
	c.Events = []result.FaultEvent{{At: 2, Fault: "kill(consumer)", Action: "inject"}, {At: 5, Fault: "kill(consumer)", Action: "heal"}}
	page = reviewPage(t, a, c)
	// each run's faults, on the common axis: c is aligned at its first
	// fault (t=2), so its heal is 3 s after the alignment point.
	if !strings.Contains(page, `<td class="num">3.000 s</td><td>heal</td><td>#2 consumer-kill: heal kill(consumer)</td>`) ||
		!strings.Contains(page, `<td class="num">0.000 s</td><td>inject</td><td>#2 consumer-kill: inject kill(consumer)</td>`) {
		t.Errorf("the runs' faults are not in the fault schedule:\n%s", page[strings.Index(page, "Fault schedule"):][:800])
	}
	if !strings.Contains(page, "2 different scenarios (burst-50k, consumer-kill)") {
		t.Error("a compare of different scenarios does not say so")
	}
	if i, j := strings.Index(page, "different scenarios"), strings.Index(page, "Checks"); i < 0 || i > j {
		t.Error("the different-scenarios warning is not at the top")
	}
}

func TestReadRunErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nowhere")
	if _, err := result.ReadRun(missing); err == nil || !errors.Is(err, scenario.ErrInvalid) || !strings.Contains(err.Error(), filepath.Join(missing, result.ResultFile)) && !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing: %v", err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct{ file, body, want string }{
		{"old.json", `{"scenario":"burst"}`, "older imlab"},
		{"other.json", `{"format":"imlab-scenario-result/9","scenario":"burst"}`, `result format "imlab-scenario-result/9"`},
		{"summary.json", `{"run_id":"x"}`, "not a scenario result"},
		{"junk.json", `{{`, "not a result.json"},
	} {
		p := write(c.file, c.body)
		_, err := result.ReadRun(p)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming the file and %q", c.file, err, c.want)
		}
	}
	if _, err := Review(nil); err == nil {
		t.Error("a review of no runs")
	}
}

// TestReviewShowsWhatWentWrong: the review page lists each run's findings
// with their msg_ids, charts the failed and unknown sends per second,
// leaves a gap where a second had no ACK (never a line through it), names
// an invalid verdict a negative control when the file expects it, and
// draws no lag chart or recovery table when no run had a queue.
func TestReviewShowsWhatWentWrong(t *testing.T) {
	clean := reviewRun(t, "strict", 1, 0, 0, 0, 0)
	clean.Lag, clean.Recovery, clean.Burst = nil, nil, nil
	lossy := reviewRun(t, "unsafe", 1, 0, 0, 0, 0)
	lossy.Lag, lossy.Recovery, lossy.Burst = nil, nil, nil
	lossy.Verdict.Valid = false
	lossy.Spec.Expect.Verdict = "invalid"
	lossy.Findings = []result.FindingSummary{{Name: "lost", Count: 2, MsgIDs: []uint64{386769725268430848, 386769726518333440}, Examples: []string{"msg_id 386769725268430848 never reached device 118 (uid 60)"}},
		{Name: "skipped"}}
	lossy.Sends[1] = result.SendSecond{T: 1, Started: 100, Unknown: 100} // no ACK: a gap
	page := reviewPage(t, clean, lossy)
	for _, want := range []string{
		"#2 unsafe: lost", "386769725268430848", "386769726518333440", "never reached device 118",
		"Sends failed or of unknown outcome per second",
		"#2 unsafe INVALID, as its scenario expects: a negative control",
		"No recovery table and no lag charts",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, absent := range []string{"Consumer lag age", "Records behind", "Recovery (from", "Generator during the burst", "#2 unsafe: skipped"} {
		if strings.Contains(page, absent) {
			t.Errorf("page has %q", absent)
		}
	}
	rep, err := Review([]*result.Result{clean, lossy})
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range rep.Charts {
		if strings.HasPrefix(ch.Title, "ACK latency p99") && (len(ch.Series[1].Gaps) != 1 || len(ch.Series[1].Points) != 2) {
			t.Errorf("ACK p99 of #2: points %v gaps %v, want the second without an ACK as a gap", ch.Series[1].Points, ch.Series[1].Gaps)
		}
		if strings.HasPrefix(ch.Title, "Sends failed") && ch.Series[1].Points[1].V != 100 {
			t.Errorf("failed sends of #2: %v", ch.Series[1].Points)
		}
	}
}

// TestReviewLoadAverage: the review's runs table shows each run's machine
// load, unknown where the result has none.
func TestReviewLoadAverage(t *testing.T) {
	a := reviewRun(t, "burst-50k", 1, 3, 0, 0, 0)
	a.LoadAverage = &result.LoadAverage{Start: [3]float64{2.1, 1, 1}, End: [3]float64{6.8, 3, 1}}
	b := reviewRun(t, "burst-50k", 1, 3, 0, 0, 0)
	page := reviewPage(t, a, b)
	if !strings.Contains(page, "<td>2.10 → 6.80</td>") || !strings.Contains(page, "<td>unknown</td>") {
		t.Error("the runs table lacks the machine load")
	}
}
