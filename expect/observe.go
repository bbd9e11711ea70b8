package expect

import (
	"fmt"
	"math"
	"time"

	"imlab/checker"
	"imlab/loadgen"
	"imlab/loadgen/summary"
	"imlab/result"
	"imlab/scenario"
)

// observe gathers the evaluation's input.
// allowances are the checker findings a file allows (Verdict.Judge): its
// max_reordered; every other deciding finding must be 0 for a valid run.
func Allowances(e scenario.ExpectSpec) map[string]int {
	allow := map[string]int{}
	if e.MaxReordered != nil {
		allow[checker.Reordered] = int(min(*e.MaxReordered, uint64(math.MaxInt32)))
	}
	return allow
}

// evidenceGaps says, for each piece of the checker's evidence that was
// not gathered, why: a witness (pull or store, read after the drain, healed)
// that was not made or only partly made leaves findings unjudged, so it
// fails the scenario. Read-after-ACK probes run during the faults, so some
// failing to read is expected: only probes not made at all are a gap. A
// check the run did not exercise (the target lacks it, the run did none of
// it) is no gap.
func EvidenceGaps(v *checker.Verdict) []string {
	var out []string
	for _, c := range v.Checks {
		switch {
		case c.Unexercised:
		case !c.Made:
			out = append(out, c.Name+" not made: "+c.Detail)
		case c.Partial && c.Name != checker.CheckReadAfterAck:
			out = append(out, c.Name+" partial: "+c.Detail)
		}
	}
	return out
}

// exercised counts the checks whose evidence the run set out to gather.
func Exercised(v *checker.Verdict) int {
	n := 0
	for _, c := range v.Checks {
		if !c.Unexercised {
			n++
		}
	}
	return n
}

func Observe(v *checker.Verdict, sum *summary.Summary, lag []result.LagSample, truncated uint64, lc loadgen.Config) Observed {
	o := Observed{Checked: true, Valid: v.Valid, Findings: map[string]uint64{}, TruncatedPulls: truncated,
		Evidence: Exercised(v), EvidenceGaps: EvidenceGaps(v)}
	for name, f := range v.Findings {
		o.Findings[name] = uint64(f.Count)
	}
	o.AckP99 = time.Duration(sum.Latency["response"].P99) * time.Microsecond
	o.AchievedPerSec = sum.AchievedPerSec
	o.TargetPerSec = MeanRate(lc.Shape, lc.Duration)
	o.Attempts = sum.OK + sum.Fail + sum.Unknown
	o.Failed = sum.Fail + sum.Unknown
	o.DrainComplete = sum.Drain.Complete
	for _, s := range lag {
		if !s.LagKnown() {
			if o.LagUnknown == 0 {
				o.LagUnknownWhy = fmt.Sprintf("t=%.1fs: %s", s.T, s.Err)
			}
			o.LagUnknown++
			continue
		}
		o.LagSamples++
		for _, a := range s.MaxAge {
			o.MaxLagAge = max(o.MaxLagAge, time.Duration(a*float64(time.Second)))
		}
	}
	return o
}

func Findings(v *checker.Verdict) []result.FindingSummary {
	var out []result.FindingSummary
	for _, name := range checker.Names {
		f := v.Findings[name]
		if f == nil {
			out = append(out, result.FindingSummary{Name: name})
			continue
		}
		ids := f.MsgIDs
		if len(ids) > result.MaxListedIDs {
			ids = ids[:result.MaxListedIDs]
		}
		out = append(out, result.FindingSummary{Name: name, Count: uint64(f.Count), Pairs: uint64(f.Pairs), MsgIDs: ids, Examples: f.Examples, NotMade: f.NotMade,
			Messages: uint64(len(f.MsgIDs))})
	}
	return out
}
