package capacity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"imlab/internal/htmltest"
)

// pageResult: four steps, the third without latency (stopped early) and
// the server's CPU unknown at the second; the last two broke the SLO.
func pageResult() *Result {
	cost := func(gen, srv *float64) []ProcCost {
		return []ProcCost{{Name: "generator", PID: 1, Cores: gen}, {Name: "server", PID: 2, Cores: srv, Err: "gone"}}
	}
	return &Result{Target: "http://127.0.0.1:1", SLO: "ack_p99<=200ms", Knee: ptr(300.0), Sustainable: ptr(200.0),
		Procs: []Proc{{Name: "generator", PID: 1}, {Name: "server", PID: 2}}, Machine: Machine{CPUs: 2, Note: MachineNote},
		Steps: []*Step{
			{Index: 4, OfferedPerSec: 400, AckP50Ms: ptr(300.0), AckP99Ms: ptr(900.0), CPU: cost(ptr(0.6), ptr(1.0))},
			{Index: 1, OfferedPerSec: 100, AckP50Ms: ptr(5.0), AckP99Ms: ptr(20.0), Held: true, CPU: cost(ptr(0.2), ptr(0.3))},
			{Index: 2, OfferedPerSec: 200, AckP50Ms: ptr(8.0), AckP99Ms: ptr(40.0), Held: true, CPU: cost(ptr(0.4), nil)},
			{Index: 3, OfferedPerSec: 300, StoppedEarly: "stalled", CPU: cost(ptr(0.5), ptr(0.9))},
		}}
}

func TestPageChartsHoldPointsLimitAndMarks(t *testing.T) {
	var buf bytes.Buffer
	if err := pageResult().WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	svgs := htmltest.FindAll(doc, "svg", "plot")
	if len(svgs) != 2 {
		t.Fatalf("%d charts, want 2", len(svgs))
	}
	lat, cpu := svgs[0], svgs[1]
	for _, c := range []struct {
		svg          *html.Node
		points, open int
		limit, gap   string
		gaps         int
	}{
		// p50 and p99 at 100, 200, 400; open at 400; no point at 300.
		{lat, 6, 2, "SLO ack_p99 (200 ms)", "offered rate 300 sends/s", 2},
		// generator at every step, the server at three; open at 300, 400.
		{cpu, 7, 4, "CPUs of the machine (2 cores)", "offered rate 200 sends/s", 1},
	} {
		title := htmltest.Attr(c.svg, "aria-label")
		if n := len(htmltest.FindAll(c.svg, "circle", "point")); n != c.points {
			t.Errorf("%s: %d points, want %d", title, n, c.points)
		}
		if n := len(htmltest.FindAll(c.svg, "circle", "point", "hollow")); n != c.open {
			t.Errorf("%s: %d open points, want %d (the broken steps)", title, n, c.open)
		}
		th := htmltest.FindAll(c.svg, "g", "threshold")
		if len(th) != 1 || !strings.Contains(htmltest.Text(th[0]), c.limit) || len(htmltest.FindAll(th[0], "line", "threshold-line")) != 1 {
			t.Errorf("%s: want one limit line labelled %q", title, c.limit)
		}
		marks := htmltest.FindAll(c.svg, "g", "marker", "mark")
		labels := htmltest.Text(htmltest.FindAll(c.svg, "g", "marker-labels")[0])
		if len(marks) != 2 || !strings.Contains(labels, "knee 300/s") || !strings.Contains(labels, "sustainable 200/s") {
			t.Errorf("%s: %d marks labelled %q, want the knee and the sustainable rate", title, len(marks), labels)
		}
		gaps := htmltest.FindAll(c.svg, "rect", "gap")
		if len(gaps) != c.gaps {
			t.Errorf("%s: %d gaps, want %d (one per series without a figure there)", title, len(gaps), c.gaps)
		}
		for _, g := range gaps {
			if !strings.Contains(htmltest.Text(g), c.gap) {
				t.Errorf("%s: gap %q, want it at %q", title, htmltest.Text(g), c.gap)
			}
		}
		if cap := htmltest.Text(htmltest.FindAll(c.svg, "text", "caption")[0]); cap != "offered rate (sends/s)" {
			t.Errorf("%s: x caption %q", title, cap)
		}
	}
	// Points run in rate order whatever the steps' order.
	pts := htmltest.FindAll(lat, "circle", "point")
	if x0, x2 := htmltest.Attr(pts[0], "cx"), htmltest.Attr(pts[2], "cx"); !(len(x0) > 0 && lessCoord(x0, htmltest.Attr(pts[1], "cx")) && lessCoord(htmltest.Attr(pts[1], "cx"), x2)) {
		t.Errorf("p50 points at x %s, %s, %s: want rising with the rate", x0, htmltest.Attr(pts[1], "cx"), x2)
	}
	if !strings.Contains(htmltest.Text(doc), "open point: the step broke the SLO") {
		t.Error("the page does not say what an open point means")
	}
}

