package loadgen

import (
	"fmt"
	"testing"
	"time"

	"imlab/ledger"
	"imlab/loadgen/summary"
)

// TestAckedByIntended: an ACK counts in the second its send was intended
// in, not the second the ACK came (a send intended at 0.2 s and ACKed at
// 2.5 s is the first second's); failed and unknown sends are not ACKed;
// segments' counts add up second by second.
func TestAckedByIntended(t *testing.T) {
	r := &runner{m: newMetrics(1), e2e: newE2ETracker()}
	r.m.sizeIntended(4 * time.Second)
	l := r.m.lane(0)
	for i, a := range []ledger.Attempt{
		{Intended: 200 * time.Millisecond, Started: 210 * time.Millisecond, Ended: 2500 * time.Millisecond, Outcome: ledger.OK},
		{Intended: 900 * time.Millisecond, Started: 900 * time.Millisecond, Ended: 1100 * time.Millisecond, Outcome: ledger.OK},
		{Intended: 300 * time.Millisecond, Started: 300 * time.Millisecond, Ended: 400 * time.Millisecond, Outcome: ledger.Fail},
		{Intended: 1500 * time.Millisecond, Started: 1500 * time.Millisecond, Ended: 1600 * time.Millisecond, Outcome: ledger.OK},
		{Intended: 1700 * time.Millisecond, Started: 1700 * time.Millisecond, Ended: 3700 * time.Millisecond, Outcome: ledger.Unknown},
	} {
		a.Tick = uint64(i)
		r.count(l, &a)
	}
	got := r.m.ackedByIntended()
	if fmt.Sprint(got) != "[2 1]" {
		t.Fatalf("ACKed by intended second %v, want [2 1]", got)
	}
	m := summary.MergeSummaries([]*summary.Summary{{AckedByIntended: got}, {AckedByIntended: []uint64{5, 0, 1}}})
	if fmt.Sprint(m.AckedByIntended) != "[7 1 1]" {
		t.Fatalf("merged %v, want [7 1 1]", m.AckedByIntended)
	}
	// Nothing ACKed is a measured 0, not an empty list that summary.json
	// leaves out and its readers take for "not recorded".
	none := newMetrics(1)
	none.sizeIntended(4 * time.Second)
	if got := none.ackedByIntended(); fmt.Sprint(got) != "[0]" {
		t.Fatalf("a run that ACKed nothing: %v, want [0]", got)
	}
}
