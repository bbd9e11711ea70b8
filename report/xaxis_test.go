package report

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// rateChart is a chart on its own axis: offered rate against ACK p99,
// the step at 30/s without a figure, the one at 40/s broken.
func rateChart() Chart {
	return Chart{Title: "ACK p99 by rate", Unit: "ms",
		XAxis:  &XAxis{Label: "offered rate", Unit: "sends/s"},
		Hollow: "the step broke the SLO",
		Series: []Series{{Name: "ACK p99", Dots: true,
			Points: []Point{{T: 10, V: 20}, {T: 20, V: 40}, {T: 40, V: 900, Hollow: true}},
			Gaps:   []float64{30}}},
		Threshold: 200, ThresholdLabel: "SLO ack_p99",
		Marks: []Mark{{X: 20, Label: "sustainable 20/s"}, {X: 10, Label: "knee 10/s"}},
	}
}

func TestOwnXAxisChart(t *testing.T) {
	r := sample() // time charts and fault markers
	r.Charts = append(r.Charts, rateChart())
	_, doc := render(t, r)
	svgs := findAll(doc, elem("svg"))
	svg := svgs[len(svgs)-1]
	if c := text(findAll(svg, elem("text", "caption"))[0]); c != "offered rate (sends/s)" {
		t.Errorf("caption %q, want the axis' label and unit", c)
	}
	if c := text(findAll(svgs[0], elem("text", "caption"))[0]); c != "time since start (s)" {
		t.Errorf("time chart's caption %q", c)
	}
	pts := findAll(svg, elem("circle", "point"))
	if len(pts) != 3 {
		t.Fatalf("%d points, want 3", len(pts))
	}
	ax, err := niceAxis(8.5, 41.5, xTickTarget) // 10..40, a twentieth of the span each side
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{10, 20, 40} {
		if x, _ := strconv.ParseFloat(attr(pts[i], "cx"), 64); x != roundCoord(xPos(ax, want)) {
			t.Errorf("point %d at x=%v, want %v (rate %v)", i, x, xPos(ax, want), want)
		}
	}
	if hasClass(pts[0], "hollow") || attr(pts[2], "fill") != "#ffffff" || !hasClass(pts[2], "hollow") {
		t.Errorf("fills %q %q: want the broken step open, the others filled", attr(pts[0], "fill"), attr(pts[2], "fill"))
	}
	if tt := text(pts[2]); !strings.Contains(tt, "offered rate 40 sends/s") || !strings.Contains(tt, "the step broke the SLO") {
		t.Errorf("open point's title %q", tt)
	}
	if n := len(findAll(svg, elem("polyline", "series"))); n != 1 {
		t.Errorf("%d polylines, want 1 (10–20; the gap at 30 breaks the line, 40 stands alone)", n)
	}
	if bands := findAll(svg, elem("rect", "gap")); len(bands) != 1 || !strings.Contains(text(bands[0]), "offered rate 30 sends/s") {
		t.Errorf("gap bands %d: want one, named by its rate", len(bands))
	}
	th := findAll(svg, elem("g", "threshold"))
	if len(th) != 1 || !strings.Contains(text(th[0]), "SLO ack_p99 (200 ms)") {
		t.Fatalf("threshold: want one line labelled with its value")
	}
	marks := findAll(svg, elem("g", "marker", "mark"))
	if len(marks) != 2 {
		t.Fatalf("%d marks, want 2", len(marks))
	}
	if x := attr(findAll(marks[0], elem("line", "marker-line"))[0], "x1"); x != coord(xPos(ax, 10)) {
		t.Errorf("knee at x=%s, want %s", x, coord(xPos(ax, 10)))
	}
	labels := text(findAll(svg, elem("g", "marker-labels"))[0])
	if !strings.Contains(labels, "knee 10/s") || !strings.Contains(labels, "sustainable 20/s") {
		t.Errorf("mark labels %q", labels)
	}
	if n := len(findAll(svg, elem("g", "inject"))) + len(findAll(svg, elem("g", "heal"))); n != 0 {
		t.Errorf("%d fault markers on a chart with its own axis, want none", n)
	}
	if n := len(findAll(svgs[0], elem("g", "mark"))); n != 0 {
		t.Errorf("%d marks on a time chart, want none", n)
	}
	if n := len(findAll(svgs[0], elem("g", "marker"))); n != len(r.Markers) {
		t.Errorf("time chart has %d markers, want %d", n, len(r.Markers))
	}
}

