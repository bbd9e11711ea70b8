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
	busy := strings.Index(page, "BUSY: 1 of 2 runs started on a machine busy with other work: #2 burst-50k (1-minute load 16.80 on 2 CPUs at its start)")
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
}
