package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// sample is a run of 100 s with three charts (lag with a threshold,
// throughput, latency with one empty series) and three markers.
func sample() *Report {
	ramp := func(n int, f func(t float64) float64) []Point {
		pts := make([]Point, n+1)
		for i := range pts {
			t := float64(i) * 100 / float64(n)
			pts[i] = Point{T: t, V: f(t)}
		}
		return pts
	}
	return &Report{
		Title:       "redis latency under 5k msg/s",
		Scenario:    "redis-latency",
		Description: "50 ms latency on redis for 25 s; lag must recover within 10 s.",
		Passed:      false,
		StartedAt:   time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC),
		Duration:    100*time.Second + 123456789,
		Backends:    "mysql=embedded; redis=embedded miniredis; kafka=embedded kfake",
		Settings:    [][2]string{{"policy", "outbox"}, {"allocator", "redis"}, {"rate", "5000/s constant"}},
		Verdict:     "VALID",
		Findings: []Finding{
			{Name: "ok", Count: 12000},
			{Name: "lost", Count: 0},
			{Name: "duplicated", Count: 3, Examples: []string{"m-1", "m-2", "m-3"}},
		},
		Checks: []Check{
			{Name: "lost", Want: "<= 0", Got: "0", OK: true},
			{Name: "ack_p99", Want: "<= 2s", Got: "3.1s", OK: false},
			{Name: "lag_recovery", Want: "<= 10s", Got: "4s", OK: true},
		},
		Charts: []Chart{
			{
				Title: "Consumer lag (age of oldest unprocessed message)", Unit: "s",
				Series: []Series{
					{Name: "partition 0", Points: ramp(100, func(t float64) float64 { return 4 * math.Abs(math.Sin(t/30)) })},
					{Name: "partition 1", Points: ramp(50, func(t float64) float64 { return 1 })},
				},
				Threshold: 2, ThresholdLabel: "limit",
			},
			{
				Title: "Throughput", Unit: "msg/s",
				Series: []Series{{Name: "acked", Points: ramp(100, func(t float64) float64 { return 5000 - 10*t })}},
			},
			{
				Title: "ACK latency", Unit: "ms",
				Series: []Series{
					{Name: "p50", Points: ramp(100, func(t float64) float64 { return 3 + t/50 })},
					{Name: "p99", Points: nil},
				},
			},
		},
		Markers: []Marker{
			{T: 50, Label: "heal latency(redis)", Kind: KindHeal},
			{T: 25, Label: "inject latency(redis,50ms)", Kind: KindInject},
			{T: 75, Label: "consumer restart failed", Kind: KindError},
		},
		Notes: []string{"embedded MySQL: figures are not capacity figures"},
	}
}

func render(t *testing.T, r *Report) (string, *html.Node) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, r); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
	out := buf.String()
	doc, err := html.Parse(strings.NewReader(out))
	if err != nil {
		t.Fatalf("parse output: %v", err)
	}
	return out, doc
}

func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func elem(tag string, classes ...string) func(*html.Node) bool {
	return func(n *html.Node) bool {
		if n.Type != html.ElementNode || n.Data != tag {
			return false
		}
		for _, c := range classes {
			if !hasClass(n, c) {
				return false
			}
		}
		return true
	}
}

// section is the page's <section id=ID>.
func section(t *testing.T, doc *html.Node, id string) *html.Node {
	t.Helper()
	for _, s := range findAll(doc, elem("section")) {
		if attr(s, "id") == id {
			return s
		}
	}
	t.Fatalf("no section %q", id)
	return nil
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, c string) bool {
	for _, f := range strings.Fields(attr(n, "class")) {
		if f == c {
			return true
		}
	}
	return false
}

func text(n *html.Node) string {
	var b strings.Builder
	for _, t := range findAll(n, func(n *html.Node) bool { return n.Type == html.TextNode }) {
		b.WriteString(t.Data)
	}
	return b.String()
}

// svgFragments returns each <svg>…</svg> of the output, which must be
// well-formed XML on its own.
func svgFragments(t *testing.T, out string) []string {
	t.Helper()
	var frags []string
	for rest := out; ; {
		i := strings.Index(rest, "<svg")
		if i < 0 {
			break
		}
		j := strings.Index(rest[i:], "</svg>")
		if j < 0 {
			t.Fatalf("unterminated <svg>")
		}
		frag := rest[i : i+j+len("</svg>")]
		d := xml.NewDecoder(strings.NewReader(frag))
		d.Strict = true
		for {
			_, err := d.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("svg %d is not well-formed XML: %v", len(frags)+1, err)
			}
		}
		frags = append(frags, frag)
		rest = rest[i+j:]
	}
	return frags
}

func pairs(points string) int { return len(strings.Fields(points)) }

