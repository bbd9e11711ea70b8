package result

import (
	"fmt"
	"strings"

	"imlab/loadgen"
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
func SendFailuresOf(events []FaultEvent, bins []loadgen.IntendedFailures, offset, end float64) *SendFailures {
	sf := &SendFailures{Windows: faultWindows(events, end)}
	bin := loadgen.IntendedBin.Seconds()
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
// loadgen.OverloadFraction; over says over which window the rate counts.
// ok is false when the load did not run.
func (r *Result) LoadOutcome() (o loadgen.Outcome, over string, ok bool) {
	if len(r.Sends) == 0 {
		return o, "", false
	}
	var load loadgen.Summary
	for _, s := range r.Sends {
		load.OK, load.Fail, load.Unknown = load.OK+s.OK, load.Fail+s.Fail, load.Unknown+s.Unknown
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
	return load.Outcomes(loadgen.OverloadFraction), over, true
}

// LoadCause says, for an OVERLOADED run, whether its failed, unknown and
// retried sends were intended inside the fault windows or outside every
// one ("" when the run is within load or did not run).
func (r *Result) LoadCause() string {
	o, _, ok := r.LoadOutcome()
	if !ok || !o.Overloaded {
		return ""
	}
	sf := r.SendFailures
	switch {
	case sf == nil:
		return "cause not recorded in this result (written before send failures were attributed to the faults)"
	case !sf.Outside.any() && sf.InFaults.any():
		return fmt.Sprintf("caused by the faults: every failed, unknown or retried send was intended inside a fault window, to 0.1 s (%s; %s), none outside",
			sf.InFaults, windowList(sf.Windows))
	case len(sf.Windows) == 0:
		return fmt.Sprintf("no fault was injected: the server did not keep up with the offered load (%s)", sf.Outside)
	default:
		return fmt.Sprintf("not explained by the faults alone: %s intended outside every fault window (inside: %s; windows %s)",
			sf.Outside, sf.InFaults, windowList(sf.Windows))
	}
}

// LoadLabel is the load verdict in a few words: "within load",
// "OVERLOADED by the faults" or "OVERLOADED" ("" when the load did not
// run).
func (r *Result) LoadLabel() string {
	o, _, ok := r.LoadOutcome()
	switch {
	case !ok:
		return ""
	case !o.Overloaded:
		return o.Label()
	case r.SendFailures != nil && !r.SendFailures.Outside.any() && r.SendFailures.InFaults.any():
		return "OVERLOADED by the faults"
	}
	return o.Label()
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
