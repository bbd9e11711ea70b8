package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestGapsBreakTheLine: a series with no measurement at t=2 and t=4 (a
// second without an ACK has no ACK latency) is drawn as three runs, never
// through the gaps: 1→3 and 3→5 are not joined, the spans are shaded with
// the gap times in their titles, each run's end next to a gap is circled,
// and the legend says how many seconds were not measured.
func TestGapsBreakTheLine(t *testing.T) {
	r := sample()
	r.Markers = nil
	r.Charts = []Chart{{Title: "ACK p99", Unit: "ms", Series: []Series{{Name: "p99",
		Points: []Point{{T: 0, V: 10}, {T: 1, V: 20}, {T: 3, V: 900}, {T: 5, V: 30}, {T: 6, V: 25}},
		Gaps:   []float64{2, 4}}}}}
	_, doc := render(t, r)
	svg := findAll(doc, elem("svg"))[0]
	lines := findAll(svg, elem("polyline", "series"))
	dots := findAll(svg, elem("circle", "dot"))
	if len(lines) != 2 || len(dots) != 1 {
		t.Fatalf("%d polylines and %d dots, want 0–1 and 5–6 as lines and 3 as a dot alone", len(lines), len(dots))
	}
	for _, l := range lines {
		if n := len(strings.Fields(attr(l, "points"))); n != 2 {
			t.Errorf("a run of %d points %q: want 2 (the line must not cross a gap)", n, attr(l, "points"))
		}
	}
	bands := findAll(svg, elem("rect", "gap"))
	if len(bands) != 2 || !strings.Contains(text(bands[0]), "t=2 s") || !strings.Contains(text(bands[1]), "t=4 s") {
		t.Fatalf("gap bands %d: want two, titled with their times", len(bands))
	}
	// The first band covers the unmeasured time: from halfway between the
	// last point before the gap (t=1) and the gap (t=2) to halfway between
	// the gap and the first point after it (t=3).
	x0, _ := strconv.ParseFloat(attr(bands[0], "x"), 64)
	w0, _ := strconv.ParseFloat(attr(bands[0], "width"), 64)
	ax, err := niceAxis(0, 6, xTickTarget)
	if err != nil {
		t.Fatal(err)
	}
	if x0 != roundCoord(xPos(ax, 1.5)) || roundCoord(x0+w0) != roundCoord(xPos(ax, 2.5)) {
		t.Errorf("band %v+%v, want %v..%v", x0, w0, xPos(ax, 1.5), xPos(ax, 2.5))
	}
	if n := len(findAll(svg, elem("circle", "gap-end"))); n != 3 {
		t.Errorf("%d circled ends, want 3 (1, the lone 3, 5)", n)
	}
	legend := text(findAll(doc, elem("ul", "legend"))[0])
	if !strings.Contains(legend, "2 without a measurement") {
		t.Errorf("legend %q does not count the gaps", legend)
	}
}

// TestGapBandCoversItsLine: a gap's band spans the height of its line on
// either side (with gapBandPad), not the whole plot: on a chart of two
// lines, the low line's gap does not shade where the high one runs.
func TestGapBandCoversItsLine(t *testing.T) {
	r := sample()
	r.Markers = nil
	r.Charts = []Chart{{Title: "CPU", Unit: "cores", Series: []Series{
		{Name: "high", Points: []Point{{T: 0, V: 1.8}, {T: 1, V: 1.9}, {T: 2, V: 1.8}, {T: 3, V: 1.9}}},
		{Name: "low", Points: []Point{{T: 0, V: 0.1}, {T: 1, V: 0.2}, {T: 3, V: 0.1}}, Gaps: []float64{2}},
	}}}
	_, doc := render(t, r)
	svg := findAll(doc, elem("svg"))[0]
	bands := findAll(svg, elem("rect", "gap"))
	if len(bands) != 1 {
		t.Fatalf("%d gap bands, want 1", len(bands))
	}
	y, _ := strconv.ParseFloat(attr(bands[0], "y"), 64)
	h, _ := strconv.ParseFloat(attr(bands[0], "height"), 64)
	ay, err := niceAxis(0, 1.9, yTickTarget)
	if err != nil {
		t.Fatal(err)
	}
	top, bottom := yPos(ay, 0.2)-gapBandPad, min(float64(plotBottom), yPos(ay, 0.1)+gapBandPad)
	if y < roundCoord(top)-0.5 || y+h > roundCoord(bottom)+0.5 || y > yPos(ay, 0.2) || y+h < yPos(ay, 0.1) {
		t.Errorf("band y %v..%v, want the low line's %v..%v (padded), not the plot's %d..%d", y, y+h, top, bottom, plotTop, plotBottom)
	}
	if y <= yPos(ay, 1.8) {
		t.Errorf("the low line's gap band reaches up to the high line (y %v)", y)
	}
}

// TestGapBandsAtTheEdges: per-second points at the middle of their
// seconds, the first and the last second unmeasured: each band covers
// exactly its second ([0, 1] and [3, 4]), not from the edge point on.
func TestGapBandsAtTheEdges(t *testing.T) {
	r := sample()
	r.Markers = nil
	r.Charts = []Chart{{Title: "CPU", Unit: "cores", Series: []Series{{Name: "api",
		Points: []Point{{T: 1.5, V: 0.5}, {T: 2.5, V: 0.6}}, Gaps: []float64{0.5, 3.5}}}}}
	_, doc := render(t, r)
	bands := findAll(findAll(doc, elem("svg"))[0], elem("rect", "gap"))
	if len(bands) != 2 {
		t.Fatalf("%d gap bands, want 2", len(bands))
	}
	// The time axis from the line itself: its two points are at t=1.5 and
	// t=2.5.
	line := findAll(findAll(doc, elem("svg"))[0], elem("polyline", "series"))
	if len(line) != 1 {
		t.Fatalf("%d polylines, want 1", len(line))
	}
	var p1, p2, y float64
	if _, err := fmt.Sscanf(attr(line[0], "points"), "%g,%g %g,%g", &p1, &y, &p2, &y); err != nil {
		t.Fatalf("points %q: %v", attr(line[0], "points"), err)
	}
	at := func(t float64) float64 { return p1 + (t-1.5)*(p2-p1) }
	for i, want := range [][2]float64{{0, 1}, {3, 4}} {
		x, _ := strconv.ParseFloat(attr(bands[i], "x"), 64)
		w, _ := strconv.ParseFloat(attr(bands[i], "width"), 64)
		lo, hi := max(float64(plotLeft), at(want[0])), min(float64(plotRight), at(want[1]))
		if math.Abs(x-lo) > 0.6 || math.Abs(x+w-hi) > 0.6 {
			t.Errorf("band %d at %v..%v, want %v..%v (t=%v..%v)", i, x, x+w, lo, hi, want[0], want[1])
		}
	}
}

func roundCoord(f float64) float64 {
	v, _ := strconv.ParseFloat(coord(f), 64)
	return v
}

// TestHeaderCarriesTheLoadVerdict: an OVERLOADED run shows a badge beside
// PASS and a Load row with its cause; the findings are summed up in the
// header; the charts come before the checks and the settings after them.
func TestHeaderCarriesTheLoadVerdict(t *testing.T) {
	r := sample()
	r.Passed = true
	r.Load = &LoadVerdict{Label: "OVERLOADED by the faults", Overloaded: true, Detail: "unknown 26.7%", Cause: "caused by the faults: every failed send was intended inside a fault window"}
	r.Findings = append(r.Findings, Finding{Name: "lost", Count: 7, MsgIDs: []uint64{42}})
	out, doc := render(t, r)
	h1 := text(findAll(doc, elem("h1"))[0])
	if !strings.Contains(h1, "PASS") || !strings.Contains(h1, "OVERLOADED by the faults") {
		t.Errorf("title %q: want PASS and the load verdict beside it", h1)
	}
	if len(findAll(doc, elem("span", "badge", "overloaded"))) != 1 {
		t.Error("no OVERLOADED badge")
	}
	row := text(findAll(doc, elem("tr", "load-row"))[0])
	if !strings.Contains(row, "caused by the faults") || !strings.Contains(row, "unknown 26.7%") {
		t.Errorf("load row %q", row)
	}
	if f := text(findAll(doc, elem("span", "findings-line", "bad"))[0]); !strings.Contains(f, "lost 7") || !strings.Contains(f, "duplicated 3") {
		t.Errorf("findings line %q", f)
	}
	iCharts, iChecks, iSettings := strings.Index(out, `id="charts"`), strings.Index(out, `id="checks"`), strings.Index(out, `id="settings"`)
	if iCharts < 0 || iCharts > iChecks || iChecks > iSettings {
		t.Errorf("sections at charts %d, checks %d, settings %d: want the charts first and the settings after the checks", iCharts, iChecks, iSettings)
	}
	r.Load = &LoadVerdict{Label: "within load", Detail: "unknown 0.0%"}
	_, doc = render(t, r)
	if len(findAll(doc, elem("span", "badge", "within"))) != 1 || len(findAll(doc, elem("span", "badge", "overloaded"))) != 0 {
		t.Error("within load: want the grey badge only")
	}
}

// TestRunLabelledFindingsKeepTheirClass: a page of several runs names each
// run's findings after the run ("#2 unsafe: lost"); they are highlighted
// as their finding is (lost bad, duplicated allowed).
func TestRunLabelledFindingsKeepTheirClass(t *testing.T) {
	r := sample()
	r.Findings = []Finding{{Name: "#1 a: duplicated", Count: 2}, {Name: "#2 b: lost", Count: 3, MsgIDs: []uint64{9}}}
	_, doc := render(t, r)
	rows := findAll(findAll(doc, elem("table", "findings"))[0], elem("tr"))
	if !hasClass(rows[1], "warn") || !hasClass(rows[2], "bad") {
		t.Errorf("rows %q / %q: want warn and bad", attr(rows[1], "class"), attr(rows[2], "class"))
	}
}
