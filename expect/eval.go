package expect

import (
	"fmt"
	"strings"
	"time"

	"imlab/loadgen/schedule"
	"imlab/recovery"
	"imlab/result"
	"imlab/scenario"
)

// Observed is what a run measured, the input of Evaluate.
type Observed struct {
	// Checked: the checker produced a verdict (false: the ledger could
	// not be judged; every finding check fails).
	Checked bool
	Valid   bool
	// Findings: the checker's counts of distinct messages per finding.
	Findings map[string]uint64
	// AckP99 is the whole run's send response time p99.
	AckP99 time.Duration
	// AchievedPerSec and TargetPerSec (the shape's mean) give the rate ratio.
	AchievedPerSec, TargetPerSec float64
	// LagSamples is how many lag polls measured the consumer lag
	// (LagSample.LagKnown: an outbox that was not measured does not make
	// the consumer lag unknown); MaxLagAge the largest consumer lag age
	// they saw (any group, any partition). LagUnknown counts the polls
	// that did not (the poll failed, the monitor reported an error other
	// than the outbox's or a partition of unknown age, its measurement was
	// stale) and LagUnknownWhy is the first reason: an unknown lag is
	// never read as 0, so it fails max_lag_age.
	LagSamples    int
	MaxLagAge     time.Duration
	LagUnknown    int
	LagUnknownWhy string
	// Faults is how many faults the schedule had; FaultMisses says, for
	// each fault that did not reach its target (its inject failed, it was
	// never injected, or it affected nothing where it can count) and
	// whose file entry does not say may_miss, what happened.
	Faults      int
	FaultMisses []string
	// Evidence is how many pieces of evidence the checker had (pull
	// witness, store witness, read-after-ACK); EvidenceGaps says which were
	// not gathered whole and why (a witness error). Any gap fails the
	// evidence check: the findings it feeds were not judged.
	Evidence     int
	EvidenceGaps []string
	// Repairs is the inbox rows forward reconciliation wrote during the
	// run; RepairsKnown false when a process could not be read.
	// RepairedMsgs is the distinct messages of those rows (at least that
	// many when RepairedMsgsCut: the list was cut at MaxListedIDs).
	Repairs         uint64
	RepairsKnown    bool
	RepairedMsgs    int
	RepairedMsgsCut bool
	// DeadLetters is what the run read of the dead letters at its end
	// (nil: not read; the run used no Kafka).
	DeadLetters *result.DeadLetterSummary
	// Attempts and Failed (fail + unknown) count sends.
	Attempts, Failed uint64
	// TruncatedPulls is how often the servers served a truncated answer.
	TruncatedPulls uint64
	DrainComplete  bool
	// UsesKafka: the run had consumer groups (lag_recovered is checked by
	// default); Recovery their recovery figures (nil: not computed).
	UsesKafka bool
	Recovery  *recovery.Figures
	// BurstShape: the load is a burst (generator_kept_up is checked);
	// Burst the generator's figures around it (nil: not measured).
	BurstShape bool
	Burst      *result.BurstFigures
}

// MeanRate is a shape's mean rate over d (sampled every 10ms).
func MeanRate(sh schedule.Shape, d time.Duration) float64 {
	const step = 10 * time.Millisecond
	if d <= 0 {
		return 0
	}
	var sum float64
	n := 0
	for t := time.Duration(0); t < d; t += step {
		sum += sh.Rate(t)
		n++
	}
	return sum / float64(n)
}

// Evaluate turns every expectation of e into a Check, in a fixed order.
// It is pure: the same input gives the same checks.
func Evaluate(e scenario.ExpectSpec, o Observed) []result.Check {
	var out []result.Check
	add := func(name, want, got string, ok bool) {
		out = append(out, result.Check{Name: name, Want: want, Got: got, OK: ok})
	}
	verdictChecks(e, o, add)
	loadChecks(e, o, add)
	repairChecks(e, o, add)
	deadLetterChecks(e.DeadLetters, o.DeadLetters, add)
	runChecks(e, o, add)
	if o.BurstShape {
		out = append(out, generatorCheck(e, o.Burst))
	}
	return append(out, recoveryChecks(e, o)...)
}

