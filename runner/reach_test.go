package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"imlab/chaos"
	"imlab/scenario"
)

// countingFault is a data fault that reports how much it changed.
type countingFault struct {
	n   int64
	err error
}

func (f *countingFault) Name() string { return "counting" }

func (f *countingFault) Inject(context.Context) error { return f.err }

func (f *countingFault) Heal(context.Context) error { return nil }

func (f *countingFault) Affected() int64 { return f.n }

func (f *countingFault) Validate() error { return nil }

func plainFault(err error) chaos.Fault {
	return chaos.Func("plain", func(context.Context) error { return err }, nil)
}

func spec(kind string, mayMiss bool) scenario.FaultSpec {
	return scenario.FaultSpec{Kind: kind, At: scenario.Duration(time.Second), MayMiss: mayMiss}
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
		{"affected something", newReach(0, spec(scenario.KindRedisWipe, false), &countingFault{n: 3}), true, ""},
		{"affected nothing", newReach(1, spec(scenario.KindRedisWipe, false), &countingFault{}), true, "affected nothing"},
		{"affected nothing, may miss", newReach(2, spec(scenario.KindRedisWipe, true), &countingFault{}), true, ""},
		{"inject failed", newReach(3, spec(scenario.KindKill, false), plainFault(errors.New("no such process"))), true, "no such process"},
		{"inject failed, may miss", newReach(4, spec(scenario.KindKill, true), plainFault(errors.New("x"))), true, ""},
		{"never injected", newReach(5, spec(scenario.KindDown, false), plainFault(nil)), false, "never injected"},
		{"cannot count, injected", newReach(6, spec(scenario.KindDown, false), plainFault(nil)), true, ""},
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
	if r := newReach(0, spec(scenario.KindRedisWipe, false), &countingFault{n: 9}); r.Affected() != 9 || r.Validate() != nil {
		t.Error("reach does not pass Affected/Validate through")
	}
}
