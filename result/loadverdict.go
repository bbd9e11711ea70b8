package result

import (
	"fmt"
	"slices"
	"strings"

	"imlab/loadgen/summary"
)

// SendFailures says when the sends that ended failed or of unknown
// outcome, and those that needed a second try, were intended: inside a
// fault window of the schedule (from a fault's injection to its heal) or
// outside every one, to a tenth of a second (loadgen counts them per
// IntendedBin of intended send time). A run OVERLOADED by its own faults is not one whose
// server could not keep up.
type SendFailures struct {
	InFaults SendCounts `json:"in_faults"`
	Outside  SendCounts `json:"outside"`
	// Windows are the fault windows, seconds from the time base.
	Windows []FaultWindow `json:"windows"`
}

// SendCounts counts failed, unknown and retried sends.
type SendCounts struct {
	Failed  uint64 `json:"failed"`
	Unknown uint64 `json:"unknown"`
	Retried uint64 `json:"retried"`
}

func (c SendCounts) any() bool { return c.Failed+c.Unknown+c.Retried > 0 }

func (c SendCounts) String() string {
	return fmt.Sprintf("%d failed or unknown, %d retried", c.Failed+c.Unknown, c.Retried)
}

// FaultWindow is one fault's time from its injection to its heal (To is
// the end of the run's timeline when it never healed).
type FaultWindow struct {
	Fault string  `json:"fault"`
	From  float64 `json:"from_s"`
	To    float64 `json:"to_s"`
}

// faultWindows pairs each injection with the next heal of the same fault.
func faultWindows(events []FaultEvent, end float64) []FaultWindow {
	var out []FaultWindow
	open := map[string][]int{} // fault -> indexes in out not yet healed
	for _, e := range events {
		switch e.Action {
		case "inject":
			open[e.Fault] = append(open[e.Fault], len(out))
			out = append(out, FaultWindow{Fault: e.Fault, From: e.At, To: -1})
		case "heal":
			if w := open[e.Fault]; len(w) > 0 {
				out[w[0]].To = e.At
				open[e.Fault] = w[1:]
			}
		}
	}
	for i := range out {
		if out[i].To < 0 {
			out[i].To = max(end, out[i].From)
		}
	}
	return out
}

// sendFailures attributes the failed, unknown and retried sends, by when
// they were intended (loadgen's bins of IntendedBin, from At s after the
// load's start, offset s after the time base), to the fault windows they
// overlap, or to none. end is the end of the run's timeline (for a fault
// that never healed).
func SendFailuresOf(events []FaultEvent, bins []summary.IntendedFailures, offset, end float64) *SendFailures {
	sf := &SendFailures{Windows: faultWindows(events, end)}
	bin := summary.IntendedBin.Seconds()
	for _, b := range bins {
		from, to := b.At+offset, b.At+offset+bin
		in := false
		for _, w := range sf.Windows {
			if from <= w.To && to > w.From {
				in = true
				break
			}
		}
		dst := &sf.Outside
		if in {
			dst = &sf.InFaults
		}
		dst.Failed += b.Fail
		dst.Unknown += b.Unknown
		dst.Retried += b.Retried
	}
	return sf
}

