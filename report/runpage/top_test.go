package runpage

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"imlab/loadgen/summary"
	"imlab/report"
	"imlab/result"
)

// TestReviewTop: a review of a run whose server ran inside the runner and
// one that started on a busy machine says "in-process" rather than pid 0,
// captions its time axis with the alignment point, and warns of the busy
// machine in the header, beside the verdict, above the charts.
func TestReviewTop(t *testing.T) {
	a := reviewRun(t, "burst-50k", 1, 3, 0, 0, 0, 1, 0)
	a.Processes = []result.ProcessRun{{Name: "all", Exec: false, Addr: "127.0.0.1:1", StartedAt: time.Unix(1, 0), End: "stopped"}}
	b := reviewRun(t, "burst-50k", 1, 3, 0, 0, 0, 1, 0)
	b.LabCPU = &summary.LabCPU{CPUs: 2, WindowSeconds: 6, CPUSeconds: 1, Share: 0.08}
	b.LoadAverage = &result.LoadAverage{Start: [3]float64{16.8, 13.5, 6.6}, End: [3]float64{22.8, 15.2, 7.4}}
	page := reviewPage(t, a, b)
	if !strings.Contains(page, "<td>#1 burst-50k</td><td>all</td><td>in-process (inside the runner)</td>") || strings.Contains(page, "<td>all</td><td>0</td>") {
		t.Error("an in-process server shows a pid")
	}
	if !strings.Contains(page, "time since each run&#39;s alignment point") {
		t.Error("the time axis does not say where it is aligned")
	}
	busy := strings.Index(page, "BUSY: 1 of 2 runs shared the machine with other work: #2 burst-50k (1-minute load 16.80 on 2 CPUs at the start)")
	if busy < 0 || busy > strings.Index(page, `id="charts"`) || busy < strings.Index(page, "Safety verdict") {
		t.Errorf("the busy machine is not beside the verdict at the top (at %d)", busy)
	}
}

// TestReportBusyAtTheTop: one run's page warns of the busy machine beside
// the verdict, above the charts.
func TestReportBusyAtTheTop(t *testing.T) {
	res := sampleResult()
	res.LabCPU = &summary.LabCPU{CPUs: 2, WindowSeconds: 6, CPUSeconds: 1, Share: 0.08}
	res.LoadAverage = &result.LoadAverage{Start: [3]float64{16.8, 13.5, 6.6}, End: [3]float64{22.8, 15.2, 7.4}}
	var b bytes.Buffer
	if err := report.WriteHTML(&b, HTMLReport(res)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	busy := strings.Index(page, "BUSY: the 1-minute load average was 16.80 on 2 CPUs when this run started (22.80 at its end)")
	if busy < 0 || busy > strings.Index(page, `id="charts"`) || busy < strings.Index(page, "Safety verdict") {
		t.Errorf("the busy machine is not beside the verdict at the top (at %d)", busy)
	}
	res.LoadAverage.Start[0] = 0.5
	b.Reset()
	if err := report.WriteHTML(&b, HTMLReport(res)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `class="warn machine"`) {
		t.Error("a quiet machine is warned of")
	}

	// With the run's CPU timeline, what the rest of the machine used
	// decides, not the load average at the start (which counts the run
	// before): a high load average over a quiet run is not BUSY, and
	// other work during a run that began quiet is.
	m := func(v float64) *float64 { return &v }
	quiet := &result.CPULine{CPUs: 2, Procs: []result.CPUProc{{Name: "runner (generator)"}}}
	busyLine := &result.CPULine{CPUs: 2, Procs: quiet.Procs}
	for i := range 4 {
		quiet.Seconds = append(quiet.Seconds, result.CPUSecond{T: float64(i + 1), Cores: map[string]float64{"runner (generator)": 0.5}, Machine: m(0.6)})
		busyLine.Seconds = append(busyLine.Seconds, result.CPUSecond{T: float64(i + 1), Cores: map[string]float64{"runner (generator)": 0.5}, Machine: m(1.7)})
	}
	for _, c := range []struct {
		name string
		la   float64
		line *result.CPULine
		busy bool
	}{{"quiet run after a busy minute", 16.8, quiet, false}, {"busy run on a quiet start", 0.5, busyLine, true}} {
		res.LoadAverage.Start[0], res.CPU = c.la, c.line
		b.Reset()
		if err := report.WriteHTML(&b, HTMLReport(res)); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		warned := strings.Contains(page, `class="warn machine"`)
		if warned != c.busy || (c.busy && !strings.Contains(page, "BUSY: other work held the cores while this run went on: 1.20 of the machine&#39;s 2 cores on average (60%)")) {
			t.Errorf("%s: warned %v, want %v", c.name, warned, c.busy)
		}
		if !strings.Contains(page, "machine_others_cpu") {
			t.Errorf("%s: the settings do not say what the rest of the machine used", c.name)
		}
	}
}
