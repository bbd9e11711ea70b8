package runpage

import (
	"strings"
	"testing"

	"imlab/result"
	"imlab/scenario"
)

// TestLoadRowSaysLateOnce: the report's Load row (label, cause and the
// figures beside them) says a late fraction once, not in each of the three.
func TestLoadRowSaysLateOnce(t *testing.T) {
	retried, late := uint64(0), uint64(100)
	res := &result.Result{Spec: &scenario.File{}, RetriedSends: &retried, LateSends: &late, LateAfterMs: 1,
		Sends: []result.SendSecond{{T: 1, Started: 100, OK: 100}, {T: 2, Started: 100, OK: 100, Late: 20}, {T: 3, Started: 100, OK: 100, Late: 40},
			{T: 4, Started: 100, OK: 100, Late: 40}}}
	lv := loadVerdict(res)
	row := lv.Label + ": " + lv.Cause + " " + lv.Detail
	if n := strings.Count(row, "of sends started late"); n != 1 {
		t.Errorf("the Load row says the late fraction %d times, want once:\n%s", n, row)
	}
	if !strings.Contains(lv.Detail, "started late 25.0%") {
		t.Errorf("the figures lost the late fraction: %s", lv.Detail)
	}
}