// LoadOutcome is the run's load beside its safety verdict: the achieved
// (ACKed) rate, the unknown, failed and retried fractions, OVERLOADED above
// summary.OverloadFraction, and the late fraction, OVERLOADED above
// summary.LateFraction with a start delay p99 above summary.LateDelay; over says over which window the rate counts.
// ok is false when the load did not run.
func (r *Result) LoadOutcome() (o summary.Outcome, over string, ok bool) {
	if len(r.Sends) == 0 {
		return o, "", false
	}
	var load summary.Summary
	for _, s := range r.Sends {
		load.OK, load.Fail, load.Unknown = load.OK+s.OK, load.Fail+s.Fail, load.Unknown+s.Unknown
		load.Pacer.Started += s.Started
	}
	load.LoadSeconds = SendingSeconds(r)
	over = fmt.Sprintf("over %.0f s, from the first send to the last send's end", load.LoadSeconds)
	if r.AckSeconds > 0 {
		load.AckSeconds = r.AckSeconds
		over = fmt.Sprintf("over %.1f s: the send window, or to the last ACK when that came later", r.AckSeconds)
	}
	// The per-second timeline has no retries: the run's count does.
	if r.RetriedSends != nil {
		load.RetriedSends = *r.RetriedSends
	} else {
		over += "; retried sends were not recorded in this result: its retried 0.0% is unknown"
	}
	if r.StartDelayP99Ms != nil {
		load.Latency = map[string]summary.Quantiles{"send_delay": {Count: int64(load.Pacer.Started), P99: int64(*r.StartDelayP99Ms * 1000)}}
	}
	if r.LateSends != nil {
		load.Pacer.Late = *r.LateSends
		over += fmt.Sprintf("; late: started more than %g ms after the intended time", r.LateAfterMs)
	} else {
		over += "; late sends were not recorded in this result: its started late 0.0% is unknown"
	}
	return load.Outcomes(summary.OverloadFraction), over, true
}

// failuresOver tells whether o's failed, unknown or retried sends are
// above their limit.
func failuresOver(o summary.Outcome) bool {
	return o.FailFrac+o.UnknownFrac > o.Limit || o.RetriedFrac > o.Limit
}

// failuresInFaults tells whether every failed, unknown or retried send was
// intended inside a fault window (and there was one).
func (r *Result) failuresInFaults() bool {
	sf := r.SendFailures
	return sf != nil && !sf.Outside.any() && sf.InFaults.any()
}

// LateSplit counts the late sends of the seconds that overlap the burst
// (inBurst), else a fault window (inFaults), each window widened by a
// second on either side (the timeline counts a send in the second it
// started, which is at or after the second it was intended in), and the
// rest (outside).
func (r *Result) LateSplit() (inBurst, inFaults, outside uint64) {
	end := 0.0
	if n := len(r.Sends); n > 0 {
		end = r.Sends[n-1].T + 1
	}
	ws := faultWindows(r.Events, end)
	near := func(t, from, to float64) bool { return t+1 > from-1 && t < to+1 }
	for _, s := range r.Sends {
		switch {
		case s.Late == 0:
		case r.Burst != nil && near(s.T, r.Burst.From, r.Burst.To):
			inBurst += s.Late
		case slices.ContainsFunc(ws, func(w FaultWindow) bool { return near(s.T, w.From, w.To) }):
			inFaults += s.Late
		default:
			outside += s.Late
		}
	}
	return inBurst, inFaults, outside
}

// lateExplained tells whether the late sends outside the burst and the
// fault windows stay within the late limit on their own, and what
// explains the rest ("the burst", "the faults", both).
func (r *Result) lateExplained(o summary.Outcome) (bool, []string) {
	started := uint64(0)
	for _, s := range r.Sends {
		started += s.Started
	}
	inBurst, inFaults, outside := r.LateSplit()
	if started == 0 || float64(outside)/float64(started) > o.LateLimit {
		return false, nil
	}
	var by []string
	if inBurst > 0 {
		by = append(by, "the burst")
	}
	if inFaults > 0 {
		by = append(by, "the faults")
	}
	return len(by) > 0, by
}

// LoadCause says, for an OVERLOADED run, why: whether its failed, unknown
// and retried sends were intended inside the fault windows or outside
// every one, and whether its late sends started in the burst's or the
// faults' seconds ("" when the run is within load or did not run).
func (r *Result) LoadCause() string {
	o, _, ok := r.LoadOutcome()
	if !ok || !o.Overloaded {
		return ""
	}
	var parts []string
	if failuresOver(o) {
		parts = append(parts, r.failuresCause())
	}
	if o.LateOver() {
		// The label says the late fraction already unless the burst or
		// the faults explain it: said once.
		parts = append(parts, r.lateCause(o, r.LoadLabel() != o.Label()))
	}
	return strings.Join(parts, "; ")
}

