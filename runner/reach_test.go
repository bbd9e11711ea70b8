package scenarios

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"imlab/chaos"
	"imlab/ref/server"
)

// countingFault is a data fault that reports how much it changed.
type countingFault struct {
	n   int64
	err error
}

func (f *countingFault) Name() string                 { return "counting" }
func (f *countingFault) Inject(context.Context) error { return f.err }
func (f *countingFault) Heal(context.Context) error   { return nil }
func (f *countingFault) Affected() int64              { return f.n }
func (f *countingFault) Validate() error              { return nil }
func plainFault(err error) chaos.Fault {
	return chaos.Func("plain", func(context.Context) error { return err }, nil)
}
func spec(kind string, mayMiss bool) FaultSpec {
	return FaultSpec{Kind: kind, At: Duration(time.Second), MayMiss: mayMiss}
}
func inject(t *testing.T, r *reach) {
	t.Helper()
	_ = r.Inject(context.Background())
}

// TestFaultReach: a fault that affected nothing where it counts, failed to
// inject or never ran is a miss (unless may_miss); one that reached its
// target, or cannot count and injected cleanly, is not.
func TestFaultReach(t *testing.T) {
	cases := []struct {
		name string
		r    *reach
		run  bool
		miss string
	}{
		{"affected something", newReach(0, spec(KindRedisWipe, false), &countingFault{n: 3}), true, ""},
		{"affected nothing", newReach(1, spec(KindRedisWipe, false), &countingFault{}), true, "affected nothing"},
		{"affected nothing, may miss", newReach(2, spec(KindRedisWipe, true), &countingFault{}), true, ""},
		{"inject failed", newReach(3, spec(KindKill, false), plainFault(errors.New("no such process"))), true, "no such process"},
		{"inject failed, may miss", newReach(4, spec(KindKill, true), plainFault(errors.New("x"))), true, ""},
		{"never injected", newReach(5, spec(KindDown, false), plainFault(nil)), false, "never injected"},
		{"cannot count, injected", newReach(6, spec(KindDown, false), plainFault(nil)), true, ""},
	}
	var all []*reach
	for _, c := range cases {
		if c.run {
			inject(t, c.r)
		}
		all = append(all, c.r)
		got := c.r.miss()
		if (c.miss == "") != (got == "") || !strings.Contains(got, c.miss) {
			t.Errorf("%s: miss %q, want %q", c.name, got, c.miss)
		}
	}
	if n := len(faultMisses(all)); n != 3 {
		t.Errorf("%d misses, want 3: %v", n, faultMisses(all))
	}
	// The wrapper keeps what the schedule reads: the count, the check.
	if r := newReach(0, spec(KindRedisWipe, false), &countingFault{n: 9}); r.Affected() != 9 || r.Validate() != nil {
		t.Error("reach does not pass Affected/Validate through")
	}
}

// TestEvaluateRunnerRules: a fault that missed fails faults_reached; an
// unknown lag sample fails max_lag_age even when every measured sample is
// within the bound (a failed measurement is unknown, never 0).
func TestEvaluateRunnerRules(t *testing.T) {
	e := ExpectSpec{MaxLagAge: dur(5 * time.Second)}
	good := Observed{Checked: true, Valid: true, LagSamples: 5, MaxLagAge: time.Second, DrainComplete: true, Faults: 2}
	if cs := Evaluate(e, good); !Passed(cs) || byName(cs)["faults_reached"].Got != "all 2" {
		t.Fatalf("good run:\n%s", Table(cs))
	}
	o := good
	o.FaultMisses = []string{"faults[0] redis_wipe at 1s: affected nothing (0 keys, counters or records)"}
	if c := byName(Evaluate(e, o))["faults_reached"]; c.OK || !strings.Contains(c.Got, "affected nothing") {
		t.Errorf("a fault that affected nothing: %+v", c)
	}
	o = good
	o.LagUnknown, o.LagUnknownWhy = 1, "t=3.0s: imlab-inbox: age of 1 partitions unknown"
	if c := byName(Evaluate(e, o))["max_lag_age"]; c.OK || !strings.Contains(c.Got, "unknown") {
		t.Errorf("an unknown lag sample: %+v", c)
	}
	o = good
	o.Faults = 0
	if _, ok := byName(Evaluate(e, o))["faults_reached"]; ok {
		t.Error("faults_reached without faults")
	}
}

