package capacity

import (
	"fmt"
	"sort"
	"time"
)

// NotConfirmed is the answer's start when the search ran out of steps
// before a rate held twice: no rate was confirmed, which is not that
// none held.
const NotConfirmed = "NO RATE CONFIRMED"

// unconfirmed is the answer of a search that ran out of steps with no
// rate held twice: the budget and the flag that raises it, the highest
// rate that held once with how its repeats went, and the rate that held
// last when its repeat did not run.
func unconfirmed(r *Result) string {
	a := fmt.Sprintf("%s: the search ran out of its %d steps (raise --max-steps) before any rate held the SLO (%s) twice", NotConfirmed, r.MaxSteps, r.SLO)
	var best, last *Step
	for _, st := range r.Steps {
		if st.Held {
			last = st
			if best == nil || st.OfferedPerSec > best.OfferedPerSec {
				best = st
			}
		}
	}
	if best == nil {
		return a + "; no step held even once"
	}
	a += fmt.Sprintf("; the highest rate that held once, %.0f/s, %s", best.OfferedPerSec, repeats(r.Steps, best))
	if last != best && last.Phase != PhaseRepeat {
		a += fmt.Sprintf("; %.0f/s held last and %s", last.OfferedPerSec, repeats(r.Steps, last))
	}
	return a
}

// repeats says how the repeats of held's rate after it went.
func repeats(steps []*Step, held *Step) string {
	n, broke, after := 0, 0, false
	for _, st := range steps {
		if st == held {
			after = true
			continue
		}
		if after && st.Phase == PhaseRepeat && st.OfferedPerSec == held.OfferedPerSec {
			n++
			if !st.Held {
				broke++
			}
		}
	}
	if n == 0 {
		return "was not repeated"
	}
	return fmt.Sprintf("broke on %d of its %d repeat(s)", broke, n)
}

// knee is the highest rate that held below the first rate (in rate
// order) whose ACK p99 exceeded twice the p99 of the lowest rate and a
// quarter of the SLO's ACK limit (so that noise at low rates is no knee),
// and that rule said with its figures. The p99 is compared with the
// lowest rate's, not with the step before: it may rise by less than
// twice from one step to the next. Only steps that count are read:
// measured over their whole window and not judged INVALID by the checker
// (a rate at which messages were lost marks nothing); the knee itself is
// a rate that held (nil: none).
func knee(steps []*Step, limit time.Duration) (*float64, string) {
	var ms []*Step
	for _, st := range steps {
		if st.AckP99Ms != nil && st.StoppedEarly == "" && (st.Valid == nil || *st.Valid) {
			ms = append(ms, st)
		}
	}
	if len(ms) < 2 {
		return nil, ""
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].OfferedPerSec < ms[j].OfferedPerSec })
	low := ms[0]
	floor := 0.25 * float64(limit) / float64(time.Millisecond)
	for i := 1; i < len(ms); i++ {
		if p := *ms[i].AckP99Ms; p > 2**low.AckP99Ms && p > floor {
			for j := i - 1; j >= 0; j-- {
				if ms[j].Held && ms[j].OfferedPerSec < ms[i].OfferedPerSec {
					return ptr(ms[j].OfferedPerSec), fmt.Sprintf("the highest rate that held below %.0f/s, the first rate whose ACK p99 (%.1f ms) was more than twice the lowest rate's (%.1f ms at %.0f/s) and above a quarter of the ACK limit (%.0f ms)",
						ms[i].OfferedPerSec, p, *low.AckP99Ms, low.OfferedPerSec, floor)
				}
			}
			return nil, ""
		}
	}
	return nil, ""
}
