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

// TestMergedSummaryLabCPU: the segments' generators ran at once, each in
// its own process: their CPU adds up over the longest window, so the share
// is the lab's whole, not the first segment's; a segment without a
// figure makes the whole unknown. Refusals add up.
func TestMergedSummaryLabCPU(t *testing.T) {
	a := &Summary{OK: 10, Refused: 2, LabCPU: &LabCPU{CPUSeconds: 3, WindowSeconds: 10, CPUs: 2, Share: 0.15}}
	b := &Summary{OK: 10, Refused: 1, LabCPU: &LabCPU{CPUSeconds: 9, WindowSeconds: 10.4, CPUs: 2, Share: 0.43}}
	m := MergeSummaries([]*Summary{a, b})
	if l := m.LabCPU; l == nil || l.CPUSeconds != 12 || l.WindowSeconds != 10.4 || l.Share < 0.576 || l.Share > 0.577 || !l.OverHalf {
		t.Fatalf("merged lab CPU %+v, want 12 CPU-s over 10.4 s on 2 CPUs (57.7%%, over half)", l)
	}
	if m.Refused != 3 {
		t.Fatalf("merged refused %d, want 3", m.Refused)
	}
	b.LabCPU = nil
	if m := MergeSummaries([]*Summary{a, b}); m.LabCPU != nil {
		t.Fatalf("a segment unmeasured: merged lab CPU %+v, want unknown", m.LabCPU)
	}
}