func lessCoord(a, b string) bool {
	var x, y float64
	if _, err := fmt.Sscan(a, &x); err != nil {
		return false
	}
	if _, err := fmt.Sscan(b, &y); err != nil {
		return false
	}
	return x < y
}

// A search that began on a busy machine says so, with the scenario pages'
// word and threshold, in the table, result.json and report.html.
func TestBusyMachineSaidEverywhere(t *testing.T) {
	r := pageResult()
	r.LoadAverage = &LoadAverage{Start: [3]float64{5.19, 7.39, 16.71}, End: [3]float64{6, 7, 15}}
	r.Machine.Busy = busyNote(r.LoadAverage, r.Machine.CPUs, "the search")
	r.Steps[0].LoadAverage = &LoadAverage{Start: [3]float64{4, 4, 4}}
	r.Steps[0].Busy = busyNote(r.Steps[0].LoadAverage, 2, "the step")
	var txt, page bytes.Buffer
	if err := r.WriteTable(&txt); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"load average: at start 5.19/7.39/16.71, at end 6.00/7.00/15.00", "BUSY: the 1-minute load average was 5.19 on 2 CPUs when the search started",
		"step 4: BUSY: the 1-minute load average was 4.00 on 2 CPUs when the step started"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, txt.String())
		}
	}
	if !strings.Contains(string(raw), `"load_average":{"start":[5.19,7.39,16.71]`) || !strings.Contains(string(raw), `"busy":"BUSY: `) {
		t.Errorf("result.json lacks the load average or the BUSY flag: %s", raw)
	}
	doc, err := html.Parse(&page)
	if err != nil {
		t.Fatal(err)
	}
	if rows := htmltest.FindAll(doc, "tr", "warn", "machine"); len(rows) != 1 || !strings.Contains(htmltest.Text(rows[0]), "BUSY: the 1-minute load average was 5.19") {
		t.Errorf("report.html has no BUSY row in its header")
	}
	if !strings.Contains(htmltest.Text(doc), "Load average at start 5.19/7.39/16.71") {
		t.Errorf("report.html does not give the load average")
	}
	// An end not read is unknown, never 0.00.
	if n := busyNote(&LoadAverage{Start: [3]float64{8.8, 5, 4}}, 2, "the search"); !strings.Contains(n, "8.80 on 2 CPUs") || !strings.Contains(n, "unknown at its end") || strings.Contains(n, "0.00") {
		t.Errorf("a busy start whose end was not read: %q", n)
	}
	quiet := pageResult()
	quiet.LoadAverage = &LoadAverage{Start: [3]float64{1.5, 1, 1}}
	if n := busyNote(quiet.LoadAverage, 2, "the search"); n != "" {
		t.Errorf("a load of 1.5 on 2 CPUs is not busy: %q", n)
	}
}

// The page's prose: every sentence of the cost text starts with a capital
// letter; a search where no step broke does not explain open points.
func TestPageProseAndLegend(t *testing.T) {
	r := pageResult()
	var page bytes.Buffer
	if err := r.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&page)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range htmltest.FindAll(doc, "p", "description") {
		txt := htmltest.Text(p)
		for i := strings.Index(txt, ". "); i >= 0; i = strings.Index(txt, ". ") {
			if next := txt[i+2:]; next != "" && strings.ToLower(next[:1]) == next[:1] && strings.ToUpper(next[:1]) != next[:1] {
				t.Errorf("a sentence starts in lowercase: %q", txt[max(0, i-20):min(len(txt), i+30)])
			}
			txt = txt[i+2:]
		}
	}
	for _, st := range r.Steps {
		st.Held = true
	}
	page.Reset()
	if err := r.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page.String(), "open point:") {
		t.Error("no step broke, yet the page explains open points")
	}
}

