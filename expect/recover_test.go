package expect

import (
	"strings"
	"testing"
	"time"

	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
	"imlab/recovery"
	"imlab/result"
	"imlab/result/resulttest"
	"imlab/scenario"
)

func TestRecoverySince(t *testing.T) {
	b := schedule.Burst{Base: 10, Peak: 100, At: 2 * time.Second, Len: 3 * time.Second}
	if at, what := RecoverySince(b, 10*time.Second, 0.5, nil); at != 5.5 || what != "end of the burst" {
		t.Fatalf("burst: %g %q", at, what)
	}
	ev := []result.FaultEvent{{At: 3, Fault: "kill(consumer)", Action: "inject"}, {At: 7, Fault: "kill(consumer)", Action: "heal"}}
	if at, what := RecoverySince(b, 10*time.Second, 0.5, ev); at != 7 || what != "heal of kill(consumer)" {
		t.Fatalf("fault after the burst: %g %q", at, what)
	}
	if at, what := RecoverySince(schedule.Constant{PerSec: 5}, 10*time.Second, 0.5, nil); at != 10.5 || what != "end of the load" {
		t.Fatalf("no burst, no fault: %g %q", at, what)
	}
	// repeating bursts: the last one that starts inside the load.
	rb := schedule.Burst{Base: 10, Peak: 100, At: time.Second, Len: time.Second, Every: 4 * time.Second}
	if from, to, ok := BurstWindow(rb, 10*time.Second); !ok || from != 9*time.Second || to != 10*time.Second {
		t.Fatalf("repeating: %s %s %v", from, to, ok)
	}
}

func TestRecoveryChecks(t *testing.T) {
	e := scenario.ExpectSpec{MaxRecovery: dur(3 * time.Second), MinDrainRate: f64(4000)}
	eval := func(lag []result.LagSample) map[string]result.Check {
		t.Helper()
		fig, err := RecoveryFigures(RecoveryConfig(e, 2, 10*time.Second), "end of the burst", lag)
		if err != nil {
			t.Fatal(err)
		}
		return byName(recoveryChecks(e, Observed{UsesKafka: true, Recovery: fig}))
	}
	cs := eval(resulttest.LagTimeline(0, 0, 3, 2, 0.5, 0.1, 0, 0))
	for _, n := range []string{"lag_recovered", "max_recovery", "min_drain_rate"} {
		if !cs[n].OK {
			t.Errorf("recovering run: %s failed: %+v", n, cs[n])
		}
	}
	if !strings.Contains(cs["max_recovery"].Got, "2s after the end of the burst") || !strings.Contains(cs["min_drain_rate"].Got, "5000 records/s") {
		t.Errorf("figures: %+v %+v", cs["max_recovery"], cs["min_drain_rate"])
	}
	// too slow: recovered after 5 s.
	cs = eval(resulttest.LagTimeline(0, 0, 3, 3, 3, 3, 3, 0.5, 0.5, 0.5))
	if !cs["lag_recovered"].OK || cs["max_recovery"].OK {
		t.Errorf("slow recovery: %+v", cs)
	}
	// never recovers: every recovery check fails with the reason.
	cs = eval(resulttest.LagTimeline(0, 0, 3, 4, 5, 6, 7))
	if cs["lag_recovered"].OK || cs["max_recovery"].OK || !strings.Contains(cs["lag_recovered"].Got, "not_recovered: group imlab-inbox still above") {
		t.Errorf("never recovers: %+v", cs)
	}
	// the polls failed after the burst: unknown, never a pass.
	cs = eval(resulttest.LagTimeline(0, 0, -1, -1, -1, -1))
	if cs["lag_recovered"].OK || cs["max_recovery"].OK || cs["min_drain_rate"].OK || !strings.Contains(cs["lag_recovered"].Got, "unknown") {
		t.Errorf("unknown: %+v", cs)
	}
	// a sample the monitor could not complete is unknown too.
	lag := resulttest.LagTimeline(0, 0, 3, 0.5, 0.5, 0.5, 0.5)
	for i := 3; i < len(lag); i++ {
		lag[i].Err = "group imlab-inbox: age of 3 partitions unknown"
	}
	if cs = eval(lag); cs["lag_recovered"].OK {
		t.Errorf("errors in the samples: %+v", cs["lag_recovered"])
	}
	// no backlog: no drain rate, and min_drain_rate says so.
	cs = eval(resulttest.LagTimeline(0, 0, 0, 0, 0, 0))
	if !cs["lag_recovered"].OK || cs["min_drain_rate"].OK || !strings.Contains(cs["min_drain_rate"].Got, "no backlog") {
		t.Errorf("no backlog: %+v", cs)
	}
	// without Kafka nothing is checked unless asked; not computed fails.
	if got := recoveryChecks(scenario.ExpectSpec{}, Observed{}); len(got) != 0 {
		t.Errorf("no kafka: %+v", got)
	}
	if got := byName(recoveryChecks(scenario.ExpectSpec{}, Observed{UsesKafka: true})); got["lag_recovered"].OK {
		t.Errorf("not computed passed: %+v", got)
	}
	off := false
	if got := recoveryChecks(scenario.ExpectSpec{LagRecovered: &off}, Observed{UsesKafka: true}); len(got) != 0 {
		t.Errorf("lag_recovered: false still checked: %+v", got)
	}
}

