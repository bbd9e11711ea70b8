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
// CPUs)": the figures only (whether the run was BUSY is Result.Busy's to
// say: a load average counts the run before it too).
func (l LoadAverage) String() string {
	f := func(v [3]float64) string { return fmt.Sprintf("%.2f/%.2f/%.2f", v[0], v[1], v[2]) }
	return fmt.Sprintf("at start %s, at end %s (1/5/15 min, %d CPUs)", f(l.Start), f(l.End), runtime.NumCPU())
}

// CPUs is the CPU count of the machine r ran on: the generator's record
// of it, else this machine's.
func (r *Result) CPUs() int {
	if r.LabCPU != nil && r.LabCPU.CPUs > 0 {
		return r.LabCPU.CPUs
	}
	return runtime.NumCPU()
}

// Busy tells whether other work shared the machine with the run. With
// its CPU timeline, it is measured: the rest of the machine (processes
// outside the run) used at least OthersBusyShare of the CPUs on average
// while the run went on. Without one (a result from before, a capacity
// search) the 1-minute load average at the start decides, which also
// counts the run before it. known is false when neither was recorded.
func (r *Result) Busy() (busy, known bool) {
	if mean, _, n, _ := r.CPU.Others(); n > 0 {
		return mean >= OthersBusyShare*float64(r.CPU.CPUs), true
	}
	if la := r.LoadAverage; la != nil {
		return la.Busy(r.CPUs()), true
	}
	return false, false
}

// OthersLine says what the rest of the machine used while the run went
// on ("" without a CPU timeline).
func (r *Result) OthersLine() string {
	mean, peak, n, _ := r.CPU.Others()
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f of the machine's %d cores on average (%.0f%%), %.2f at peak, over %d s: processes outside the run and the kernel (the CPU chart's rest of the machine; a server found by name counts as the run's)",
		mean, r.CPU.CPUs, 100*mean/float64(r.CPU.CPUs), peak, n)
}

// BusyNote is the warning a page shows beside the verdict when other work
// shared the machine with the run (Busy; "" when it did not, or nothing
// says).
func (r *Result) BusyNote() string {
	if busy, _ := r.Busy(); !busy {
		return ""
	}
	if line := r.OthersLine(); line != "" {
		return "BUSY: other work held the cores while this run went on: " + line + "; its latency and rate figures describe a shared machine, not the target alone"
	}
	la := r.LoadAverage
	return fmt.Sprintf("BUSY: the 1-minute load average was %.2f on %d CPUs when this run started (%.2f at its end): other work held the cores, so its latency and rate figures describe a shared machine, not the target alone",
		la.Start[0], r.CPUs(), la.End[0])
}

// Busy tells whether the 1-minute load average was above cpus when the run
// started (other work, or the run before it, held the cores): the run's
// own load is not in that figure yet.
func (l LoadAverage) Busy(cpus int) bool { return l.Start[0] > float64(cpus) }