// TestRepeatStepsAreSeriesOfTheirOwn: a repeat step at a rate the ramp
// measured is drawn in a repeat series, so no line joins the two steps at
// one rate; a search without a repeat draws no repeat series.
func TestRepeatStepsAreSeriesOfTheirOwn(t *testing.T) {
	r := pageResult()
	r.Steps = append(r.Steps, &Step{Index: 5, Phase: PhaseRepeat, OfferedPerSec: 200, AckP50Ms: ptr(7.0), AckP99Ms: ptr(30.0), Held: true,
		CPU: []ProcCost{{Name: "generator", PID: 1, Cores: ptr(0.41)}, {Name: "server", PID: 2, Cores: ptr(0.5)}}})
	var buf bytes.Buffer
	if err := r.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{"ACK p99, repeat steps", "generator (cores, repeat steps)"} {
		if !strings.Contains(page, want) {
			t.Errorf("no %q series", want)
		}
	}
	// A repeat series is drawn in its measure's colour: two measures, two
	// colours (the first two of the palette), whatever the series' count.
	for _, c := range []string{"#9467bd", "#8c564b"} {
		if strings.Contains(page, `stroke="`+c+`"`) {
			t.Errorf("a repeat series took a colour of its own (%s)", c)
		}
	}
	buf.Reset()
	if err := pageResult().WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "repeat steps") {
		t.Error("a search without a repeat step draws repeat series")
	}
}

// TestBusyFromTheRestOfTheMachine: a step's BUSY comes from the rest of
// the machine in its window when that was measured, whatever the load
// average at its start (which counts the search's own step before it);
// from the load average only when it was not; the search's names the
// busy steps.
func TestBusyFromTheRestOfTheMachine(t *testing.T) {
	high := &LoadAverage{Start: [3]float64{5, 5, 5}}
	if b := stepBusy(ptr(0.3), high, 2); b != "" {
		t.Fatalf("rest 0.3 of 2 CPUs, load average 5: %q, want not busy", b)
	}
	if b := stepBusy(ptr(0.6), nil, 2); !strings.Contains(b, "BUSY: the rest of the machine (beyond the watched processes) used 0.60 of 2 CPUs") {
		t.Fatalf("rest 0.6 of 2 CPUs: %q", b)
	}
	if b := stepBusy(nil, high, 2); !strings.Contains(b, "the 1-minute load average was 5.00") {
		t.Fatalf("rest unknown: %q, want the load average's note", b)
	}
	steps := []*Step{{Index: 0, RestCores: ptr(0.1)}, {Index: 1, RestCores: ptr(0.9)}, {Index: 2}}
	for _, st := range steps {
		st.Busy = stepBusy(st.RestCores, high, 2)
	}
	if b := searchBusy(steps, high, 2); !strings.HasPrefix(b, "BUSY: in step 1 the rest of the machine") {
		t.Fatalf("search: %q, want step 1 named (step 2's load-average note is not a measurement of the rest)", b)
	}
	steps[0].RestCores, steps[0].Busy = ptr(0.7), stepBusy(ptr(0.7), nil, 2)
	if b := searchBusy(steps, high, 2); !strings.HasPrefix(b, "BUSY: in steps 0, 1 the rest") {
		t.Fatalf("search with two busy steps: %q", b)
	}
	steps[0].RestCores, steps[0].Busy = ptr(0.1), ""
	if b := searchBusy(steps[:1], high, 2); b != "" {
		t.Fatalf("search with a quiet measured step: %q", b)
	}
	if b := searchBusy([]*Step{{Index: 0}}, high, 2); !strings.Contains(b, "when the search started") {
		t.Fatalf("search with nothing measured: %q, want the load average's note", b)
	}
}
