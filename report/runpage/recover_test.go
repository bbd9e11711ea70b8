package runpage

import (
	"strings"
	"testing"
	"time"

	"imlab/expect"
	"imlab/recovery"
	"imlab/result"
	"imlab/scenario"
)

// lagTimeline is a one-group lag timeline at t = 0, 1, ... (an age < 0: a
// failed poll).
func lagTimeline(ages ...float64) []result.LagSample {
	var out []result.LagSample
	for i, a := range ages {
		s := result.LagSample{T: float64(i), OutboxOldestAge: -1}
		if a < 0 {
			s.Err = "lag: connection refused"
		} else {
			s.MaxAge = map[string]float64{"imlab-inbox": a}
			s.Records = map[string]int64{"imlab-inbox": int64(a * 1000)}
			s.Consumed = map[string]int64{"imlab-inbox": int64(i * 5000)}
		}
		out = append(out, s)
	}
	return out
}

func TestRecoveryTable(t *testing.T) {
	fig, err := expect.RecoveryFigures(expect.RecoveryConfig(scenario.ExpectSpec{}, 2, 10*time.Second), "end of the burst", lagTimeline(0, 0, 3, 2, 0.5, 0.1, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	tb := recoveryTable(fig)
	text := tb.Title
	for _, r := range tb.Rows {
		text += "\n" + strings.Join(r, " | ")
	}
	for _, want := range []string{"from t=2.0s, the end of the burst", "group imlab-inbox | recovered | 2s | 3.00s at t=2.0s | 3000 at t=2.0s | 5000, 5000", "all groups | recovered"} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
	if fig.Status != recovery.Recovered {
		t.Fatal(fig.Status)
	}
}
