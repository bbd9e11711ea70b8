package runner

import (
	"fmt"
	"testing"

	"imlab/loadgen"
	"imlab/loadgen/summary"
	"imlab/result"
)

// TestSendsByIntendedSecond: the result's seconds carry the sends intended
// in them (the row of second T: intended in [T-1, T)), ACKed and failed or
// unknown, beside the counts by the second the outcome came; a summary
// without the intended counts leaves them unknown (nil), never 0.
func TestSendsByIntendedSecond(t *testing.T) {
	sum := &summary.Summary{
		Timeline:         []summary.Second{{T: 1, Started: 5, OK: 0}, {T: 2, Started: 5, OK: 7, Unknown: 2}, {T: 3, OK: 1, Fail: 1}},
		AckedByIntended:  []uint64{3, 5},
		FailedByIntended: []summary.IntendedFailures{{At: 0.3, Fail: 1}, {At: 0.9, Unknown: 1}, {At: 1.9, Unknown: 1}, {At: 2.0, Fail: 1}},
	}
	r := &run{res: &result.Result{}}
	r.recordSends(loadgen.Config{}, sum)
	var got []string
	for _, s := range r.res.Sends {
		got = append(got, fmt.Sprintf("%g:%d/%d ok%d", s.T, *s.IntendedOK, *s.IntendedFailed, s.OK))
	}
	if want := "[1:3/2 ok0 2:5/1 ok7 3:0/1 ok1]"; fmt.Sprint(got) != want {
		t.Fatalf("seconds %v, want %s", got, want)
	}
	sum.AckedByIntended = nil
	r = &run{res: &result.Result{}}
	r.recordSends(loadgen.Config{}, sum)
	if s := r.res.Sends[1]; s.IntendedOK != nil || s.IntendedFailed != nil || s.OK != 7 {
		t.Fatalf("a summary without intended counts: %+v", s)
	}
}
