package runpage

import (
	"strings"
	"testing"

	"imlab/result"
)

// TestCPUChart: a line per process and the rest of the machine; a second
// a process was not measured in is a gap in its line, never 0; a shared
// server found by name is said at the chart; a second whose processes
// summed above the machine is drawn as 0 for the rest, and said.
func TestCPUChart(t *testing.T) {
	m := func(v float64) *float64 { return &v }
	res := sampleResult()
	res.CPU = &result.CPULine{CPUs: 2, Procs: []result.CPUProc{{Name: "runner (generator)", PIDs: []int{1}}, {Name: "mariadbd (by name)", PIDs: []int{2}, Found: "by name"}},
		Seconds: []result.CPUSecond{
			{T: 1, Cores: map[string]float64{"runner (generator)": 0.5, "mariadbd (by name)": 0.4}, Machine: m(1.2)},
			{T: 2, Cores: map[string]float64{"runner (generator)": 0.6}, Machine: m(0.9)},
			{T: 3, Cores: map[string]float64{"runner (generator)": 0.7, "mariadbd (by name)": 0.5}, Machine: m(1.0)},
		}}
	charts, notes := cpuChart(res)
	if len(charts) != 1 || len(charts[0].Series) != 3 {
		t.Fatalf("charts %+v", charts)
	}
	ch := charts[0]
	db, rest := ch.Series[1], ch.Series[2]
	if len(db.Points) != 2 || len(db.Gaps) != 1 || db.Gaps[0] != 1.5 {
		t.Errorf("mariadbd %+v: want the second it was not measured in as a gap at 1.5", db)
	}
	if rest.Name != "rest of the machine" || len(rest.Points) != 3 || rest.Points[0].V < 0.29 || rest.Points[0].V > 0.31 || rest.Points[2].V != 0 {
		t.Errorf("rest %+v", rest)
	}
	if ch.Series[0].Slot != 1 || db.Slot != 3 || rest.Slot != 8 {
		t.Errorf("colour slots %d, %d, %d: want the runner, MySQL and the rest in their own colours on every page", ch.Series[0].Slot, db.Slot, rest.Slot)
	}
	if ch.Threshold != 2 || !strings.Contains(ch.Title, "(by name) is a server the run shares") {
		t.Errorf("threshold %g, title %q", ch.Threshold, ch.Title)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "in 1 of 3 seconds the processes' sum came out above the machine's busy time") {
		t.Errorf("notes %q", notes)
	}
	res.CPU = nil
	if c, n := cpuChart(res); c != nil || len(n) != 1 || !strings.Contains(n[0], "did not record its CPU") {
		t.Errorf("no timeline: %v %q", c, n)
	}
}