func TestStructure(t *testing.T) {
	r := sample()
	out, doc := render(t, r)

	svgs := findAll(doc, elem("svg"))
	if len(svgs) != 3 {
		t.Fatalf("%d <svg>, want 3", len(svgs))
	}
	if n := len(svgFragments(t, out)); n != 3 {
		t.Fatalf("%d svg fragments, want 3", n)
	}
	for ci, svg := range svgs {
		c := r.Charts[ci]
		lines := findAll(svg, elem("polyline", "series"))
		var nonEmpty []Series
		for _, s := range c.Series {
			if len(s.Points) > 0 {
				nonEmpty = append(nonEmpty, s)
			}
		}
		if len(lines) != len(nonEmpty) {
			t.Fatalf("chart %d: %d polylines, want %d", ci, len(lines), len(nonEmpty))
		}
		colors := map[string]bool{}
		for i, l := range lines {
			if got, want := pairs(attr(l, "points")), len(nonEmpty[i].Points); got != want {
				t.Errorf("chart %d series %d: %d points drawn, want %d", ci, i, got, want)
			}
			if got := text(l); got != nonEmpty[i].Name {
				t.Errorf("chart %d series %d: title %q, want %q", ci, i, got, nonEmpty[i].Name)
			}
			colors[attr(l, "stroke")] = true
		}
		if len(colors) != len(lines) {
			t.Errorf("chart %d: %d distinct colours for %d series", ci, len(colors), len(lines))
		}
		if n := len(findAll(svg, elem("line", "marker-line"))); n != len(r.Markers) {
			t.Errorf("chart %d: %d marker lines, want %d", ci, n, len(r.Markers))
		}
		if len(findAll(svg, elem("text", "nodata"))) != 0 {
			t.Errorf("chart %d says no data", ci)
		}
	}

	figures := findAll(doc, elem("figure", "chart"))
	legend := findAll(figures[2], elem("li"))
	if len(legend) != 2 || !strings.Contains(text(legend[1]), "p99") || !strings.Contains(text(legend[1]), "no data") {
		t.Errorf("latency legend: %d entries, second %q; want p50 and p99 (no data)", len(legend), text(legend[len(legend)-1]))
	}
	if got := text(findAll(figures[1], elem("li"))[0]); !strings.Contains(got, "max 5000 msg/s") || !strings.Contains(got, "last 4000 msg/s") {
		t.Errorf("throughput legend %q, want max 5000 and last 4000 msg/s", got)
	}

	// Self-contained: no scripts, no external references.
	for _, bad := range []string{"<script", "http://", "https://", "src=", "<link", "@import", "url(", "ZgotmplZ"} {
		if strings.Contains(strings.ToLower(out), strings.ToLower(bad)) {
			t.Errorf("output contains %q", bad)
		}
	}
	if n := len(findAll(doc, elem("style"))); n != 1 {
		t.Errorf("%d <style>, want 1 inline stylesheet", n)
	}

	// Header: badge, verdict, settings.
	badge := findAll(doc, elem("span", "badge"))
	if len(badge) != 1 || text(badge[0]) != "FAIL" || !hasClass(badge[0], "fail") {
		t.Errorf("badge %v, want one FAIL badge", badge)
	}
	settings := findAll(doc, elem("table", "settings"))
	if len(settings) != 1 || len(findAll(settings[0], elem("tr"))) != 3 {
		t.Errorf("settings table missing or not 3 rows")
	}
	for _, want := range []string{"redis-latency", "2025-03-04 05:06:07 UTC", "1m40.123s", "kafka=embedded kfake", "VALID",
		"embedded MySQL: figures are not capacity figures"} {
		if !strings.Contains(text(doc), want) {
			t.Errorf("page text lacks %q", want)
		}
	}

	// Fault schedule sorted by T.
	var kinds []string
	for _, tr := range findAll(doc, elem("tr")) {
		for _, k := range []string{KindInject, KindHeal, KindError} {
			if hasClass(tr, "mk-"+k) {
				kinds = append(kinds, k)
			}
		}
	}
	if got := strings.Join(kinds, ","); got != "inject,heal,error" {
		t.Errorf("fault schedule order %s, want inject,heal,error", got)
	}
}

func TestMarkersAtTheirTime(t *testing.T) {
	_, doc := render(t, sample())
	// The data runs over 0..100 s, so the time axis is [0, 100] in steps
	// of 10 and T maps linearly onto the plot area.
	wantX := map[string]string{
		KindInject: coord(plotLeft + 0.25*(plotRight-plotLeft)),
		KindHeal:   coord(plotLeft + 0.50*(plotRight-plotLeft)),
		KindError:  coord(plotLeft + 0.75*(plotRight-plotLeft)),
	}
	if wantX[KindInject] != "269" {
		t.Fatalf("test geometry changed: inject x %s", wantX[KindInject])
	}
	wantStroke := map[string]string{KindInject: "#d62728", KindHeal: "#2ca02c", KindError: "#222222"}
	for ci, svg := range findAll(doc, elem("svg")) {
		var ticks []string
		for _, tx := range findAll(findAll(svg, elem("g", "xaxis"))[0], elem("text")) {
			ticks = append(ticks, text(tx))
		}
		if got := strings.Join(ticks, " "); got != "0 10 20 30 40 50 60 70 80 90 100" {
			t.Fatalf("chart %d x ticks %q", ci, got)
		}
		for _, g := range findAll(svg, elem("g", "marker")) {
			kind := strings.TrimSpace(strings.TrimPrefix(attr(g, "class"), "marker"))
			line := findAll(g, elem("line", "marker-line"))[0]
			if x1, x2 := attr(line, "x1"), attr(line, "x2"); x1 != wantX[kind] || x2 != wantX[kind] {
				t.Errorf("chart %d %s marker at x %s..%s, want %s", ci, kind, x1, x2, wantX[kind])
			}
			if got := attr(line, "stroke"); got != wantStroke[kind] {
				t.Errorf("chart %d %s marker stroke %s, want %s", ci, kind, got, wantStroke[kind])
			}
			title := text(findAll(g, elem("title"))[0])
			if !strings.Contains(title, "latency(redis") && !strings.Contains(title, "restart") {
				t.Errorf("chart %d %s marker title %q lacks its label", ci, kind, title)
			}
			if len(markerLabels(svg)) != len(findAll(svg, elem("g", "marker"))) {
				t.Errorf("chart %d %s marker has no small label", ci, kind)
			}
		}
	}
}

