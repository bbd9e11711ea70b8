package runpage

import (
	"strings"
	"testing"
	"time"

	"imlab/expect"
	"imlab/recovery"
	"imlab/result/resulttest"
	"imlab/scenario"
)

func TestRecoveryTable(t *testing.T) {
	fig, err := expect.RecoveryFigures(expect.RecoveryConfig(scenario.ExpectSpec{}, 2, 10*time.Second), "end of the burst", resulttest.LagTimeline(0, 0, 3, 2, 0.5, 0.1, 0, 0))
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