// genTimeline is a generator timeline of n seconds with started[i] sends
// in second i+1 and a start delay p99 of delayUS.
func genTimeline(started []uint64, delayUS int64) *summary.Summary {
	s := &summary.Summary{}
	for i, n := range started {
		s.Timeline = append(s.Timeline, summary.Second{T: i + 1, Started: n, OK: n, SendDelay: summary.Quantiles{Count: int64(n), P99: delayUS}})
	}
	return s
}

func TestBurstFigures(t *testing.T) {
	sh := schedule.Burst{Base: 100, Peak: 50000, At: 2 * time.Second, Len: 2 * time.Second}
	d := 8 * time.Second
	// on time: 100/s, then 50k/s in seconds 3 and 4 (covering [2,4)).
	kept := BurstFigures(sh, d, genTimeline([]uint64{100, 100, 50000, 50000, 100, 100, 100, 100}, 900), 0.5)
	if kept == nil || kept.From != 2.5 || kept.To != 4.5 || kept.PeakPerSec != 50000 {
		t.Fatalf("figures %+v", kept)
	}
	if kept.Started != 100200 || kept.Intended < 100199 || kept.Intended > 100201 || kept.IntendedPerSec < 49999 || kept.StartedPerSec != 50000 {
		t.Fatalf("counts %+v", kept)
	}
	if c := generatorCheck(scenario.ExpectSpec{}, kept); !c.OK || !strings.Contains(c.Got, "50000/s intended, 50000/s started") {
		t.Fatalf("kept up: %+v", c)
	}
	// fell behind: only 30k/s started, the rest spilled seconds later.
	behind := BurstFigures(sh, d, genTimeline([]uint64{100, 100, 30000, 30000, 30000, 10100, 100, 100}, 900), 0.5)
	if c := generatorCheck(scenario.ExpectSpec{}, behind); c.OK || !strings.Contains(c.Got, "fell behind") {
		t.Fatalf("behind: %+v", c)
	}
	// on count but late: start delay p99 400 ms.
	late := BurstFigures(sh, d, genTimeline([]uint64{100, 100, 50000, 50000, 100, 100, 100, 100}, 400_000), 0.5)
	if c := generatorCheck(scenario.ExpectSpec{}, late); c.OK {
		t.Fatalf("late: %+v", c)
	}
	// a burst second without a start delay measured: unknown, not 0.
	blind := genTimeline([]uint64{100, 100, 50000, 50000, 100, 100, 100, 100}, 900)
	blind.Timeline[3].SendDelay = summary.Quantiles{}
	if c := generatorCheck(scenario.ExpectSpec{}, BurstFigures(sh, d, blind, 0.5)); c.OK || !strings.Contains(c.Got, "unknown") {
		t.Fatalf("unmeasured delay: %+v", c)
	}
	if c := generatorCheck(scenario.ExpectSpec{}, nil); c.OK {
		t.Fatalf("not measured passed: %+v", c)
	}
	if BurstFigures(schedule.Constant{PerSec: 5}, d, genTimeline([]uint64{5}, 0), 0) != nil {
		t.Fatal("figures for a constant shape")
	}
	// Evaluate adds the check for a burst shape only.
	if cs := byName(Evaluate(scenario.ExpectSpec{}, Observed{BurstShape: true, Burst: behind})); cs["generator_kept_up"].OK || cs["generator_kept_up"].Name == "" {
		t.Fatalf("evaluate: %+v", cs)
	}
	if cs := byName(Evaluate(scenario.ExpectSpec{}, Observed{})); cs["generator_kept_up"].Name != "" {
		t.Fatalf("checked without a burst: %+v", cs)
	}
}

