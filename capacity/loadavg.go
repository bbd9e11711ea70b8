package capacity

import (
	"fmt"
	"strings"

	"imlab/internal/loadavg"
)

// LoadAverage is the machine's load average (1, 5 and 15 minutes, as
// /proc/loadavg has it) at the start and the end of a step or of the
// search, in the layout of a scenario's result.json: a capacity depends on
// what else the machine ran, and the result says so.
type LoadAverage struct {
	Start [3]float64 `json:"start"`
	End   [3]float64 `json:"end"`
}

// Busy tells whether the 1-minute load average was above cpus at the
// start (the threshold the scenario pages flag as BUSY).
func (l *LoadAverage) Busy(cpus int) bool { return l != nil && l.Start[0] > float64(cpus) }

// String is "at start 2.10/1.50/0.90, at end 6.80/3.20/1.40 (1/5/15 min)".
func (l *LoadAverage) String() string {
	if l == nil {
		return "not recorded"
	}
	f := func(v [3]float64) string { return fmt.Sprintf("%.2f/%.2f/%.2f", v[0], v[1], v[2]) }
	return fmt.Sprintf("at start %s, at end %s (1/5/15 min)", f(l.Start), f(l.End))
}

// BusyRestShare: a step in whose measured window the rest of the machine
// (beyond the watched processes: the generator, the server, its
// databases) used at least this share of the CPUs on average is BUSY, as
// a scenario run is (result.OthersBusyShare).
const BusyRestShare = 0.25

// stepBusy is a step's BUSY warning ("" when not busy): from the rest of
// the machine in its window when that was measured (the load average at
// its start also counts the step before it, the search's own load), else
// from the load average.
func stepBusy(rest *float64, la *LoadAverage, cpus int) string {
	switch {
	case rest == nil:
		return busyNote(la, cpus, "the step")
	case *rest < BusyRestShare*float64(cpus):
		return ""
	}
	return fmt.Sprintf("BUSY: the rest of the machine (beyond the watched processes) used %.2f of %d CPUs on average in the measured window: other work held the cores, so its rates, latencies and costs describe a shared machine, not the target alone", *rest, cpus)
}

// searchBusy is the search's BUSY warning: the steps whose rest of the
// machine was busy, when any step's was measured; else from the load
// average at the search's start.
func searchBusy(steps []*Step, la *LoadAverage, cpus int) string {
	var busy []string
	measured := false
	for _, st := range steps {
		measured = measured || st.RestCores != nil
		if st.RestCores != nil && st.Busy != "" {
			busy = append(busy, fmt.Sprint(st.Index))
		}
	}
	switch {
	case !measured:
		return busyNote(la, cpus, "the search")
	case len(busy) == 0:
		return ""
	}
	which := "step " + busy[0]
	if len(busy) > 1 {
		which = "steps " + strings.Join(busy, ", ")
	}
	return fmt.Sprintf("BUSY: in %s the rest of the machine (beyond the watched processes) used at least %.0f%% of the CPUs: other work held the cores there, so those steps describe a shared machine, not the target alone", which, 100*BusyRestShare)
}

// busyNote is the BUSY warning for a search or step whose load average
// at its start was above cpus ("" when it was not, or not recorded).
func busyNote(l *LoadAverage, cpus int, what string) string {
	if !l.Busy(cpus) {
		return ""
	}
	end := "unknown at its end" // not read (yet): never 0
	if l.End != [3]float64{} {
		end = fmt.Sprintf("%.2f at its end", l.End[0])
	}
	return fmt.Sprintf("BUSY: the 1-minute load average was %.2f on %d CPUs when %s started (%s): other work held the cores, so its rates, latencies and costs describe a shared machine, not the target alone",
		l.Start[0], cpus, what, end)
}

// loadStart begins a load average record (nil: none readable).
func loadStart() *LoadAverage {
	v, ok := loadavg.Read()
	if !ok {
		return nil
	}
	return &LoadAverage{Start: v}
}

// finish records the end of l (nothing when l is nil).
func (l *LoadAverage) finish() {
	if l == nil {
		return
	}
	if v, ok := loadavg.Read(); ok {
		l.End = v
	}
}
