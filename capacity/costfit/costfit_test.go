package costfit

import (
	"math"
	"strings"
	"testing"
)

// TestLineNeedsThreeDistinctRates: two rates and a repeat (a search of
// 200, 400 and 400 again) are three points but a line through two: no
// fit, said so; three rates give the slope and the intercept; a repeat
// a few % off its rate is the same rate.
func TestLineNeedsThreeDistinctRates(t *testing.T) {
	ys := func(xs []float64) []float64 { // 0.1 cores idle, 150 µs per message
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = 0.1 + 150e-6*x
		}
		return out
	}
	for _, xs := range [][]float64{{200, 400, 400}, {200, 400, 398.5, 401}, {200, 205, 400}} {
		m := Line("server", xs, ys(xs))
		if m.USPerMsg != nil || m.R2 != nil || !strings.Contains(m.Note, "fewer than 3 steps at distinct rates") {
			t.Errorf("rates %v: %+v, want no fit", xs, m)
		}
	}
	xs := []float64{200, 400, 800, 800}
	m := Line("server", xs, ys(xs))
	if m.USPerMsg == nil || math.Abs(*m.USPerMsg-150) > 1e-6 || math.Abs(*m.IdleCores-0.1) > 1e-9 || m.Steps != 4 || m.Note != "" {
		t.Fatalf("rates %v: %+v, want 150 µs per message and 0.1 cores idle", xs, m)
	}
}
