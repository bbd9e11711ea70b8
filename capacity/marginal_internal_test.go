package capacity

import (
	"strings"
	"testing"
)

// A process whose CPU falls as the rate rises (another load on it, or a
// fixed cost that noise dominates) has no marginal cost: unknown, with a
// note, never a negative figure; one whose CPU grows with the rate has
// its slope.
func TestMarginalIsNeverNegative(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	var steps []*Step
	for i, rate := range []float64{100, 200, 300, 400} {
		steps = append(steps, &Step{AckedPerSec: f(rate), CPU: []ProcCost{
			{Name: "falls", Cores: f(0.5 - 0.01*float64(i))},
			{Name: "grows", Cores: f(0.1 + rate*100e-6)},
		}})
	}
	ms := marginal([]Proc{{Name: "falls"}, {Name: "grows"}}, steps)
	if ms[0].USPerMsg != nil || ms[0].IdleCores != nil || !strings.Contains(ms[0].Note, "negative") {
		t.Fatalf("falling CPU: %+v, want no cost and a note", ms[0])
	}
	if ms[1].USPerMsg == nil || *ms[1].USPerMsg < 99 || *ms[1].USPerMsg > 101 {
		t.Fatalf("growing CPU: %+v, want 100 µs per msg", ms[1])
	}
}
