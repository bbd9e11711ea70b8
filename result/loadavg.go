package result

import (
	"fmt"
	"runtime"
)

// LoadAverage is the machine's load average (1, 5 and 15 minutes, as
// /proc/loadavg has it) when the run started and when it ended: a run's
// figures depend on what else the machine ran, and the result says so.
type LoadAverage struct {
	Start [3]float64 `json:"start"`
	End   [3]float64 `json:"end"`
}

// String is "at start 2.10/1.50/0.90, at end 6.80/3.20/1.40 (1/5/15 min, 2
// CPUs)", with a warning when the machine was busy before the run began.
func (l LoadAverage) String() string {
	f := func(v [3]float64) string { return fmt.Sprintf("%.2f/%.2f/%.2f", v[0], v[1], v[2]) }
	s := fmt.Sprintf("at start %s, at end %s (1/5/15 min, %d CPUs)", f(l.Start), f(l.End), runtime.NumCPU())
	if l.Busy(runtime.NumCPU()) {
		s += "; BUSY: the 1-minute load was above the CPU count before this run started, so its latency and rate figures describe a machine shared with other work"
	}
	return s
}

// CPUs is the CPU count of the machine r ran on: the generator's record
// of it, else this machine's.
func (r *Result) CPUs() int {
	if r.LabCPU != nil && r.LabCPU.CPUs > 0 {
		return r.LabCPU.CPUs
	}
	return runtime.NumCPU()
}

// BusyNote is the warning a page shows beside the verdict when the
// machine was busy as the run began ("" when it was not, or the load
// average was not recorded).
func (r *Result) BusyNote() string {
	la := r.LoadAverage
	if la == nil || !la.Busy(r.CPUs()) {
		return ""
	}
	return fmt.Sprintf("BUSY: the 1-minute load average was %.2f on %d CPUs when this run started (%.2f at its end): other work held the cores, so its latency and rate figures describe a shared machine, not the target alone",
		la.Start[0], r.CPUs(), la.End[0])
}

// Busy tells whether the 1-minute load average was above cpus when the run
// started (other work, or the run before it, held the cores): the run's
// own load is not in that figure yet.
func (l LoadAverage) Busy(cpus int) bool { return l.Start[0] > float64(cpus) }
