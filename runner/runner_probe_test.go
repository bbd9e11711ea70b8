package runner

import (
	"math"
	"testing"
)

// TestProbeFraction: short runs probe a tenth of their sends; a long run
// probes at most MaxScenarioProbes, never below the load default of 2%.
func TestProbeFraction(t *testing.T) {
	for _, tc := range []struct {
		sends uint64
		want  float64
	}{{0, 0.1}, {1200, 0.1}, {20_000, 0.1}, {40_000, 0.05}, {100_400, 0.02}, {50_000, 0.04}, {1_000_000, 0.02}} {
		if got := probeFraction(tc.sends); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("probeFraction(%d) = %g, want %g", tc.sends, got, tc.want)
		}
	}
}
