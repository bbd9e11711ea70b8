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

// TestAckChartSaysItsSecond: when the throughput chart counts by intended
// second, the ACK latency chart (which counts by the second the ACK came)
// says so in its title, so a "no ACK" gap beside ACKed sends is explained.
func TestAckChartSaysItsSecond(t *testing.T) {
	one, zero := uint64(1), uint64(0)
	res := &result.Result{Spec: &scenario.File{}, Sends: []result.SendSecond{{T: 1, Started: 1, IntendedOK: &one, IntendedFailed: &zero},
		{T: 2, Started: 0, OK: 1, AckP50: new(float64), AckP99: new(float64), IntendedOK: &zero, IntendedFailed: &zero}}}
	charts, _ := sendCharts(res)
	if len(charts) != 2 || !strings.Contains(charts[0].Title, "intended") {
		t.Fatalf("want the throughput chart by intended second and the ACK latency chart: %+v", charts)
	}
	if title := charts[1].Title; !strings.Contains(title, "by the second each ACK came") || !strings.Contains(title, "not by the intended second") {
		t.Errorf("the ACK latency chart does not say which second it counts by: %q", title)
	}
}

// TestVerdictLineSaysPassedOverloaded: a scenario that PASSED with its
// load OVERLOADED says, beside the verdict, that its expect allowed it.
func TestVerdictLineSaysPassedOverloaded(t *testing.T) {
	retried := uint64(0)
	res := &result.Result{Spec: &scenario.File{}, Passed: true, RetriedSends: &retried,
		Sends: []result.SendSecond{{T: 1, Started: 100, OK: 41, Unknown: 59}}}
	if v := verdictLine(res); !strings.Contains(v, "scenario PASSED on its checks, though its load was OVERLOADED") {
		t.Errorf("verdict line: %q", v)
	}
	res.Sends = []result.SendSecond{{T: 1, Started: 100, OK: 100}}
	if v := verdictLine(res); !strings.HasSuffix(v, "(scenario PASSED)") {
		t.Errorf("within load: %q", v)
	}
}