func TestThresholdLine(t *testing.T) {
	_, doc := render(t, sample())
	svgs := findAll(doc, elem("svg"))
	th := findAll(svgs[0], elem("line", "threshold-line"))
	if len(th) != 1 {
		t.Fatalf("%d threshold lines in the lag chart, want 1", len(th))
	}
	// Lag values reach 4 s, the threshold is 2 s: the value axis is [0, 4],
	// so the line sits half way up the plot area.
	want := coord(plotBottom - 0.5*(plotBottom-plotTop))
	if y1, y2 := attr(th[0], "y1"), attr(th[0], "y2"); y1 != want || y2 != want {
		t.Errorf("threshold at y %s..%s, want %s", y1, y2, want)
	}
	if attr(th[0], "stroke-dasharray") == "" {
		t.Errorf("threshold line is not dashed")
	}
	g := findAll(svgs[0], elem("g", "threshold"))[0]
	if got := text(findAll(g, elem("text"))[0]); got != "limit (2 s)" {
		t.Errorf("threshold label %q, want %q", got, "limit (2 s)")
	}
	for i, svg := range svgs[1:] {
		if n := len(findAll(svg, elem("line", "threshold-line"))); n != 0 {
			t.Errorf("chart %d without threshold has %d threshold lines", i+2, n)
		}
	}
}

func TestEscaping(t *testing.T) {
	const evil = `<script>alert(1)</script>"onmouseover="alert(2)`
	r := sample()
	r.Title = evil
	r.Scenario = evil
	r.Description = evil
	r.Backends = evil
	r.Verdict = evil
	r.Settings = append(r.Settings, [2]string{evil, evil})
	r.Checks = append(r.Checks, Check{Name: evil, Want: evil, Got: evil})
	r.Findings = append(r.Findings, Finding{Name: evil, Count: 1, Examples: []string{evil}})
	r.Charts[0].Title = evil
	r.Charts[0].Unit = evil
	r.Charts[0].ThresholdLabel = evil
	r.Charts[0].Series[0].Name = evil
	r.Markers[0].Label = evil
	r.Notes = append(r.Notes, evil)
	out, doc := render(t, r)

	if strings.Contains(strings.ToLower(out), "<script") {
		t.Fatalf("output holds a raw <script")
	}
	if n := len(findAll(doc, elem("script"))); n != 0 {
		t.Fatalf("%d script elements", n)
	}
	for _, n := range findAll(doc, func(n *html.Node) bool { return n.Type == html.ElementNode }) {
		for _, a := range n.Attr {
			if strings.HasPrefix(a.Key, "on") {
				t.Fatalf("<%s> got attribute %s=%q", n.Data, a.Key, a.Val)
			}
		}
	}
	// The text survives escaping intact.
	if got := text(findAll(doc, elem("h1"))[0]); !strings.HasPrefix(got, evil) {
		t.Errorf("h1 %q, want the hostile title as text", got)
	}
	if got := attr(findAll(doc, elem("svg"))[0], "aria-label"); got != evil {
		t.Errorf("svg aria-label %q, want the hostile chart title", got)
	}
	if got := text(findAll(doc, elem("title"))[0]); got != evil {
		t.Errorf("page title %q", got)
	}
	if n := strings.Count(text(doc), evil); n < 12 {
		t.Errorf("hostile text appears %d times as text, want every place (>= 12)", n)
	}
	svgFragments(t, out)
}

func TestFailedChecksHighlighted(t *testing.T) {
	_, doc := render(t, sample())
	table := findAll(doc, elem("table", "checks"))
	if len(table) != 1 {
		t.Fatalf("%d checks tables", len(table))
	}
	var failed, passed []string
	for _, tr := range findAll(table[0], elem("tr")) {
		tds := findAll(tr, elem("td"))
		if len(tds) == 0 {
			continue
		}
		switch {
		case hasClass(tr, "fail"):
			failed = append(failed, text(tds[0]))
		case hasClass(tr, "ok"):
			passed = append(passed, text(tds[0]))
		default:
			t.Errorf("check row %q neither ok nor fail", text(tr))
		}
	}
	if strings.Join(failed, ",") != "ack_p99" || strings.Join(passed, ",") != "lost,lag_recovery" {
		t.Errorf("failed %v passed %v, want [ack_p99] and [lost lag_recovery]", failed, passed)
	}
	if got := text(findAll(section(t, doc, "checks"), elem("small"))[0]); got != "2 of 3 passed" {
		t.Errorf("checks summary %q", got)
	}
}

