package result

import (
	"strings"
	"testing"
)

// TestLoadAverage: /proc/loadavg's first three fields, anything else
// refused; the line a run prints and the busy test.
func TestLoadAverage(t *testing.T) {
	if v, ok := parseLoadAvg("2.10 1.50 0.90 3/812 12345\n"); !ok || v != [3]float64{2.1, 1.5, 0.9} {
		t.Fatalf("parse: %v %v", v, ok)
	}
	for _, bad := range []string{"", "1.0 2.0", "a b c", "-1 0 0"} {
		if _, ok := parseLoadAvg(bad); ok {
			t.Fatalf("%q parsed", bad)
		}
	}
	a := &LoadAverage{Start: [3]float64{2.1, 1, 1}, End: [3]float64{6.8, 3, 1}}
	if s := a.String(); !strings.Contains(s, "at start 2.10/1.00/1.00, at end 6.80/3.00/1.00") {
		t.Errorf("load average %q", s)
	}
	if !(&LoadAverage{Start: [3]float64{4.1, 5.7, 4.8}}).Busy(2) || (&LoadAverage{Start: [3]float64{1.9, 5, 5}}).Busy(2) {
		t.Fatal("Busy: judged by the 1-minute load at start against the CPUs")
	}
}
