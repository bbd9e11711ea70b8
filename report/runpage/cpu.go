package runpage

import (
	"fmt"

	"imlab/report"
	"imlab/result"
)

// reviewProcesses is the per-process CPU table of a review: every server
// process of every run (each incarnation of a killed or restarted one),
// its CPU time as the OS accounted it when it exited, and the run's CPU
// per ACKed send over the processes measured. A process whose CPU was not
// measured (one inside the runner) shows "unknown", and so does the
// run's figure, never 0.
func reviewProcesses(runs []*result.Result, labels []string) report.Table {
	t := report.Table{Title: "Server processes and their CPU (user + system, from the OS when each exited; CPU-µs per ACKed send over the whole run)",
		Header: []string{"run", "process", "pid", "end", "CPU s", "ACKed sends", "CPU-µs per ACKed send (run)"}}
	for i, r := range runs {
		var acked uint64
		for _, s := range r.Sends {
			acked += s.OK
		}
		total, known := 0.0, len(r.Processes) > 0
		for _, p := range r.Processes {
			if p.CPUSeconds == nil {
				known = false
				continue
			}
			total += *p.CPUSeconds
		}
		perMsg := "unknown"
		switch {
		case !known:
			perMsg = "unknown: a process's CPU was not measured (it ran inside the runner)"
		case acked == 0:
			perMsg = "unknown: no send was ACKed"
		default:
			perMsg = fmt.Sprintf("%.0f", total*1e6/float64(acked))
		}
		if len(r.Processes) == 0 {
			t.Rows = append(t.Rows, []string{labels[i], "(none recorded)", "", "", "unknown", fmt.Sprint(acked), perMsg})
		}
		for _, p := range r.Processes {
			cpu := "unknown"
			if p.CPUSeconds != nil {
				cpu = fmt.Sprintf("%.2f", *p.CPUSeconds)
			}
			pid := "in-process (inside the runner)"
			if p.Exec {
				pid = fmt.Sprint(p.PID)
			}
			t.Rows = append(t.Rows, []string{labels[i], p.Name, pid, p.End, cpu, fmt.Sprint(acked), perMsg})
		}
	}
	return t
}
