package expect

import (
	"reflect"
	"testing"
	"time"

	"imlab/loadgen/schedule"
	"imlab/result"
	"imlab/scenario"
)

func u64(v uint64) *uint64 { return &v }

func f64(v float64) *float64 { return &v }

func dur(d time.Duration) *scenario.Duration {
	x := scenario.Duration(d)
	return &x
}

func byName(cs []result.Check) map[string]result.Check {
	m := map[string]result.Check{}
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

func TestEvaluate(t *testing.T) {
	e := scenario.ExpectSpec{MaxLost: u64(0), MaxSkipped: u64(0), MaxDuplicated: u64(10), MaxAckP99: dur(time.Second),
		MinRateRatio: f64(0.9), MaxLagAge: dur(5 * time.Second), MaxSendFailRatio: f64(0.01), MinTruncatedPulls: u64(1)}
	good := Observed{Checked: true, Valid: true, Findings: map[string]uint64{"duplicated": 3}, AckP99: 200 * time.Millisecond,
		AchievedPerSec: 95, TargetPerSec: 100, LagSamples: 4, MaxLagAge: time.Second, Attempts: 1000, Failed: 5,
		TruncatedPulls: 2, DrainComplete: true}
	cs := Evaluate(e, good)
	if !Passed(cs) {
		t.Fatalf("good run failed:\n%s", Table(cs))
	}
	want := []string{"verdict", "max_lost", "max_skipped", "max_duplicated", "max_ack_p99", "min_rate_ratio", "max_lag_age", "max_send_fail_ratio", "min_truncated_pulls", "drain_complete"}
	var got []string
	for _, c := range cs {
		got = append(got, c.Name)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("checks %v, want %v", got, want)
	}
	if !reflect.DeepEqual(cs, Evaluate(e, good)) {
		t.Fatal("Evaluate is not deterministic")
	}

	// Each failure flips exactly its check.
	for name, mut := range map[string]func(*Observed){
		"verdict":             func(o *Observed) { o.Valid = false },
		"max_lost":            func(o *Observed) { o.Findings = map[string]uint64{"lost": 1} },
		"max_skipped":         func(o *Observed) { o.Findings = map[string]uint64{"skipped": 2} },
		"max_duplicated":      func(o *Observed) { o.Findings = map[string]uint64{"duplicated": 11} },
		"max_ack_p99":         func(o *Observed) { o.AckP99 = 2 * time.Second },
		"min_rate_ratio":      func(o *Observed) { o.AchievedPerSec = 50 },
		"max_lag_age":         func(o *Observed) { o.MaxLagAge = 6 * time.Second },
		"max_send_fail_ratio": func(o *Observed) { o.Failed = 11 },
		"min_truncated_pulls": func(o *Observed) { o.TruncatedPulls = 0 },
		"drain_complete":      func(o *Observed) { o.DrainComplete = false },
	} {
		o := good
		mut(&o)
		m := byName(Evaluate(e, o))
		for n, c := range m {
			if fails := !c.OK; fails != (n == name) && !(name == "max_lost" && n == "verdict") && !(name == "max_skipped" && n == "verdict") {
				t.Errorf("%s broken: check %s ok=%v (%s / %s)", name, n, c.OK, c.Want, c.Got)
			}
		}
		if m[name].OK {
			t.Errorf("%s: check did not fail", name)
		}
	}

	// No lag samples: a lag bound cannot pass.
	o := good
	o.LagSamples = 0
	if byName(Evaluate(e, o))["max_lag_age"].OK {
		t.Error("max_lag_age passed without samples")
	}
	// Not checked: every finding check fails.
	o = good
	o.Checked = false
	m := byName(Evaluate(e, o))
	if m["verdict"].OK || m["max_lost"].OK || m["verdict"].Got != "not checked" {
		t.Errorf("unchecked run passed: %+v", m)
	}
}

// TestEvaluateNegativeControl: an invalid verdict with losses passes an
// "invalid, min_lost 1" expectation; a valid run fails it.
func TestEvaluateNegativeControl(t *testing.T) {
	e := scenario.ExpectSpec{Verdict: scenario.VerdictInvalid, MinLost: u64(1)}
	caught := Observed{Checked: true, Valid: false, Findings: map[string]uint64{"lost": 7}, DrainComplete: true}
	if cs := Evaluate(e, caught); !Passed(cs) {
		t.Fatalf("caught loss failed:\n%s", Table(cs))
	}
	missed := Observed{Checked: true, Valid: true, Findings: map[string]uint64{}, DrainComplete: true}
	m := byName(Evaluate(e, missed))
	if m["verdict"].OK || m["min_lost"].OK {
		t.Fatalf("a run that lost nothing passed the negative control: %+v", m)
	}
}

func TestMeanRate(t *testing.T) {
	sh, err := schedule.Parse("burst:base=100,peak=1100,at=2s,len=2s")
	if err != nil {
		t.Fatal(err)
	}
	if got := MeanRate(sh, 10*time.Second); got < 299 || got > 301 {
		t.Fatalf("mean %g, want 300", got)
	}
}