// failuresCause says where the failed, unknown and retried sends were
// intended.
func (r *Result) failuresCause() string {
	sf := r.SendFailures
	switch {
	case sf == nil:
		return "cause not recorded in this result (written before send failures were attributed to the faults)"
	case r.failuresInFaults():
		return fmt.Sprintf("caused by the faults: every failed, unknown or retried send was intended inside a fault window, to 0.1 s (%s; %s), none outside",
			sf.InFaults, windowList(sf.Windows))
	case len(sf.Windows) == 0:
		return fmt.Sprintf("no fault was injected: the server did not keep up with the offered load (%s)", sf.Outside)
	default:
		return fmt.Sprintf("not explained by the faults alone: %s intended outside every fault window (inside: %s; windows %s)",
			sf.Outside, sf.InFaults, windowList(sf.Windows))
	}
}

// lateCause says how many sends started late and in which seconds, after
// the late fraction and start delay (summary.LateReason) when withReason.
func (r *Result) lateCause(o summary.Outcome, withReason bool) string {
	inBurst, inFaults, outside := r.LateSplit()
	var where []string // only what the run had: a burst, fault windows
	if r.Burst != nil {
		where = append(where, fmt.Sprintf("%d in the burst's seconds", inBurst))
	}
	if slices.ContainsFunc(r.Events, func(e FaultEvent) bool { return e.Action == "inject" }) { // a fault window (faultWindows)
		where = append(where, fmt.Sprintf("%d in a fault window's, ±1 s", inFaults))
	}
	split := ""
	if len(where) > 0 {
		split = fmt.Sprintf(" (%s, %d outside)", strings.Join(where, ", "), outside)
	}
	s := fmt.Sprintf("%d sends started more than %g ms after their intended time, waiting for the pacer or a free sender%s",
		o.Late, r.LateAfterMs, split)
	if withReason {
		s = summary.LateReason(o.LateFrac, o.StartDelayP99Ms) + ": " + s
	}
	if ok, by := r.lateExplained(o); ok {
		s += "; outside them the late sends stay within the " + fmt.Sprintf("%.0f%%", 100*o.LateLimit) + " limit: caused by " + strings.Join(by, " and ")
	}
	if busy, _ := r.Busy(); busy {
		s += "; the machine was BUSY (" + r.BusyWhy() + "): the generator's own pacing waited for a CPU too, so part of the lateness is the machine's"
	}
	return s
}

// LoadLabel is the load verdict in a few words: "within load",
// "OVERLOADED by the faults" (or "by the burst", or both: every limit the
// run went above is explained by them), or "OVERLOADED: " and why ("" when
// the load did not run).
func (r *Result) LoadLabel() string {
	o, _, ok := r.LoadOutcome()
	switch {
	case !ok:
		return ""
	case !o.Overloaded:
		return o.Label()
	}
	var by []string
	if failuresOver(o) {
		if !r.failuresInFaults() {
			return o.Label()
		}
		by = append(by, "the faults")
	}
	if o.LateOver() {
		ok, lateBy := r.lateExplained(o)
		if !ok {
			return o.Label()
		}
		for _, b := range lateBy {
			if !slices.Contains(by, b) {
				by = append(by, b)
			}
		}
	}
	slices.Sort(by) // "the burst" before "the faults"
	return "OVERLOADED by " + strings.Join(by, " and ")
}
func windowList(ws []FaultWindow) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("%s %.1f–%.1f s", w.Fault, w.From, w.To))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// BusyWhy is the short reason a run was BUSY: the rest of the machine's
// mean, or the load average at the start.
func (r *Result) BusyWhy() string {
	if mean, _, n, _ := r.CPU.Others(); n > 0 {
		return fmt.Sprintf("other processes used %.2f of %d cores on average", mean, r.CPU.CPUs)
	}
	if la := r.LoadAverage; la != nil {
		return fmt.Sprintf("1-minute load %.2f on %d CPUs at the start", la.Start[0], r.CPUs())
	}
	return "not recorded"
}