func TestFindingsExamples(t *testing.T) {
	r := sample()
	var ex []string
	for i := range MaxExamples + 5 {
		ex = append(ex, fmt.Sprintf("dev %d seq %d", i, i*10))
	}
	r.Findings = []Finding{
		{Name: "ok", Count: 100},
		{Name: "lost", Count: 25, Examples: ex},
		{Name: "duplicated", Count: 2, Examples: ex[:2]},
		{Name: "skipped", Count: 0},
	}
	before := len(r.Findings[1].Examples)
	_, doc := render(t, r)
	rows := findAll(findAll(doc, elem("table", "findings"))[0], elem("tr"))[1:]
	if len(rows) != 4 {
		t.Fatalf("%d finding rows, want 4", len(rows))
	}
	wantClass := []string{"", "bad", "warn", ""}
	for i, tr := range rows {
		if got := attr(tr, "class"); got != wantClass[i] {
			t.Errorf("row %d class %q, want %q", i, got, wantClass[i])
		}
	}
	// One list item each: examples never run together on a line.
	if n := len(findAll(rows[1], elem("li"))); n != MaxExamples || len(findAll(rows[1], elem("code"))) != MaxExamples {
		t.Errorf("%d examples shown as list items, want %d", n, MaxExamples)
	}
	if more := findAll(rows[1], elem("span", "more")); len(more) != 1 || text(more[0]) != "+5 more" {
		t.Errorf("lost row lacks +5 more")
	}
	if len(findAll(rows[2], elem("span", "more"))) != 0 || len(findAll(rows[2], elem("code"))) != 2 {
		t.Errorf("duplicated row: want 2 examples and no +N more")
	}
	if len(r.Findings[1].Examples) != before {
		t.Errorf("examples of the input changed")
	}
}

func TestDecimationToMaxPoints(t *testing.T) {
	r := sample()
	const n = 50000
	pts := make([]Point, n)
	for i := range pts {
		pts[i] = Point{T: float64(i) / 500, V: 1}
	}
	pts[1].V = 1000 // between two kept points: not drawn, still the series' max
	r.Charts[1].Series = []Series{{Name: "acked", Points: pts}}
	out, doc := render(t, r)
	line := findAll(findAll(doc, elem("svg"))[1], elem("polyline", "series"))[0]
	coords := strings.Fields(attr(line, "points"))
	if len(coords) != MaxPoints {
		t.Fatalf("%d points drawn, want %d", len(coords), MaxPoints)
	}
	if !strings.HasPrefix(coords[0], coord(plotLeft)+",") || !strings.HasPrefix(coords[len(coords)-1], coord(plotRight)+",") {
		t.Errorf("first/last point %s %s, want at the axis ends", coords[0], coords[len(coords)-1])
	}
	if !strings.Contains(out, fmt.Sprintf("%d points decimated evenly to %d", n, MaxPoints)) {
		t.Errorf("no decimation note")
	}
	if got := text(findAll(findAll(doc, elem("figure", "chart"))[1], elem("li"))[0]); !strings.Contains(got, "max 1000 msg/s") {
		t.Errorf("legend %q, want the max over every point", got)
	}
	if len(r.Charts[1].Series[0].Points) != n {
		t.Errorf("input series changed length")
	}
}

func TestNonFinitePointsDropped(t *testing.T) {
	r := sample()
	r.Charts[2].Series[0].Points = []Point{
		{T: 0, V: 1}, {T: 10, V: math.NaN()}, {T: 20, V: 2}, {T: math.Inf(1), V: 3}, {T: 30, V: math.Inf(-1)}, {T: 40, V: 4},
	}
	out, doc := render(t, r)
	line := findAll(findAll(doc, elem("svg"))[2], elem("polyline", "series"))[0]
	if got := pairs(attr(line, "points")); got != 3 {
		t.Errorf("%d points drawn, want the 3 finite ones", got)
	}
	note := `chart 3 "ACK latency", series 1 "p50": 3 of 6 points dropped (NaN or infinite)`
	notes := findAll(doc, elem("ul", "notes"))
	if len(notes) != 1 || !strings.Contains(text(notes[0]), note) {
		t.Errorf("notes lack %q", note)
	}
	for _, frag := range svgFragments(t, out) {
		if strings.Contains(frag, "NaN") || strings.Contains(frag, "Inf") {
			t.Errorf("NaN or Inf reached the plot")
		}
	}
	if !math.IsNaN(r.Charts[2].Series[0].Points[1].V) || len(r.Charts[2].Series[0].Points) != 6 {
		t.Errorf("input points changed")
	}
}

func TestInputUnchanged(t *testing.T) {
	r, want := sample(), sample()
	render(t, r)
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("WriteHTML modified its input")
	}
}

