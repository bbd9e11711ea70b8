package result

import (
	"strings"
	"testing"
)

// TestLoadAverage: the line a run prints and the busy test.
func TestLoadAverage(t *testing.T) {
	a := &LoadAverage{Start: [3]float64{2.1, 1, 1}, End: [3]float64{6.8, 3, 1}}
	if s := a.String(); !strings.Contains(s, "at start 2.10/1.00/1.00, at end 6.80/3.00/1.00") {
		t.Errorf("load average %q", s)
	}
	if !(&LoadAverage{Start: [3]float64{4.1, 5.7, 4.8}}).Busy(2) || (&LoadAverage{Start: [3]float64{1.9, 5, 5}}).Busy(2) {
		t.Fatal("Busy: judged by the 1-minute load at start against the CPUs")
	}
}
