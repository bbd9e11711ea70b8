package runpage

import (
	"fmt"
	"slices"
	"strings"

	"imlab/report"
	"imlab/result"
)

// cpuChart is the run's CPU by process, second by second (result.CPULine):
// a line per process, one for the rest of the machine, and the machine's
// CPU count as the threshold, so each figure of the run can be read beside
// who had the cores. A second a process was not measured in is a gap in
// its line, never 0. No chart (a note) for a run that did not record one.
func cpuChart(res *result.Result) ([]report.Chart, []string) {
	line := res.CPU
	if line == nil {
		if res.Capacity == nil && len(res.Sends) > 0 {
			return nil, []string{"No CPU chart: this run did not record its CPU by process (a result written before the timeline was recorded)."}
		}
		return nil, nil
	}
	if len(line.Seconds) == 0 {
		return nil, []string{"No CPU chart: the run ended before a second of its CPU was sampled."}
	}
	ch := report.Chart{
		Title: fmt.Sprintf("CPU by process (cores of the machine's %d, over each second, drawn at its middle; user + system time from /proc; the rest of the machine: other processes and the kernel)", line.CPUs),
		Unit:  "cores", Threshold: float64(line.CPUs), ThresholdLabel: "the machine's CPUs",
	}
	byName := false
	for _, p := range line.Procs {
		byName = byName || p.Found != ""
		se := report.Series{Name: p.Name, Slot: cpuSlot(p.Name)}
		for _, s := range line.Seconds {
			if c, ok := s.Cores[p.Name]; ok {
				se.Points = append(se.Points, report.Point{T: s.Mid(), V: c})
			} else {
				se.Gaps = append(se.Gaps, s.Mid())
			}
		}
		ch.Series = append(ch.Series, se)
	}
	rest := report.Series{Name: "rest of the machine", Slot: 8}
	for _, s := range line.Seconds {
		if v, ok := s.Rest(); ok {
			rest.Points = append(rest.Points, report.Point{T: s.Mid(), V: v})
		} else {
			rest.Gaps = append(rest.Gaps, s.Mid())
		}
	}
	ch.Series = append(ch.Series, rest)
	if byName {
		// Said at the chart, not only in the notes: such a line is read
		// as the run's cost.
		ch.Title += "; a line marked (by name) is a server the run shares, found by its command name: its CPU includes any other client's work"
	}
	notes := slices.Clone(line.Notes) // appended to below: not the result's own
	if _, _, _, floored := line.Others(); floored > 0 {
		notes = append(notes, fmt.Sprintf("CPU chart: in %d of %d seconds the processes' sum came out above the machine's busy time (the two are read a few microseconds apart): the rest of the machine is drawn as 0 there", floored, len(line.Seconds)))
	}
	return []report.Chart{ch}, notes
}

// cpuSlot keeps one colour per kind of process on every page (the
// runner, the api, the consumer, MySQL, Redis; the rest of the machine
// grey): the lines a chart holds differ from run to run.
func cpuSlot(name string) int {
	for _, k := range []struct {
		prefix string
		slot   int
	}{{"runner", 1}, {"api", 2}, {"mysql", 3}, {"mariadbd", 3}, {"redis", 4}, {"consumer", 6}, {"all", 2}} {
		if strings.HasPrefix(name, k.prefix) {
			return k.slot
		}
	}
	return 0
}