func TestValidationWritesNothing(t *testing.T) {
	manySeries := make([]Series, MaxSeries+1)
	cases := []struct {
		name string
		edit func(r *Report)
		want string
	}{
		{"empty title", func(r *Report) { r.Title = "" }, "title is empty"},
		{"blank title", func(r *Report) { r.Title = " \t" }, "title is empty"},
		{"unsorted T", func(r *Report) {
			r.Charts[1].Series[0].Points[7].T = 3
		}, `chart 2 "Throughput", series 1 "acked": point 7 has T=3, before T=6 of point 6`},
		{"too many series", func(r *Report) { r.Charts[0].Series = manySeries }, "65 series, at most 64"},
		{"too many charts", func(r *Report) { r.Charts = make([]Chart, MaxCharts+1) }, "33 charts, at most 32"},
		{"too many markers", func(r *Report) {
			r.Markers = make([]Marker, MaxMarkers+1)
			for i := range r.Markers {
				r.Markers[i] = Marker{T: float64(i), Kind: KindInject}
			}
		}, "501 markers, at most 500"},
		{"marker kind", func(r *Report) { r.Markers[1].Kind = "boom" }, `kind "boom"`},
		{"marker T", func(r *Report) { r.Markers[0].T = math.NaN() }, "T is NaN"},
		{"threshold", func(r *Report) { r.Charts[0].Threshold = math.Inf(1) }, "threshold is +Inf"},
		{"negative duration", func(r *Report) { r.Duration = -time.Second }, "duration -1s is negative"},
		{"latency without name", func(r *Report) { r.Latencies = []Latency{{Count: 1, Quantiles: []Quantile{{"p50", 1}}}} }, "latency 1 has no name"},
		{"latency counted, no quantile", func(r *Report) { r.Latencies = []Latency{{Name: "ACK", Count: 5}} }, `latency 1 "ACK": 5 counted but no quantile`},
		{"negative latency", func(r *Report) {
			r.Latencies = []Latency{{Name: "ACK", Count: 5, Quantiles: []Quantile{{"p50", -time.Millisecond}}}}
		}, `quantile "p50" is -1ms`},
		{"too many latencies", func(r *Report) { r.Latencies = make([]Latency, MaxLatencies+1) }, "17 latencies, at most 16"},
		{"axis too wide", func(r *Report) {
			r.Charts[1].Series[0].Points = []Point{{T: 0, V: -math.MaxFloat64}, {T: 1, V: math.MaxFloat64}}
		}, "value axis"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := sample()
			c.edit(r)
			var buf bytes.Buffer
			err := WriteHTML(&buf, r)
			if err == nil {
				t.Fatalf("accepted")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q lacks %q", err, c.want)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes", buf.Len())
			}
			if verr := r.Validate(); verr == nil || verr.Error() != err.Error() {
				t.Errorf("Validate() = %v, want %v", verr, err)
			}
		})
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, nil); !errors.Is(err, ErrInvalid) || buf.Len() != 0 {
		t.Errorf("nil report: %v, %d bytes", err, buf.Len())
	}
	if err := WriteHTML(nil, sample()); err == nil {
		t.Errorf("nil writer accepted")
	}
	if err := sample().Validate(); err != nil {
		t.Errorf("sample invalid: %v", err)
	}
}

// TestLatenciesInHeader: the whole run's latency quantiles are in the
// header table beside the verdict, with what they count; nothing counted
// reads "unknown", never 0.
func TestLatenciesInHeader(t *testing.T) {
	r := sample()
	r.Latencies = []Latency{
		{Name: "ACK latency, whole run", Of: "ACKed sends only", Count: 900, Means: "intended send to ACK",
			Quantiles: []Quantile{{"p50", 3121 * time.Microsecond}, {"p99", 107199 * time.Microsecond}, {"p99.9", 12 * time.Second}, {"min", 840 * time.Microsecond}}},
		{Name: "ACK latency, run #2", Of: "ACKed sends only", Count: 0, Unknown: "no send was ACKed",
			Quantiles: []Quantile{{"p50", 0}, {"p99", 0}}},
	}
	_, doc := render(t, r)
	meta := findAll(doc, elem("table", "meta"))
	if len(meta) != 1 {
		t.Fatalf("%d header tables", len(meta))
	}
	rows := findAll(meta[0], elem("tr", "latency"))
	if len(rows) != 2 {
		t.Fatalf("%d latency rows in the header, want 2", len(rows))
	}
	known := text(rows[0])
	for _, want := range []string{"ACK latency, whole run", "p50 3.121 ms · p99 107.2 ms · p99.9 12 s · min 840 µs", "over 900 ACKed sends only; intended send to ACK"} {
		if !strings.Contains(known, want) {
			t.Errorf("known row %q lacks %q", known, want)
		}
	}
	unknown := text(rows[1])
	if !strings.Contains(unknown, "unknown") || !strings.Contains(unknown, "nothing measured (0 ACKed sends only): no send was ACKed") {
		t.Errorf("unmeasured row %q: want unknown and why", unknown)
	}
	if strings.Contains(unknown, "p50") || strings.Contains(unknown, "0 ms") || !hasClass(rows[1], "unknown") {
		t.Errorf("unmeasured row %q shows figures", unknown)
	}
	// In the header: before the checks.
	all := text(doc)
	if strings.Index(all, "p50 3.121 ms") > strings.Index(all, "Checks") {
		t.Errorf("the latency is not in the header, before the checks")
	}
}

