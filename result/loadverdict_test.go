package result

import (
	"strings"
	"testing"

	"imlab/loadgen/summary"
	"imlab/scenario"
)

// TestSendFailuresByFaultWindow: failed, unknown and retried sends are
// counted inside a fault window when they were intended in it (to a tenth
// of a second, the load starting offset s after the time base), outside
// otherwise; a fault that never healed lasts to the end.
func TestSendFailuresByFaultWindow(t *testing.T) {
	events := []FaultEvent{
		{At: 1, Fault: "latency(mysql,300ms)", Action: "inject"}, {At: 2.5, Fault: "latency(mysql,300ms)", Action: "heal"},
		{At: 5, Fault: "down(mysql)", Action: "inject"}, // never healed
	}
	bins := []summary.IntendedFailures{
		{At: 0.8, Unknown: 1},             // 1.0..1.1 after the base: inside latency
		{At: 2.4, Fail: 2, Retried: 3},    // 2.6..2.7: after the heal, outside
		{At: 3.0, Unknown: 4},             // 3.2..3.3: outside
		{At: 4.9, Unknown: 5, Retried: 5}, // 5.1..5.2: inside down, to the end
	}
	sf := SendFailuresOf(events, bins, 0.2, 9)
	if len(sf.Windows) != 2 || sf.Windows[1].To != 9 {
		t.Fatalf("windows %+v", sf.Windows)
	}
	if sf.InFaults != (SendCounts{Unknown: 6, Retried: 5}) || sf.Outside != (SendCounts{Failed: 2, Unknown: 4, Retried: 3}) {
		t.Fatalf("inside %+v, outside %+v", sf.InFaults, sf.Outside)
	}
}

// TestLoadVerdictNamesItsCause: a run OVERLOADED only by sends intended in
// its fault windows says so; one with failures outside says that the
// faults do not explain them; a result without the attribution says that
// the cause is not recorded; a clean run is within load.
func TestLoadVerdictNamesItsCause(t *testing.T) {
	retried := uint64(0)
	r := &Result{Spec: &scenario.File{}, RetriedSends: &retried, Sends: []SendSecond{{T: 1, OK: 100}, {T: 2, OK: 50, Unknown: 50}}}
	r.SendFailures = &SendFailures{InFaults: SendCounts{Unknown: 50}, Windows: []FaultWindow{{Fault: "down(mysql)", From: 1, To: 2}}}
	if l, c := r.LoadLabel(), r.LoadCause(); l != "OVERLOADED by the faults" || !strings.Contains(c, "caused by the faults") || !strings.Contains(c, "down(mysql) 1.0–2.0 s") {
		t.Errorf("in the faults: %q, %q", l, c)
	}
	r.SendFailures.Outside = SendCounts{Unknown: 3}
	if l, c := r.LoadLabel(), r.LoadCause(); l != "OVERLOADED: 25.0% of sends failed or of unknown outcome" || !strings.Contains(c, "not explained by the faults alone: 3 failed or unknown") {
		t.Errorf("outside too: %q, %q", l, c)
	}
	r.SendFailures = nil
	if c := r.LoadCause(); !strings.Contains(c, "not recorded") {
		t.Errorf("no attribution: %q", c)
	}
	r.Sends[1] = SendSecond{T: 2, OK: 100}
	if l, c := r.LoadLabel(), r.LoadCause(); l != "within load" || c != "" {
		t.Errorf("clean: %q, %q", l, c)
	}
	if l := (&Result{}).LoadLabel(); l != "" {
		t.Errorf("no load: %q", l)
	}
}