// TestLagAnswerUnknown: the runner reads the monitor's errors, unknown
// partitions and the age of its snapshot.
func TestLagAnswerUnknown(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		a    lagAnswer
		want string
	}{
		{lagAnswer{At: now}, ""},
		{lagAnswer{}, "not measured yet"},
		{lagAnswer{At: now.Add(-time.Minute)}, "old"},
		{lagAnswer{At: now, UnknownAge: map[string]int{"imlab-inbox": 2}}, "imlab-inbox: age of 2 partitions unknown"},
		{lagAnswer{At: now, Errors: []string{"fanout: list end offsets: timeout"}}, "list end offsets"},
	} {
		got := c.a.unknownReason(now)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%+v: %q, want %q", c.a, got, c.want)
		}
	}
}

// TestEvaluateRepairs: min_repairs and max_repairs judge the repaired
// rows; repairs that could not be read fail either.
func TestEvaluateRepairs(t *testing.T) {
	e := ExpectSpec{MaxRepairs: u64(0)}
	o := Observed{Checked: true, Valid: true, DrainComplete: true, RepairsKnown: true}
	if !Passed(Evaluate(e, o)) {
		t.Fatal("no repairs failed max_repairs 0")
	}
	o.Repairs, o.RepairedMsgs = 3, 2
	if c := byName(Evaluate(e, o))["max_repairs"]; c.OK || c.Got != "3 rows (2 messages)" {
		t.Fatalf("3 repairs: %+v", c)
	}
	o.RepairedMsgsCut = true
	if c := byName(Evaluate(e, o))["max_repairs"]; c.Got != "3 rows (2 or more messages)" {
		t.Fatalf("3 repairs, the list cut: %+v", c)
	}
	e = ExpectSpec{MinRepairs: u64(1)}
	if !Passed(Evaluate(e, o)) {
		t.Fatal("3 repairs failed min_repairs 1")
	}
	o.RepairsKnown = false
	if c := byName(Evaluate(e, o))["min_repairs"]; c.OK || !strings.Contains(c.Got, "unknown") {
		t.Fatalf("unknown repairs: %+v", c)
	}
	var s RepairSummary
	s.add(server.Repairs{Rows: 2, MsgIDs: []uint64{5, 6}})
	s.add(server.Repairs{Rows: 1, MsgIDs: []uint64{6, 7}})
	if s.Rows != 3 || len(s.MsgIDs) != 3 {
		t.Fatalf("merged %+v", s)
	}
}

// TestEvaluateEvidence: a piece of evidence not gathered whole (a witness
// error) fails the evidence check; max_reordered becomes the checker's
// allowance.
func TestEvaluateEvidence(t *testing.T) {
	o := Observed{Checked: true, Valid: true, DrainComplete: true, Evidence: 3}
	if c := byName(Evaluate(ExpectSpec{}, o))["evidence"]; !c.OK || c.Got != "all 3 made" {
		t.Fatalf("whole evidence: %+v", c)
	}
	o.EvidenceGaps = []string{"store-witness partial: 40 uids, 900 entries; not judged for 2 uids whose read failed"}
	if c := byName(Evaluate(ExpectSpec{}, o))["evidence"]; c.OK || !strings.Contains(c.Got, "not judged") {
		t.Fatalf("a witness error: %+v", c)
	}
	if a := allowances(ExpectSpec{MaxReordered: u64(5)}); a["reordered"] != 5 || len(a) != 1 {
		t.Fatalf("allowances %v", a)
	}
	if a := allowances(ExpectSpec{}); len(a) != 0 {
		t.Fatalf("allowances without max_reordered %v", a)
	}
}