// A chart on its own axis does not stretch the page's time axis.
func TestOwnXAxisLeavesTimeAxis(t *testing.T) {
	r := sample()
	_, before := render(t, r)
	r.Charts = append(r.Charts, rateChart())
	r.Charts[len(r.Charts)-1].Series[0].Points[2].T = 1e6
	_, after := render(t, r)
	ticks := func(doc *html.Node) string {
		return text(findAll(findAll(doc, elem("svg"))[0], elem("g", "xaxis"))[0])
	}
	if ticks(before) != ticks(after) {
		t.Errorf("time axis changed: %q, then %q", ticks(before), ticks(after))
	}
}

func TestFigures(t *testing.T) {
	figs, notes, err := Figures([]Chart{rateChart()})
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) != 1 || len(notes) != 0 {
		t.Fatalf("%d figures, notes %q", len(figs), notes)
	}
	doc, err := html.Parse(strings.NewReader(string(figs[0])))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(findAll(doc, elem("circle", "point"))); n != 3 {
		t.Errorf("%d points", n)
	}
	if n := len(findAll(doc, elem("g", "mark"))); n != 2 {
		t.Errorf("%d marks", n)
	}
	if !strings.Contains(text(doc), "open point: the step broke the SLO") {
		t.Errorf("no note on open points")
	}
	if !strings.Contains(string(FigureStyle()), "figure.chart") {
		t.Errorf("FigureStyle lacks the figure's CSS")
	}
}

// Rates of 200 to 400 fill the plot: the own x axis starts near the
// smallest rate, not at 0; and a chart without an open point does not say
// what an open point means.
func TestOwnXAxisStartsNearTheData(t *testing.T) {
	c := rateChart()
	c.Marks = []Mark{{X: 300, Label: "sustainable 300/s"}}
	c.Series[0].Gaps = nil
	c.Series[0].Points = []Point{{T: 200, V: 20}, {T: 300, V: 40}, {T: 400, V: 90}}
	figs, _, err := Figures([]Chart{c})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(strings.NewReader(string(figs[0])))
	if err != nil {
		t.Fatal(err)
	}
	ticks := findAll(findAll(doc, elem("g", "xaxis"))[0], elem("text"))
	if first, _ := strconv.ParseFloat(text(ticks[0]), 64); first < 150 {
		t.Errorf("x axis starts at %v for rates 200..400: want near 200", first)
	}
	pts := findAll(doc, elem("circle", "point"))
	if x, _ := strconv.ParseFloat(attr(pts[0], "cx"), 64); x > plotLeft+0.3*(plotRight-plotLeft) {
		t.Errorf("the smallest rate drawn at x %v, past the plot's first third", x)
	}
	if strings.Contains(text(doc), "open point") {
		t.Errorf("no step broke, yet the chart explains open points")
	}
}

func TestOwnXAxisInvalid(t *testing.T) {
	for name, mut := range map[string]func(c *Chart){
		"marks without an axis": func(c *Chart) { c.XAxis = nil },
		"axis without a label":  func(c *Chart) { c.XAxis.Label = " " },
		"mark at NaN":           func(c *Chart) { c.Marks[0].X = math.NaN() },
		"too many marks":        func(c *Chart) { c.Marks = make([]Mark, MaxMarkers+1) },
	} {
		c := rateChart()
		mut(&c)
		figs, _, err := Figures([]Chart{c})
		if !errors.Is(err, ErrInvalid) || figs != nil {
			t.Errorf("%s: err %v, %d figures: want ErrInvalid and none", name, err, len(figs))
		}
		r := sample()
		r.Charts = append(r.Charts, c)
		if err := r.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate: %v, want ErrInvalid", name, err)
		}
	}
}