// verdictChecks evaluates the verdict and the bounds on the checker's
// findings.
func verdictChecks(e scenario.ExpectSpec, o Observed, add func(name, want, got string, ok bool)) {
	got := func(n string) (uint64, string) {
		if !o.Checked {
			return 0, "not checked"
		}
		v := o.Findings[n]
		return v, fmt.Sprint(v)
	}
	verdict := "not checked"
	if o.Checked {
		verdict = scenario.VerdictInvalid
		if o.Valid {
			verdict = scenario.VerdictValid
		}
	}
	add("verdict", e.VerdictOr(), verdict, o.Checked && verdict == e.VerdictOr())
	maxes := []struct {
		name string
		lim  *uint64
	}{{"lost", e.MaxLost}, {"skipped", e.MaxSkipped}, {"unexpected", e.MaxUnexpected}, {"reordered", e.MaxReordered}, {"duplicated", e.MaxDuplicated}}
	for _, m := range maxes {
		if m.lim == nil {
			continue
		}
		v, s := got(m.name)
		add("max_"+m.name, fmt.Sprintf("<= %d", *m.lim), s, o.Checked && v <= *m.lim)
	}
	if e.MinLost != nil {
		v, s := got("lost")
		add("min_lost", fmt.Sprintf(">= %d", *e.MinLost), s, o.Checked && v >= *e.MinLost)
	}
}

// loadChecks evaluates the bounds on the load: ACK p99, achieved rate,
// consumer lag, failed sends, truncated pulls.
func loadChecks(e scenario.ExpectSpec, o Observed, add func(name, want, got string, ok bool)) {
	if e.MaxAckP99 != nil {
		add("max_ack_p99", "<= "+e.MaxAckP99.D().String(), o.AckP99.String(), o.AckP99 <= e.MaxAckP99.D())
	}
	if e.MinRateRatio != nil {
		ratio := 0.0
		if o.TargetPerSec > 0 {
			ratio = o.AchievedPerSec / o.TargetPerSec
		}
		add("min_rate_ratio", fmt.Sprintf(">= %.2f", *e.MinRateRatio),
			fmt.Sprintf("%.3f (%.0f/s of %.0f/s)", ratio, o.AchievedPerSec, o.TargetPerSec), ratio >= *e.MinRateRatio)
	}
	if e.MaxLagAge != nil {
		want := "<= " + e.MaxLagAge.D().String()
		switch {
		case o.LagUnknown > 0:
			add("max_lag_age", want, fmt.Sprintf("unknown: %d of %d samples not measured (%s); measured max %s",
				o.LagUnknown, o.LagUnknown+o.LagSamples, o.LagUnknownWhy, o.MaxLagAge.Round(time.Millisecond)), false)
		case o.LagSamples == 0:
			add("max_lag_age", want, "no lag samples", false)
		default:
			add("max_lag_age", want, fmt.Sprintf("%s (%d samples)", o.MaxLagAge.Round(time.Millisecond), o.LagSamples), o.MaxLagAge <= e.MaxLagAge.D())
		}
	}
	if e.MaxSendFailRatio != nil {
		ratio := 0.0
		if o.Attempts > 0 {
			ratio = float64(o.Failed) / float64(o.Attempts)
		}
		add("max_send_fail_ratio", fmt.Sprintf("<= %.4f", *e.MaxSendFailRatio),
			fmt.Sprintf("%.4f (%d of %d)", ratio, o.Failed, o.Attempts), o.Attempts > 0 && ratio <= *e.MaxSendFailRatio)
	}
	if e.MinTruncatedPulls != nil {
		add("min_truncated_pulls", fmt.Sprintf(">= %d", *e.MinTruncatedPulls), fmt.Sprint(o.TruncatedPulls), o.TruncatedPulls >= *e.MinTruncatedPulls)
	}
}

// repairChecks evaluates max_repairs and min_repairs; repairs that could
// not be read fail them.
func repairChecks(e scenario.ExpectSpec, o Observed, add func(name, want, got string, ok bool)) {
	repairs := func(name, want string, ok func(uint64) bool) {
		if !o.RepairsKnown {
			add(name, want, fmt.Sprintf("unknown (%d rows read)", o.Repairs), false)
			return
		}
		add(name, want, repairsGot(o), ok(o.Repairs))
	}
	if e.MaxRepairs != nil {
		repairs("max_repairs", fmt.Sprintf("<= %d", *e.MaxRepairs), func(v uint64) bool { return v <= *e.MaxRepairs })
	}
	if e.MinRepairs != nil {
		repairs("min_repairs", fmt.Sprintf(">= %d", *e.MinRepairs), func(v uint64) bool { return v >= *e.MinRepairs })
	}
}