// TestRecoveryOutboxOnlyGaps: the groups' recovery is judged on the
// consumer lag alone, so seconds whose outbox query alone failed count
// for it (a known consumer lag under the bound); the outbox's drain stays
// unknown over those seconds. A sample whose consumer lag was not
// measured is unknown for both, whatever outbox figures it holds.
func TestRecoveryOutboxOnlyGaps(t *testing.T) {
	// Lag back under the bound (1s) from t=3; the outbox above it until
	// t=3, then not measured (its query failed) from t=4 to the end.
	lag := resulttest.WithOutbox(resulttest.LagTimeline(3, 3, 3, 0.5, 0.5, 0.5, 0.5), 3, 3, 3, 3, -1, -1, -1)
	cfg := RecoveryConfig(scenario.ExpectSpec{}, 2, 10*time.Second)
	cfg.Outbox = true
	fig, err := RecoveryFigures(cfg, "end of the burst", lag)
	if err != nil {
		t.Fatal(err)
	}
	// Counted: good from t=3, held over t=4..6 (2s hold): recovered at 3.
	// Had those seconds been unknown for the group, the run of good
	// samples would have broken at t=4 before the hold and never held.
	if fig.Status != recovery.Recovered || *fig.RecoveredAt != 3 || fig.UnknownSamples != 0 {
		t.Fatalf("groups: %s (%s) at %v, %d unknown samples; want recovered at t=3, none unknown", fig.Status, fig.Reason, fig.RecoveredAt, fig.UnknownSamples)
	}
	if o := fig.Outbox; o == nil || o.Status != recovery.Unknown || o.DrainedAt != nil || !strings.Contains(o.Reason, "not measured since t=4.0s") {
		t.Fatalf("outbox: %+v; want unknown since t=4", o)
	}
	checks := recoveryChecks(scenario.ExpectSpec{MaxRecovery: dur(2 * time.Second)}, Observed{UsesKafka: true, Recovery: fig})
	for _, c := range checks {
		if !c.OK {
			t.Errorf("%s: %s, want pass", c.Name, c.Got)
		}
	}

	// The same seconds with the consumer lag unknown too: the group's
	// recovery breaks at t=4 and is not held by the end.
	for i := 4; i < 7; i++ {
		lag[i].Err = "group imlab-inbox: timeout"
	}
	fig, err = RecoveryFigures(cfg, "end of the burst", lag)
	if err != nil {
		t.Fatal(err)
	}
	if fig.Status == recovery.Recovered || fig.UnknownSamples != 3 {
		t.Fatalf("consumer lag unknown from t=4: %s (%s), %d unknown samples; want not recovered, 3 unknown", fig.Status, fig.Reason, fig.UnknownSamples)
	}

	// A sample that holds outbox figures but no consumer lag measurement
	// (an error other than the outbox's) measured the outbox for nothing
	// here: unknown for it too, never under the bound.
	rs := RecoverySamples(resulttest.WithOutbox([]result.LagSample{{T: 1, Err: "the latest measurement is 12s old"}}, 0))
	if rs[0].Known || rs[0].OutboxAge >= 0 {
		t.Fatalf("stale sample: %+v; want unknown for the groups and the outbox", rs[0])
	}
}
