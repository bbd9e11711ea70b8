package summary

import "testing"

// TestMergedSummaryOutcome: the segments' merged summary carries the
// outcome of the summed counts (one segment's unknowns make the whole run
// OVERLOADED when they exceed the limit of all its sends).
func TestMergedSummaryOutcome(t *testing.T) {
	a := &Summary{OK: 500, LoadSeconds: 5, StartedPerSec: 100, AchievedPerSec: 100}
	b := &Summary{OK: 450, Unknown: 50, LoadSeconds: 5.2, StartedPerSec: 100, AchievedPerSec: 90}
	m := MergeSummaries([]*Summary{a, b})
	if m.OK != 950 || m.LoadSeconds != 5.2 || m.StartedPerSec != 200 || !m.Outcome.Overloaded || m.Outcome.UnknownFrac != 0.05 {
		t.Fatalf("merged: ok %d load %gs started %g/s outcome %+v", m.OK, m.LoadSeconds, m.StartedPerSec, m.Outcome)
	}
	// The ACK window is the longest segment's (its last ACK), not the
	// first segment's; retried sends are summed.
	a.AckSeconds, b.AckSeconds, a.RetriedSends, b.RetriedSends = 5.1, 6, 3, 4
	if m := MergeSummaries([]*Summary{a, b}); m.AckSeconds != 6 || m.RetriedSends != 7 {
		t.Fatalf("merged: ack window %gs, retried %d; want 6s, 7", m.AckSeconds, m.RetriedSends)
	}
}