// TestLateSendsLabel: a run whose sends were all ACKed but a quarter of
// them started late is OVERLOADED and says so; late sends in the burst's
// seconds only (±1 s) are the burst's, the label says so; a result written
// before late sends were recorded is judged on the rest and says lateness
// is unknown.
func TestLateSendsLabel(t *testing.T) {
	retried, late := uint64(0), uint64(100)
	r := &Result{Spec: &scenario.File{}, RetriedSends: &retried, LateSends: &late, LateAfterMs: 1,
		Sends: []SendSecond{{T: 1, Started: 100, OK: 100}, {T: 2, Started: 100, OK: 100, Late: 20}, {T: 3, Started: 100, OK: 100, Late: 40},
			{T: 4, Started: 100, OK: 100, Late: 40}}}
	want := "OVERLOADED: 25.0% of sends started late (the target did not keep up with the offered rate)"
	// No burst and no fault: no split into seconds the run did not have.
	if l, c := r.LoadLabel(), r.LoadCause(); l != want || !strings.Contains(c, "100 sends started more than 1 ms after their intended time") ||
		strings.Contains(c, "burst") || strings.Contains(c, "fault") {
		t.Errorf("late, no burst: %q, %q", l, c)
	}
	r.Burst = &BurstFigures{From: 3, To: 4}
	if l, c := r.LoadLabel(), r.LoadCause(); l != "OVERLOADED by the burst" || !strings.Contains(c, "100 in the burst's seconds") ||
		!strings.Contains(c, "0 outside") || strings.Contains(c, "fault window") {
		t.Errorf("late in the burst: %q, %q", l, c)
	}
	r.Burst = &BurstFigures{From: 4.5, To: 5} // seconds 3.. and 4..: 80 late, 20 outside (5%)
	r.Events = []FaultEvent{{At: 1, Fault: "down(mysql)", Action: "inject"}, {At: 1.5, Fault: "down(mysql)", Action: "heal"}}
	if l, c := r.LoadLabel(), r.LoadCause(); l != "OVERLOADED by the burst and the faults" || !strings.Contains(c, "in the burst's seconds") || !strings.Contains(c, "in a fault window's") {
		t.Errorf("late in the burst and the faults: %q, %q", l, c)
	}
	jitter := 4.0 // ms: a busy machine's timers, not a queue
	r.StartDelayP99Ms = &jitter
	if l := r.LoadLabel(); l != "within load" {
		t.Errorf("late by a start delay p99 of 4 ms: %q, want within load", l)
	}
	r.LateSends, r.StartDelayP99Ms = nil, nil
	if l, _, _ := r.LoadOutcome(); l.Overloaded {
		t.Errorf("late not recorded: %+v, want judged on the rest", l)
	}
	if _, over, _ := r.LoadOutcome(); !strings.Contains(over, "late sends were not recorded") {
		t.Errorf("late not recorded: %q", over)
	}
}

// TestLateReasonSaidOnce: an OVERLOADED run's late fraction is said once
// between its label and its cause (the terminal's load line is the label
// then the cause): in the label when nothing explains it, in the cause when
// the label names what does (the burst).
func TestLateReasonSaidOnce(t *testing.T) {
	retried, late := uint64(0), uint64(100)
	r := &Result{Spec: &scenario.File{}, RetriedSends: &retried, LateSends: &late, LateAfterMs: 1,
		Sends: []SendSecond{{T: 1, Started: 100, OK: 100}, {T: 2, Started: 100, OK: 100, Late: 20}, {T: 3, Started: 100, OK: 100, Late: 40},
			{T: 4, Started: 100, OK: 100, Late: 40}}}
	const reason = "of sends started late"
	if l, c := r.LoadLabel(), r.LoadCause(); strings.Count(l+": "+c, reason) != 1 || !strings.Contains(l, reason) {
		t.Errorf("late, no burst: said %d times: %q: %q", strings.Count(l+": "+c, reason), l, c)
	}
	r.Burst = &BurstFigures{From: 3, To: 4}
	if l, c := r.LoadLabel(), r.LoadCause(); strings.Count(l+": "+c, reason) != 1 || !strings.Contains(c, reason) {
		t.Errorf("late in the burst: said %d times: %q: %q", strings.Count(l+": "+c, reason), l, c)
	}
}