// TestDesignDocumentGlossary: a page that shows a design document's name
// ("seed 003") says in words what that document is, and only for the
// names it shows.
func TestDesignDocumentGlossary(t *testing.T) {
	_, doc := render(t, sample())
	if g := findAll(doc, elem("p", "glossary")); len(g) != 0 {
		t.Fatalf("a page naming no design document has a glossary: %q", text(g[0]))
	}
	cases := []struct {
		name string
		edit func(r *Report)
		want []string
	}{
		{"description", func(r *Report) { r.Description = "store policy (seed 003 option B)" }, []string{"003"}},
		{"table cell", func(r *Report) {
			r.Tables = []Table{{Title: "t", Header: []string{"a"}, Rows: [][]string{{"as SEED 004 says"}}}}
		}, []string{"004"}},
		{"list in a note", func(r *Report) { r.Notes = []string{"the seeds 004/000 and 003"} }, []string{"000", "003", "004"}},
		{"marker", func(r *Report) { r.Markers[0].Label = "seed 000 failure row: Redis wiped" }, []string{"000"}},
	}
	means := map[string]string{"000": "offline messages", "003": "message queue", "004": "MongoDB history"}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := sample()
			c.edit(r)
			_, doc := render(t, r)
			g := findAll(doc, elem("p", "glossary"))
			if len(g) != 1 {
				t.Fatalf("%d glossaries, want 1", len(g))
			}
			terms := findAll(g[0], elem("dfn"))
			if len(terms) != len(c.want) {
				t.Fatalf("glossary %q: %d terms, want %v", text(g[0]), len(terms), c.want)
			}
			for i, n := range c.want {
				if text(terms[i]) != "seed "+n {
					t.Errorf("term %d %q, want seed %s", i, text(terms[i]), n)
				}
				if !strings.Contains(text(g[0]), means[n]) {
					t.Errorf("glossary %q does not say seed %s is the design document on %s", text(g[0]), n, means[n])
				}
			}
		})
	}
	r := sample()
	r.Notes = []string{"seed 001 and seed 0003 are no design documents"}
	if _, doc := render(t, r); len(findAll(doc, elem("p", "glossary"))) != 0 {
		t.Errorf("numbers that name no design document got a glossary")
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

func TestWriteErrorReturned(t *testing.T) {
	boom := errors.New("disk full")
	err := WriteHTML(failingWriter{boom}, sample())
	if !errors.Is(err, boom) || errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v, want the writer's error", err)
	}
}

func TestEmptyChartsSayNoData(t *testing.T) {
	r := sample()
	r.Charts = []Chart{
		{Title: "no series", Unit: "s"},
		{Title: "empty series", Unit: "s", Series: []Series{{Name: "a"}, {Name: "b", Points: []Point{}}}, Threshold: 2},
		{Title: "only NaN", Unit: "ms", Series: []Series{{Name: "p99", Points: []Point{{T: 1, V: math.NaN()}, {T: math.NaN(), V: 2}}}}},
	}
	out, doc := render(t, r)
	svgs := findAll(doc, elem("svg"))
	if len(svgs) != 3 {
		t.Fatalf("%d <svg>, want 3", len(svgs))
	}
	for i, svg := range svgs {
		nd := findAll(svg, elem("text", "nodata"))
		if len(nd) != 1 || text(nd[0]) != "no data" {
			t.Errorf("chart %d does not say no data", i+1)
		}
		if n := len(findAll(svg, elem("polyline"))); n != 0 {
			t.Errorf("chart %d has %d polylines", i+1, n)
		}
		if n := len(findAll(svg, elem("line", "marker-line"))); n != len(r.Markers) {
			t.Errorf("chart %d: %d marker lines, want %d", i+1, n, len(r.Markers))
		}
	}
	if n := len(findAll(svgs[1], elem("line", "threshold-line"))); n != 1 {
		t.Errorf("threshold of an empty chart not drawn")
	}
	svgFragments(t, out)
}

func TestSinglePointSeries(t *testing.T) {
	r := sample()
	r.Markers = nil
	r.Charts = []Chart{{Title: "one", Unit: "s", Series: []Series{{Name: "x", Points: []Point{{T: 5, V: 2}}}}}}
	_, doc := render(t, r)
	svg := findAll(doc, elem("svg"))[0]
	if len(findAll(svg, elem("polyline", "series"))) != 0 || len(findAll(svg, elem("circle", "dot"))) != 1 {
		t.Fatalf("single point not drawn as a dot alone")
	}
	if !strings.Contains(text(section(t, doc, "faults")), "no faults injected") {
		t.Errorf("empty fault schedule not said")
	}
}

