package result

import (
	"strings"
	"testing"

	"imlab/capacity"
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

// TestBusyShareIsCapacitys: a scenario run and a capacity step are BUSY
// by the same share of the CPUs used by the rest of the machine.
func TestBusyShareIsCapacitys(t *testing.T) {
	if OthersBusyShare != capacity.BusyRestShare {
		t.Fatalf("result.OthersBusyShare %v, capacity.BusyRestShare %v: one rule, two values", OthersBusyShare, capacity.BusyRestShare)
	}
}
