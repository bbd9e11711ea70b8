package result

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
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

// loadAvgFile is where Linux publishes the load average.
const loadAvgFile = "/proc/loadavg"

// readLoadAvg reads the load average; ok is false where there is none (not
// Linux) or it cannot be read.
func ReadLoadAvg() (v [3]float64, ok bool) {
	b, err := os.ReadFile(loadAvgFile)
	if err != nil {
		return v, false
	}
	return parseLoadAvg(string(b))
}

// parseLoadAvg reads the first three fields of /proc/loadavg.
func parseLoadAvg(s string) (v [3]float64, ok bool) {
	fs := strings.Fields(s)
	if len(fs) < 3 {
		return v, false
	}
	for i := range v {
		x, err := strconv.ParseFloat(fs[i], 64)
		if err != nil || x < 0 {
			return [3]float64{}, false
		}
		v[i] = x
	}
	return v, true
}