func TestExampleReportFile(t *testing.T) {
	r := sample()
	// A long run: 10 minutes at 1 sample/s for 8 partitions.
	lag := Chart{Title: "Lag per partition", Unit: "records", Threshold: 5000, ThresholdLabel: "max backlog"}
	for p := range 8 {
		s := Series{Name: fmt.Sprintf("partition %d", p)}
		for i := range 601 {
			v := 100 + 50*float64(p)
			if i >= 120 && i < 240 {
				v += float64(i-120) * 40
			}
			s.Points = append(s.Points, Point{T: float64(i), V: v})
		}
		lag.Series = append(lag.Series, s)
	}
	r.Charts = append(r.Charts, lag)
	r.Markers = append(r.Markers, Marker{T: 120, Label: "inject down(kafka)", Kind: KindInject}, Marker{T: 240, Label: "heal down(kafka)", Kind: KindHeal})

	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, r); err != nil {
		f.Close()
		t.Fatalf("WriteHTML: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("example report: %d bytes", len(b))
	if len(b) < 20_000 || len(b) > 1_000_000 {
		t.Fatalf("example report is %d bytes, want 20 kB..1 MB", len(b))
	}
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(findAll(doc, elem("svg"))); n != 4 {
		t.Fatalf("%d <svg>, want 4", n)
	}
	if n := len(findAll(doc, elem("polyline", "series"))); n != 2+1+1+8 {
		t.Fatalf("%d polylines, want 12", n)
	}
	svgFragments(t, string(b))
}

func TestSharedTimeAxis(t *testing.T) {
	r := &Report{Title: "shared axis", Charts: []Chart{
		{Title: "short", Unit: "s", Series: []Series{{Name: "a", Points: []Point{{T: 0, V: 1}, {T: 10, V: 2}}}}},
		{Title: "long", Unit: "s", Series: []Series{{Name: "b", Points: []Point{{T: 0, V: 1}, {T: 100, V: 2}}}}},
	}}
	_, doc := render(t, r)
	svgs := findAll(doc, elem("svg"))
	if len(svgs) != 2 {
		t.Fatalf("%d svg, want 2", len(svgs))
	}
	for ci, svg := range svgs {
		var ticks []string
		for _, tx := range findAll(findAll(svg, elem("g", "xaxis"))[0], elem("text")) {
			ticks = append(ticks, text(tx))
		}
		if got := strings.Join(ticks, " "); got != "0 10 20 30 40 50 60 70 80 90 100" {
			t.Errorf("chart %d x ticks %q: every chart must share the page's time axis", ci, got)
		}
	}
}

func TestTables(t *testing.T) {
	r := &Report{Title: "tables", Tables: []Table{{
		Title:  "Server processes",
		Header: []string{"process", "pid", "end"},
		Rows:   [][]string{{"consumer", "101", "killed <signal>"}, {"consumer", "102", "stopped"}},
	}}}
	out, doc := render(t, r)
	if !strings.Contains(out, "Server processes") || !strings.Contains(out, "killed &lt;signal&gt;") {
		t.Fatalf("table title or escaped cell missing")
	}
	var cells []string
	for _, tbl := range findAll(doc, elem("table", "extra")) {
		for _, td := range findAll(tbl, elem("td")) {
			cells = append(cells, text(td))
		}
	}
	if got := strings.Join(cells, "|"); got != "consumer|101|killed <signal>|consumer|102|stopped" {
		t.Fatalf("cells %q", got)
	}

	many := Table{Title: "many", Header: []string{"n"}}
	for i := range MaxTableRows + 3 {
		many.Rows = append(many.Rows, []string{strconv.Itoa(i)})
	}
	out, _ = render(t, &Report{Title: "many rows", Tables: []Table{many}})
	if !strings.Contains(out, "+3 more rows") {
		t.Fatal("rows past MaxTableRows are not summarised")
	}

	for name, bad := range map[string]Table{
		"no title":   {Header: []string{"a"}},
		"no header":  {Title: "x"},
		"short row":  {Title: "x", Header: []string{"a", "b"}, Rows: [][]string{{"1"}}},
		"wide table": {Title: "x", Header: make([]string, MaxTableCols+1)},
	} {
		var b strings.Builder
		if err := WriteHTML(&b, &Report{Title: "bad", Tables: []Table{bad}}); !errors.Is(err, ErrInvalid) || b.Len() != 0 {
			t.Errorf("%s: err %v, wrote %d bytes; want ErrInvalid and nothing written", name, err, b.Len())
		}
	}
}

func TestFindingsListMsgIDs(t *testing.T) {
	r := sample()
	ids := make([]uint64, MaxExamples+3)
	for i := range ids {
		ids[i] = uint64(1000 + i)
	}
	r.Findings = []Finding{{Name: "duplicated", Count: 55, Messages: 40, MsgIDs: ids}, {Name: "recovered", Count: 2, MsgIDs: ids[:2]}}
	_, doc := render(t, r)
	rows := findAll(findAll(doc, elem("table", "findings"))[0], elem("tr"))[1:]
	ids0 := findAll(rows[0], elem("div", "ids"))
	if len(ids0) != 1 || len(findAll(ids0[0], elem("code"))) != MaxExamples || !strings.Contains(text(ids0[0]), "1000") {
		t.Fatalf("duplicated row: want %d msg_ids listed, got %q", MaxExamples, text(rows[0]))
	}
	// 40 msg_ids (of 55 copies), 20 listed: the rest of the msg_ids are
	// summarised.
	if more := findAll(ids0[0], elem("span", "more")); len(more) != 1 || text(more[0]) != "+20 more" {
		t.Errorf("duplicated row: want +20 more, got %q", text(ids0[0]))
	}
	if got := text(rows[1]); !strings.Contains(got, "1000") || !strings.Contains(got, "1001") || strings.Contains(got, "more") {
		t.Errorf("recovered row %q", got)
	}
	// A tolerated finding says so where it is highlighted.
	if !strings.Contains(text(rows[0]), "allowed: does not decide the verdict") || strings.Contains(text(rows[1]), "allowed") {
		t.Errorf("duplicated row %q does not say it is allowed (or recovered does)", text(rows[0]))
	}
}

func TestThresholdOffScale(t *testing.T) {
	r := &Report{Title: "t", Charts: []Chart{{Title: "ACK", Unit: "ms", Threshold: 5000, ThresholdLabel: "max ACK p99",
		Series: []Series{{Name: "p99", Points: []Point{{T: 0, V: 120}, {T: 1, V: 210}, {T: 2, V: 180}}}}}}}
	_, doc := render(t, r)
	svg := findAll(doc, elem("svg"))[0]
	var ticks []string
	for _, tx := range findAll(findAll(svg, elem("g", "yaxis"))[0], elem("text")) {
		ticks = append(ticks, text(tx))
	}
	// The axis follows the data (210 ms), not the 5 s threshold.
	if got := ticks[len(ticks)-1]; got != "250" {
		t.Fatalf("value axis ticks %q: want it scaled to the data", ticks)
	}
	th := findAll(svg, elem("line", "threshold-line"))[0]
	if y := attr(th, "y1"); y != coord(plotTop) {
		t.Errorf("off-scale threshold at y %s, want the top edge %s", y, coord(plotTop))
	}
	if x1 := attr(th, "x1"); x1 == coord(plotLeft) {
		t.Errorf("off-scale threshold drawn across the plot (x1 %s): it would read as a threshold at the top tick", x1)
	}
	// Its label is a note under the plot, not text over the data
	// (TestOffScaleThresholdLabelClearOfData).
	g := findAll(svg, elem("g", "threshold"))[0]
	if tx := findAll(g, elem("text")); len(tx) != 0 {
		t.Errorf("off-scale threshold drew text %q in the plot", text(tx[0]))
	}
	if n := findAll(doc, elem("p", "threshold-note")); len(n) != 1 || !strings.Contains(text(n[0]), "off scale") || !strings.Contains(text(n[0]), "5000 ms") {
		t.Errorf("off-scale threshold note missing or wrong")
	}
	// Within OffScaleFactor the threshold stays to scale.
	r.Charts[0].Threshold = 400
	_, doc = render(t, r)
	g = findAll(findAll(doc, elem("svg"))[0], elem("g", "threshold"))[0]
	if got := text(findAll(g, elem("text"))[0]); strings.Contains(got, "off scale") {
		t.Errorf("threshold 400 over data 210 marked off scale: %q", got)
	}
}

func TestMarkerLabelsDoNotOverlap(t *testing.T) {
	r := &Report{Title: "t", Charts: []Chart{{Title: "c", Series: []Series{{Name: "a", Points: []Point{{T: 0, V: 1}, {T: 16, V: 2}}}}}}}
	for _, m := range []Marker{{T: 1, Label: "inject latency(redis,50ms,jitter=10ms)", Kind: KindInject}, {T: 3, Label: "heal latency(redis,50ms,jitter=10ms)", Kind: KindHeal},
		{T: 3.5, Label: "inject reset_peer(mysql)", Kind: KindInject}, {T: 4.5, Label: "heal reset_peer(mysql)", Kind: KindHeal}, {T: 5, Label: "inject down(kafka)", Kind: KindInject},
		{T: 5.01, Label: "heal down(kafka)", Kind: KindHeal}, {T: 7, Label: "heal kill(consumer)", Kind: KindHeal}} {
		r.Markers = append(r.Markers, m)
	}
	_, doc := render(t, r)
	rows := checkNoLabelOverlap(t, findAll(doc, elem("svg"))[0])
	if rows < 2 {
		t.Fatalf("labels on %d rows: want them staggered", rows)
	}
}

// TestAlignMarkerIsNoFault: a reference line (KindAlign) is drawn on every
// chart, but the fault schedule does not list it: a page whose only
// markers are reference lines says no fault was injected. DurationLabel
// names the header's duration.
func TestAlignMarkerIsNoFault(t *testing.T) {
	r := sample()
	r.Markers = []Marker{{T: 40, Label: "alignment point of every run", Kind: KindAlign}}
	r.DurationLabel = "Runs' time, summed"
	out, doc := render(t, r)
	for ci, svg := range findAll(doc, elem("svg")) {
		gs := findAll(svg, elem("g", "marker"))
		if len(gs) != 1 || !strings.Contains(attr(gs[0], "class"), KindAlign) ||
			attr(findAll(gs[0], elem("line", "marker-line"))[0], "stroke") != "#7f7f7f" {
			t.Fatalf("chart %d: want the one grey alignment line, got %d markers", ci, len(gs))
		}
	}
	if len(findAll(doc, elem("table", "faults"))) != 0 || !strings.Contains(out, "no faults injected") {
		t.Fatal("the fault schedule lists a reference line")
	}
	if !strings.Contains(out, "<th>Runs&#39; time, summed</th>") || strings.Contains(out, "<th>Duration</th>") {
		t.Fatal("the duration label is not used")
	}
	r.Markers = append(r.Markers, Marker{T: 10, Label: "inject down(kafka)", Kind: KindInject})
	if _, doc := render(t, r); len(findAll(findAll(doc, elem("table", "faults"))[0], elem("tr", "mk-inject"))) != 1 {
		t.Fatal("a fault beside a reference line is not listed")
	}
}

// TestNotMadeFindingIsNotZero: a finding the checker could not judge shows
// "not made" in its count column, never a 0 that reads as "none found".
func TestNotMadeFindingIsNotZero(t *testing.T) {
	r := sample()
	r.Findings = append(r.Findings, Finding{Name: "history-lost", NotMade: true, Examples: []string{"NOT MADE: no history witness"}})
	html, doc := render(t, r)
	var row string
	for _, tr := range findAll(doc, elem("tr")) {
		if tds := findAll(tr, elem("td")); len(tds) > 1 && text(tds[0]) == "history-lost" {
			row = text(tds[1])
		}
	}
	if row != "not made" {
		t.Fatalf("history-lost's count cell %q, want \"not made\"\n%s", row, html)
	}
}