// runChecks evaluates what every run is held to: the evidence made, the
// faults that reached their target, the final drain.
func runChecks(e scenario.ExpectSpec, o Observed, add func(name, want, got string, ok bool)) {
	if o.Evidence > 0 {
		got := fmt.Sprintf("all %d made", o.Evidence)
		if len(o.EvidenceGaps) > 0 {
			got = strings.Join(o.EvidenceGaps, "; ")
		}
		add("evidence", "pull and store witness made whole, read-after-ACK made", got, len(o.EvidenceGaps) == 0)
	}
	if o.Faults > 0 {
		got := fmt.Sprintf("all %d", o.Faults)
		if len(o.FaultMisses) > 0 {
			got = strings.Join(o.FaultMisses, "; ")
		}
		add("faults_reached", "every fault injected and, where it can count, affecting something", got, len(o.FaultMisses) == 0)
	}
	if e.DrainComplete == nil || *e.DrainComplete {
		add("drain_complete", "true", fmt.Sprint(o.DrainComplete), o.DrainComplete)
	}
}

// recoveryChecks evaluates lag_recovered, max_recovery and
// min_drain_rate. A figure that could not be computed fails its check
// with the reason, never passes as 0.
func recoveryChecks(e scenario.ExpectSpec, o Observed) []result.Check {
	var out []result.Check
	add := func(name, want, got string, ok bool) {
		out = append(out, result.Check{Name: name, Want: want, Got: got, OK: ok})
	}
	f := o.Recovery
	status := func() string {
		if f == nil {
			return "not computed"
		}
		if f.Status == recovery.Recovered {
			return fmt.Sprintf("recovered at t=%.1fs, %s after the %s", *f.RecoveredAt, result.Secs(*f.RecoverySeconds), f.Since)
		}
		return f.Status + ": " + f.Reason
	}
	bound := fmt.Sprintf("every group's lag age <= %s for %s", e.RecoveryBoundOr(), e.RecoveryHoldOr())
	if o.UsesKafka && (e.LagRecovered == nil || *e.LagRecovered) {
		want := bound + " within the drain timeout"
		if f != nil {
			want = fmt.Sprintf("%s by t=%.1fs (the drain timeout after the %s)", bound, f.Deadline, f.Since)
		}
		add("lag_recovered", want, status(), f != nil && f.Status == recovery.Recovered)
	}
	if e.MaxRecovery != nil {
		lim := e.MaxRecovery.D()
		ok := f != nil && f.Status == recovery.Recovered && *f.RecoverySeconds <= lim.Seconds()
		add("max_recovery", "<= "+lim.String()+" ("+bound+")", status(), ok)
	}
	if e.MinDrainRate != nil {
		want := fmt.Sprintf(">= %.0f records/s (slowest group)", *e.MinDrainRate)
		switch v, name := minDrain(f); {
		case v == nil:
			add("min_drain_rate", want, "no drain rate: "+drainNotes(f), false)
		default:
			add("min_drain_rate", want, fmt.Sprintf("%.0f records/s (%s)", *v, name), *v >= *e.MinDrainRate)
		}
	}
	return out
}

func minDrain(f *recovery.Figures) (*float64, string) {
	if f == nil {
		return nil, ""
	}
	return f.MinDrainRecordsPerSec()
}

func drainNotes(f *recovery.Figures) string {
	if f == nil {
		return "recovery not computed"
	}
	var ns []string
	for _, g := range f.Groups {
		ns = append(ns, g.Name+": "+g.DrainNote)
	}
	if len(ns) == 0 {
		return "no consumer group measured"
	}
	return strings.Join(ns, "; ")
}

// Passed tells whether every check is OK (and there is at least one).
func Passed(cs []result.Check) bool {
	for _, c := range cs {
		if !c.OK {
			return false
		}
	}
	return len(cs) > 0
}

// Table formats checks as aligned text lines.
func Table(cs []result.Check) string {
	w1, w2 := len("check"), len("want")
	for _, c := range cs {
		w1, w2 = max(w1, len(c.Name)), max(w2, len(c.Want))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-4s  %-*s  %-*s  %s\n", "", w1, "check", w2, "want", "got")
	for _, c := range cs {
		st := "ok"
		if !c.OK {
			st = "FAIL"
		}
		fmt.Fprintf(&b, "%-4s  %-*s  %-*s  %s\n", st, w1, c.Name, w2, c.Want, c.Got)
	}
	return b.String()
}

// repairsGot is what the repair checks got: the rows they count, with the
// messages those rows are of (pages elsewhere count messages).
func repairsGot(o Observed) string {
	if o.Repairs == 0 {
		return "0 rows"
	}
	more := ""
	if o.RepairedMsgsCut {
		more = " or more"
	}
	return fmt.Sprintf("%d rows (%d%s messages)", o.Repairs, o.RepairedMsgs, more)
}
