package expect

import (
	"strings"
	"testing"
	"time"

	"imlab/ref/server"
	"imlab/result"
	"imlab/scenario"
)

// TestEvaluateRunnerRules: a fault that missed fails faults_reached; an
// unknown lag sample fails max_lag_age even when every measured sample is
// within the bound (a failed measurement is unknown, never 0).
func TestEvaluateRunnerRules(t *testing.T) {
	e := scenario.ExpectSpec{MaxLagAge: dur(5 * time.Second)}
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

// TestEvaluateRepairs: min_repairs and max_repairs judge the repaired
// rows; repairs that could not be read fail either.
func TestEvaluateRepairs(t *testing.T) {
	e := scenario.ExpectSpec{MaxRepairs: u64(0)}
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
	e = scenario.ExpectSpec{MinRepairs: u64(1)}
	if !Passed(Evaluate(e, o)) {
		t.Fatal("3 repairs failed min_repairs 1")
	}
	o.RepairsKnown = false
	if c := byName(Evaluate(e, o))["min_repairs"]; c.OK || !strings.Contains(c.Got, "unknown") {
		t.Fatalf("unknown repairs: %+v", c)
	}
	var s result.RepairSummary
	s.Add(server.Repairs{Rows: 2, MsgIDs: []uint64{5, 6}})
	s.Add(server.Repairs{Rows: 1, MsgIDs: []uint64{6, 7}})
	if s.Rows != 3 || len(s.MsgIDs) != 3 {
		t.Fatalf("merged %+v", s)
	}
}

// TestEvaluateEvidence: a piece of evidence not gathered whole (a witness
// error) fails the evidence check; max_reordered becomes the checker's
// allowance.
func TestEvaluateEvidence(t *testing.T) {
	o := Observed{Checked: true, Valid: true, DrainComplete: true, Evidence: 3}
	if c := byName(Evaluate(scenario.ExpectSpec{}, o))["evidence"]; !c.OK || c.Got != "all 3 made" {
		t.Fatalf("whole evidence: %+v", c)
	}
	o.EvidenceGaps = []string{"store-witness partial: 40 uids, 900 entries; not judged for 2 uids whose read failed"}
	if c := byName(Evaluate(scenario.ExpectSpec{}, o))["evidence"]; c.OK || !strings.Contains(c.Got, "not judged") {
		t.Fatalf("a witness error: %+v", c)
	}
	if a := Allowances(scenario.ExpectSpec{MaxReordered: u64(5)}); a["reordered"] != 5 || len(a) != 1 {
		t.Fatalf("allowances %v", a)
	}
	if a := Allowances(scenario.ExpectSpec{}); len(a) != 0 {
		t.Fatalf("allowances without max_reordered %v", a)
	}
}
