package report

import (
	"cmp"
	"fmt"
	"html/template"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// page is what the template renders: every number already formatted,
// every piece of text still raw (the template escapes it).
type page struct {
	Title        string
	Scenario     string
	Description  string
	Passed       bool
	StartedAt    string
	Duration     string
	DurationName string
	Backends     string
	Verdict      string
	VerdictClass string
	Load         *loadView
	// FindingsLine sums up the non-zero findings for the header ("" with
	// no findings given).
	FindingsLine  string
	FindingsClass string
	Settings      [][2]string
	Checks        []Check
	ChecksPassed  int
	Findings      []findingView
	Markers       []markerRow
	Charts        []chartView
	Tables        []tableView
	Notes         []string
	Latencies     []latencyView
	Glossary      []glossView
	// MarkerNotes name, under their numbered tags, the markers that had
	// no room above the plots for their label: every chart shares the
	// time axis and the markers, so they are listed once, above the
	// charts.
	MarkerNotes []markerNote
}

// loadView is the header's load verdict: Class colours the badge.
type loadView struct {
	Label, Class, Detail, Cause string
}

// glossView explains one design-document name the page shows.
type glossView struct{ Term, Means string }

// latencyView is one whole-run latency row of the header: Figures is
// "unknown" when nothing was measured.
type latencyView struct {
	Name    string
	Figures string
	Detail  string
	Unknown bool
}

type tableView struct {
	Title  string
	Header []string
	Rows   [][]string
	More   int
}

type findingView struct {
	Name     string
	Count    uint64
	Examples []string
	More     int
	MsgIDs   []string
	MoreIDs  uint64 // messages counted but not listed
	Class    string
}

type markerRow struct {
	T     string
	Kind  string
	Label string
}

type chartView struct {
	ID         string
	Title      string
	Unit       string
	Width      int
	Height     int
	Left       string
	Right      string
	Top        string
	Bottom     string
	PlotW      string
	PlotH      string
	MidX       string
	MidY       string
	CaptionY   string
	XTicks     []tickView
	YTicks     []tickView
	Lines      []lineView
	Legend     []legendView
	Threshold  *thresholdView
	Markers    []markerLine
	NoData     bool
	XTickTextY string
	YTickTextX string
	TickEnd    string
}

type tickView struct {
	Pos   string // x of an x tick, y of a y tick
	Label string
}

// lineView is one series: a polyline per run of measured points between
// gaps, a dot for a point alone between gaps, an open circle at each end
// of the line next to a gap, and a shaded band over each gap.
type lineView struct {
	Name     string
	Color    string
	Segments []string
	Dots     []dotView
	Ends     []dotView
	Gaps     []gapView
}

type dotView struct{ CX, CY, Color string }

// gapView is a span without a measurement: from the last measured point
// before it to the first after it (or the gap's own time at an edge).
type gapView struct {
	X, W, Y, H string
	Color      string
	Title      string
}

type legendView struct {
	Name    string
	Swatch  template.CSS
	Summary string
	Empty   bool
}

type thresholdView struct {
	X1, X2, Y string
	TextX     string
	TextY     string
	Label     string
	Title     string
	OffScale  bool
}

type markerLine struct {
	Kind   string
	X      string
	Y1, Y2 string
	TextX  string
	TextY  string
	Anchor string
	Stroke string
	Dash   string
	Width  string
	Title  string
	Short  string
	// Box is the opaque background under the text (its estimated extent,
	// padded): a marker line that passes the text row is hidden there,
	// never drawn across the letters. Empty for a marker without text.
	BoxX, BoxY, BoxW, BoxH string
}

// cleanChart is a chart whose points are all drawable.
type cleanChart struct {
	title     string
	unit      string
	series    []cleanSeries
	threshold float64
	thLabel   string
}

type cleanSeries struct {
	name   string
	points []Point   // at most MaxPoints
	gaps   []float64 // sorted, finite, at most MaxPoints
	max    float64   // over every finite point, before decimation
	last   float64
}

// buildPage validates r and turns it into the page model. It never
// modifies r.
func buildPage(r *Report) (*page, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: nil report", ErrInvalid)
	}
	if strings.TrimSpace(r.Title) == "" {
		return nil, fmt.Errorf("%w: title is empty", ErrInvalid)
	}
	if r.Duration < 0 {
		return nil, fmt.Errorf("%w: duration %s is negative", ErrInvalid, r.Duration)
	}
	if len(r.Charts) > MaxCharts {
		return nil, fmt.Errorf("%w: %d charts, at most %d (MaxCharts)", ErrInvalid, len(r.Charts), MaxCharts)
	}
	if len(r.Markers) > MaxMarkers {
		return nil, fmt.Errorf("%w: %d markers, at most %d (MaxMarkers)", ErrInvalid, len(r.Markers), MaxMarkers)
	}
	for i, m := range r.Markers {
		switch m.Kind {
		case KindInject, KindHeal, KindError, KindAlign:
		default:
			return nil, fmt.Errorf("%w: marker %d %q: kind %q, want %q, %q, %q or %q",
				ErrInvalid, i, m.Label, m.Kind, KindInject, KindHeal, KindError, KindAlign)
		}
		if !finite(m.T) {
			return nil, fmt.Errorf("%w: marker %d %q: T is %g", ErrInvalid, i, m.Label, m.T)
		}
	}
	latencies, err := latencyViews(r.Latencies)
	if err != nil {
		return nil, err
	}
	if len(r.Tables) > MaxTables {
		return nil, fmt.Errorf("%w: %d tables, at most %d (MaxTables)", ErrInvalid, len(r.Tables), MaxTables)
	}
	tables := make([]tableView, 0, len(r.Tables))
	for i, t := range r.Tables {
		if strings.TrimSpace(t.Title) == "" || len(t.Header) == 0 || len(t.Header) > MaxTableCols {
			return nil, fmt.Errorf("%w: table %d %q: want a title and 1..%d header cells (MaxTableCols), have %d",
				ErrInvalid, i+1, t.Title, MaxTableCols, len(t.Header))
		}
		for j, row := range t.Rows {
			if len(row) != len(t.Header) {
				return nil, fmt.Errorf("%w: table %d %q: row %d has %d cells, the header %d", ErrInvalid, i+1, t.Title, j+1, len(row), len(t.Header))
			}
		}
		n := min(len(t.Rows), MaxTableRows)
		rows := make([][]string, n)
		for j := range rows {
			rows[j] = slices.Clone(t.Rows[j])
		}
		tables = append(tables, tableView{Title: t.Title, Header: slices.Clone(t.Header), Rows: rows, More: len(t.Rows) - n})
	}
	markers := slices.Clone(r.Markers)
	slices.SortStableFunc(markers, func(a, b Marker) int { return cmp.Compare(a.T, b.T) })

	var notes []string
	charts := make([]cleanChart, 0, len(r.Charts))
	for ci := range r.Charts {
		c, n, err := cleanChartOf(ci, &r.Charts[ci])
		if err != nil {
			return nil, err
		}
		charts = append(charts, c)
		notes = append(notes, n...)
	}

	p := &page{
		Title:        r.Title,
		Scenario:     r.Scenario,
		Description:  r.Description,
		Passed:       r.Passed,
		Duration:     r.Duration.Round(time.Millisecond).String(),
		DurationName: cmp.Or(r.DurationLabel, "Duration"),
		Backends:     r.Backends,
		Verdict:      r.Verdict,
		VerdictClass: verdictClass(r.Verdict),
		Settings:     slices.Clone(r.Settings),
		Checks:       slices.Clone(r.Checks),
		Tables:       tables,
		Notes:        append(slices.Clone(r.Notes), notes...),
		Latencies:    latencies,
	}
	p.Glossary = glossary(r)
	if !r.StartedAt.IsZero() {
		p.StartedAt = r.StartedAt.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	for _, c := range r.Checks {
		if c.OK {
			p.ChecksPassed++
		}
	}
	p.Load = loadViewOf(r.Load)
	p.FindingsLine, p.FindingsClass = findingsLine(r.Findings)
	for _, f := range r.Findings {
		fv := findingView{Name: f.Name, Count: f.Count, Class: findingClass(lastWord(f.Name), f.Count)}
		fv.Examples = slices.Clone(f.Examples[:min(len(f.Examples), MaxExamples)])
		fv.More = len(f.Examples) - len(fv.Examples)
		for _, id := range f.MsgIDs[:min(len(f.MsgIDs), MaxExamples)] {
			fv.MsgIDs = append(fv.MsgIDs, strconv.FormatUint(id, 10))
		}
		if n := uint64(len(fv.MsgIDs)); len(f.MsgIDs) > 0 {
			fv.MoreIDs = max(f.Count, uint64(len(f.MsgIDs))) - n
		}
		p.Findings = append(p.Findings, fv)
	}
	for _, m := range markers {
		if m.Kind == KindAlign {
			continue // a reference line, not an event of the run
		}
		p.Markers = append(p.Markers, markerRow{T: formatValue(m.T) + " s", Kind: m.Kind, Label: m.Label})
	}
	// One time axis for every chart, so that a moment lines up across them.
	tlo, thi := 0.0, 0.0
	for _, c := range charts {
		for _, s := range c.series {
			for _, pt := range s.points {
				tlo, thi = math.Min(tlo, pt.T), math.Max(thi, pt.T)
			}
		}
	}
	for _, c := range charts {
		for _, s := range c.series {
			for _, g := range s.gaps {
				tlo, thi = math.Min(tlo, g), math.Max(thi, g)
			}
		}
	}
	for _, m := range markers {
		tlo, thi = math.Min(tlo, m.T), math.Max(thi, m.T)
	}
	for ci, c := range charts {
		cv, notes, err := drawChart(ci, c, markers, tlo, thi)
		if err != nil {
			return nil, err
		}
		if ci == 0 {
			p.MarkerNotes = notes // the same on every chart: one axis, one set of markers
		}
		p.Charts = append(p.Charts, cv)
	}
	return p, nil
}

// loadViewOf is the header's load verdict (nil: none).
func loadViewOf(l *LoadVerdict) *loadView {
	if l == nil {
		return nil
	}
	v := &loadView{Label: cmp.Or(strings.TrimSpace(l.Label), "load"), Class: "within", Detail: l.Detail, Cause: l.Cause}
	if l.Overloaded {
		v.Class = "overloaded"
	}
	return v
}

// findingsLine sums up the non-zero findings ("none" when every finding
// given is 0, "" when none is given) and their class: bad when a deciding
// one is among them.
func findingsLine(fs []Finding) (string, string) {
	if len(fs) == 0 {
		return "", ""
	}
	var parts []string
	class := ""
	for _, f := range fs {
		if f.Count == 0 {
			continue
		}
		parts = append(parts, f.Name+" "+strconv.FormatUint(f.Count, 10))
		if findingClass(lastWord(f.Name), f.Count) == "bad" {
			class = "bad"
		}
	}
	if len(parts) == 0 {
		return "none", ""
	}
	return strings.Join(parts, " · ") + " (msg_ids in the Verdict section below)", class
}

// lastWord is a finding's own name in a label such as "#2 run: lost" (a
// page of several runs names each run's findings so).
func lastWord(name string) string {
	if i := strings.LastIndexAny(name, " :"); i >= 0 {
		return name[i+1:]
	}
	return name
}

// seedRE finds design-document names in page text: "seed 003", "seeds
// 000/003", "seed 000, 003 and 004".
var seedRE = regexp.MustCompile(`(?i)\bseeds?\s+00[034]\b(?:\s*(?:/|,|&|and|or)\s*00[034]\b)*`)

// designDoc says in words what the design document named "seed n" is
// ("" for a number that names none).
func designDoc(n string) string {
	switch n {
	case "000":
		return "the design document on offline messages: the inbox table, per-user seq, pull by cursor, per-device sync cursor, the Redis hot layer and its failure table"
	case "003":
		return "the design document on the message queue: store before deliver, the outbox and its relay, idempotent consumers, per-conversation order, backlog and dead letters, lag as the age of the oldest unprocessed message, reconciliation"
	case "004":
		return "the design document on the MongoDB history: buckets of 100 messages per conversation, position addressing, update-then-insert writes, read-time projection, delete semantics, tombstones for holes"
	}
	return ""
}

// glossary explains every design-document name ("seed 000", "seed 003",
// "seed 004": the specification the lab is built from, which the page's
// reader may not have) that appears anywhere in r's text, in number order.
func glossary(r *Report) []glossView {
	var texts []string
	add := func(ss ...string) { texts = append(texts, ss...) }
	add(r.Title, r.Scenario, r.Description, r.DurationLabel, r.Backends, r.Verdict)
	add(r.Notes...)
	for _, kv := range r.Settings {
		add(kv[0], kv[1])
	}
	for _, c := range r.Checks {
		add(c.Name, c.Want, c.Got)
	}
	for _, f := range r.Findings {
		add(f.Name)
		add(f.Examples...)
	}
	for _, m := range r.Markers {
		add(m.Label)
	}
	for _, c := range r.Charts {
		add(c.Title, c.Unit, c.ThresholdLabel)
		for _, s := range c.Series {
			add(s.Name)
		}
	}
	for _, t := range r.Tables {
		add(t.Title)
		add(t.Header...)
		for _, row := range t.Rows {
			add(row...)
		}
	}
	for _, l := range r.Latencies {
		add(l.Name, l.Of, l.Means, l.Unknown)
	}
	seen := map[string]bool{}
	for _, t := range texts {
		for _, m := range seedRE.FindAllString(t, -1) {
			for _, n := range numRE.FindAllString(m, -1) {
				seen[n] = true
			}
		}
	}
	var out []glossView
	for _, n := range slices.Sorted(maps.Keys(seen)) {
		out = append(out, glossView{Term: "seed " + n, Means: designDoc(n)})
	}
	return out
}

// numRE is a design document's number inside a seedRE match.
var numRE = regexp.MustCompile(`00[034]`)

// latencyViews checks and formats the whole-run latencies: a name, at
// most MaxLatencies of them, no negative figure, and quantiles whenever
// something was counted. Nothing counted is "unknown", whatever figures
// came with it.
func latencyViews(ls []Latency) ([]latencyView, error) {
	if len(ls) > MaxLatencies {
		return nil, fmt.Errorf("%w: %d latencies, at most %d (MaxLatencies)", ErrInvalid, len(ls), MaxLatencies)
	}
	out := make([]latencyView, 0, len(ls))
	for i, l := range ls {
		where := fmt.Sprintf("latency %d %q", i+1, l.Name)
		if strings.TrimSpace(l.Name) == "" {
			return nil, fmt.Errorf("%w: latency %d has no name", ErrInvalid, i+1)
		}
		if l.Count > 0 && len(l.Quantiles) == 0 {
			return nil, fmt.Errorf("%w: %s: %d counted but no quantile given", ErrInvalid, where, l.Count)
		}
		figs := make([]string, 0, len(l.Quantiles))
		for _, q := range l.Quantiles {
			if q.Value < 0 || strings.TrimSpace(q.Name) == "" {
				return nil, fmt.Errorf("%w: %s: quantile %q is %s: want a name and a value >= 0", ErrInvalid, where, q.Name, q.Value)
			}
			figs = append(figs, q.Name+" "+formatDuration(q.Value))
		}
		of := cmp.Or(strings.TrimSpace(l.Of), "samples")
		lv := latencyView{Name: l.Name}
		if l.Count == 0 {
			lv.Figures, lv.Unknown = "unknown", true
			lv.Detail = "nothing measured (0 " + of + ")"
			if l.Unknown != "" {
				lv.Detail += ": " + l.Unknown
			}
		} else {
			lv.Figures = strings.Join(figs, " · ")
			lv.Detail = "over " + strconv.FormatUint(l.Count, 10) + " " + of
			if l.Means != "" {
				lv.Detail += "; " + l.Means
			}
		}
		out = append(out, lv)
	}
	return out, nil
}

// formatDuration prints a latency in µs below 1 ms, in ms below 10 s,
// else in s, with formatValue's precision.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return formatValue(float64(d)/float64(time.Microsecond)) + " µs"
	case d < 10*time.Second:
		return formatValue(float64(d)/float64(time.Millisecond)) + " ms"
	default:
		return formatValue(d.Seconds()) + " s"
	}
}

// cleanChartOf checks one chart's limits and order, drops non-finite points
// and decimates long series; the notes say what was dropped or decimated.
func cleanChartOf(ci int, c *Chart) (cleanChart, []string, error) {
	where := fmt.Sprintf("chart %d %q", ci+1, c.Title)
	if len(c.Series) > MaxSeries {
		return cleanChart{}, nil, fmt.Errorf("%w: %s: %d series, at most %d (MaxSeries)", ErrInvalid, where, len(c.Series), MaxSeries)
	}
	if !finite(c.Threshold) {
		return cleanChart{}, nil, fmt.Errorf("%w: %s: threshold is %g", ErrInvalid, where, c.Threshold)
	}
	out := cleanChart{title: c.Title, unit: c.Unit, threshold: c.Threshold, thLabel: c.ThresholdLabel}
	var notes []string
	for si := range c.Series {
		s := &c.Series[si]
		sw := fmt.Sprintf("%s, series %d %q", where, si+1, s.Name)
		pts := make([]Point, 0, len(s.Points))
		dropped, lastIdx := 0, -1
		cs := cleanSeries{name: s.Name, max: math.Inf(-1)}
		for i, pt := range s.Points {
			if !finite(pt.T) || !finite(pt.V) {
				dropped++
				continue
			}
			if len(pts) > 0 && pt.T < pts[len(pts)-1].T {
				return cleanChart{}, nil, fmt.Errorf("%w: %s: point %d has T=%g, before T=%g of point %d: points must be in non-decreasing T",
					ErrInvalid, sw, i, pt.T, pts[len(pts)-1].T, lastIdx)
			}
			pts = append(pts, pt)
			lastIdx = i
			cs.max = math.Max(cs.max, pt.V)
			cs.last = pt.V
		}
		if dropped > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d of %d points dropped (NaN or infinite)", sw, dropped, len(s.Points)))
		}
		if len(pts) > MaxPoints {
			notes = append(notes, fmt.Sprintf("%s: %d points decimated evenly to %d (MaxPoints)", sw, len(pts), MaxPoints))
			pts = decimate(pts, MaxPoints)
		}
		cs.points = pts
		if len(s.Gaps) > MaxPoints {
			return cleanChart{}, nil, fmt.Errorf("%w: %s: %d gaps, at most %d (MaxPoints)", ErrInvalid, sw, len(s.Gaps), MaxPoints)
		}
		for _, g := range s.Gaps {
			if finite(g) {
				cs.gaps = append(cs.gaps, g)
			}
		}
		slices.Sort(cs.gaps)
		out.series = append(out.series, cs)
	}
	return out, notes, nil
}

// decimate keeps limit points of pts, evenly spaced by index, the first and
// the last included. limit must be at least 2.
func decimate(pts []Point, limit int) []Point {
	n := len(pts)
	if n <= limit {
		return pts
	}
	out := make([]Point, limit)
	for i := range out {
		out[i] = pts[i*(n-1)/(limit-1)]
	}
	return out
}

// drawChart lays one chart out on the page's shared time axis [tmin, tmax]
// (it covers every chart's points and every marker, so a moment lines up
// across charts): a value axis from 0 (or below) to the largest point or
// threshold, one polyline per non-empty series, the threshold line and one
// vertical line per marker.
func drawChart(ci int, c cleanChart, markers []Marker, tmin, tmax float64) (chartView, []markerNote, error) {
	where := fmt.Sprintf("chart %d %q", ci+1, c.title)
	vmin, vmax := 0.0, 0.0
	points := 0
	for _, s := range c.series {
		for _, pt := range s.points {
			vmin, vmax = math.Min(vmin, pt.V), math.Max(vmax, pt.V)
		}
		points += len(s.points)
	}
	offScale := c.threshold > 0 && points > 0 && c.threshold > OffScaleFactor*vmax && vmax > 0
	if c.threshold > 0 && !offScale {
		vmax = math.Max(vmax, c.threshold)
	}
	ax, err := niceAxis(tmin, tmax, xTickTarget)
	if err != nil {
		return chartView{}, nil, fmt.Errorf("%s: time axis: %w", where, err)
	}
	ay, err := niceAxis(vmin, vmax, yTickTarget)
	if err != nil {
		return chartView{}, nil, fmt.Errorf("%s: value axis: %w", where, err)
	}

	title := c.title
	if strings.TrimSpace(title) == "" {
		title = "chart " + strconv.Itoa(ci+1)
	}
	cv := chartView{
		ID:         "chart-" + strconv.Itoa(ci+1),
		Title:      title,
		Unit:       c.unit,
		Width:      svgWidth,
		Height:     svgHeight,
		Left:       coord(plotLeft),
		Right:      coord(plotRight),
		Top:        coord(plotTop),
		Bottom:     coord(plotBottom),
		PlotW:      coord(plotRight - plotLeft),
		PlotH:      coord(plotBottom - plotTop),
		MidX:       coord((plotLeft + plotRight) / 2),
		MidY:       coord((plotTop + plotBottom) / 2),
		CaptionY:   coord(plotBottom + 32),
		XTickTextY: coord(plotBottom + 16),
		YTickTextX: coord(plotLeft - 6),
		TickEnd:    coord(plotBottom + 4),
		NoData:     points == 0,
	}
	for _, v := range ax.ticks() {
		cv.XTicks = append(cv.XTicks, tickView{Pos: coord(xPos(ax, v)), Label: ax.label(v)})
	}
	for _, v := range ay.ticks() {
		cv.YTicks = append(cv.YTicks, tickView{Pos: coord(yPos(ay, v)), Label: ay.label(v)})
	}
	for si, s := range c.series {
		name := s.name
		if strings.TrimSpace(name) == "" {
			name = "series " + strconv.Itoa(si+1)
		}
		color := seriesColor(si)
		lv := legendView{Name: name, Swatch: template.CSS("background-color:" + color)}
		gapNote := ""
		if n := len(s.gaps); n > 0 {
			gapNote = "; " + strconv.Itoa(n) + " without a measurement (gaps, shaded: the line is not drawn through them)"
		}
		if len(s.points) == 0 {
			lv.Empty, lv.Summary = true, "no data"+gapNote
			cv.Legend = append(cv.Legend, lv)
			continue
		}
		lv.Summary = "max " + withUnit(s.max, c.unit) + ", last " + withUnit(s.last, c.unit) + gapNote
		cv.Legend = append(cv.Legend, lv)
		cv.Lines = append(cv.Lines, drawSeries(ax, ay, name, color, s))
	}
	if c.threshold > 0 {
		label := c.thLabel
		if strings.TrimSpace(label) == "" {
			label = "threshold"
		}
		label += " (" + withUnit(c.threshold, c.unit) + ")"
		title := label
		y := yPos(ay, c.threshold)
		if offScale {
			// Above the axis: a marker at the top edge, not to scale.
			y = plotTop
			label = "↑ " + label + ", off scale"
			title = label + ": the axis is scaled to the data, whose largest point is " + withUnit(vmax, c.unit)
		}
		cv.Threshold = &thresholdView{
			X1: coord(plotLeft), X2: coord(plotRight), Y: coord(y),
			TextX: coord(plotRight - 4), TextY: coord(y + 12),
			Label: label, Title: title, OffScale: offScale,
		}
		if offScale {
			// A short stub at the top right, not a line across the plot that
			// would read as a threshold at the axis' top value.
			cv.Threshold.X1 = coord(plotRight - 24)
			cv.Threshold.TextX = coord(plotRight - 28)
			cv.Threshold.TextY = coord(float64(plotTop) + 4)
		} else if y-4 > plotTop+12 {
			cv.Threshold.TextY = coord(y - 4)
		}
	}
	var notes []markerNote
	cv.Markers, notes = drawMarkers(ax, markers)
	return cv, notes, nil
}

// drawSeries draws one series: its points split at its gaps into runs,
// each a polyline (a dot when alone), an open circle where a run ends at
// a gap, and a shaded band over each gap from the last point before it to
// the first after it.
func drawSeries(ax, ay axis, name, color string, s cleanSeries) lineView {
	line := lineView{Name: name, Color: color}
	dot := func(p Point) dotView {
		return dotView{CX: coord(xPos(ax, p.T)), CY: coord(yPos(ay, p.V)), Color: color}
	}
	pts, gaps := s.points, s.gaps
	gi := 0
	for gi < len(gaps) && gaps[gi] < pts[0].T {
		gi++
	}
	leading := gi > 0
	start := 0
	flush := func(end int, gapAfter bool) {
		run := pts[start:end]
		switch len(run) {
		case 0:
			return
		case 1:
			line.Dots = append(line.Dots, dot(run[0]))
		default:
			line.Segments = append(line.Segments, polylinePoints(ax, ay, run))
		}
		if start > 0 || leading {
			line.Ends = append(line.Ends, dot(run[0]))
		}
		if gapAfter && len(run) > 1 {
			line.Ends = append(line.Ends, dot(run[len(run)-1]))
		}
	}
	if leading {
		line.Gaps = append(line.Gaps, gapBand(ax, gaps[0], pts[0].T, gaps[:gi], color))
	}
	for i := 1; i < len(pts); i++ {
		j := gi
		for j < len(gaps) && gaps[j] < pts[i].T {
			j++
		}
		if j > gi && gaps[j-1] > pts[i-1].T {
			// A gap between points i-1 and i: the line breaks.
			flush(i, true)
			line.Gaps = append(line.Gaps, gapBand(ax, pts[i-1].T, pts[i].T, gaps[gi:j], color))
			start = i
		}
		gi = j
	}
	flush(len(pts), false)
	if gi < len(gaps) {
		line.Gaps = append(line.Gaps, gapBand(ax, pts[len(pts)-1].T, gaps[len(gaps)-1], gaps[gi:], color))
	}
	return line
}

// gapBand shades [from, to] on the time axis for the gaps in it.
func gapBand(ax axis, from, to float64, gaps []float64, color string) gapView {
	x1, x2 := xPos(ax, from), xPos(ax, to)
	if x2-x1 < 3 {
		x1, x2 = x1-1.5, x2+1.5
	}
	ts := make([]string, 0, min(len(gaps), 8))
	for _, g := range gaps[:min(len(gaps), 8)] {
		ts = append(ts, formatValue(g))
	}
	title := "no measurement at t=" + strings.Join(ts, ", ") + " s"
	if len(gaps) > 8 {
		title += " (+" + strconv.Itoa(len(gaps)-8) + " more)"
	}
	return gapView{X: coord(x1), W: coord(x2 - x1), Y: coord(plotTop), H: coord(plotBottom - plotTop), Color: color, Title: title}
}

// drawMarkers draws one vertical line per marker with its text in the top
// margin (see markerLayout) and the footnotes of the markers that had no
// room for their label or kind.
func drawMarkers(ax axis, markers []Marker) ([]markerLine, []markerNote) {
	layout := newMarkerLayout(len(markers))
	full := make([]string, len(markers))
	for i, m := range markers {
		x := xPos(ax, m.T)
		short := shorten(m.Label, MaxMarkerLabelRunes)
		if short == "" {
			short = m.Kind
		}
		full[i] = shorten(m.Label, MaxMarkerLabelWideRunes)
		layout.add(x, x > plotRight-markerFlipRoom, short, m.Kind)
	}
	layout.widen(full, 0, svgWidth)
	texts, notes := layout.finish()
	lines := make([]markerLine, 0, len(markers))
	for i, m := range markers {
		s := layout.slots[i]
		stroke, dash, width := markerStyle(m.Kind)
		textY := float64(plotTop) - 6 - float64(markerLabelRows-1-s.row)*markerRowHeight
		top := textY - 9
		if s.text == textShared {
			top = plotTop // no text of its own: a tag above names it
		}
		ml := markerLine{
			Kind: m.Kind, X: coord(s.x), Y1: coord(top), Y2: coord(plotBottom),
			TextX: coord(s.x + 3), TextY: coord(textY), Anchor: "start",
			Stroke: stroke, Dash: dash, Width: width,
			Title: "t=" + formatValue(m.T) + " s " + m.Kind + ": " + m.Label,
			Short: texts[i],
		}
		if s.flip {
			ml.TextX, ml.Anchor = coord(s.x-3), "end"
		}
		if n := utf8.RuneCountInString(texts[i]); n > 0 {
			w := float64(n)*markerCharWidth + 2*boxPad
			x := s.x + 3 - boxPad
			if s.flip {
				x = s.x - 3 - w + boxPad
			}
			ml.BoxX, ml.BoxY, ml.BoxW, ml.BoxH = coord(x), coord(textY-10), coord(w), coord(markerRowHeight+1)
		}
		lines = append(lines, ml)
	}
	out := make([]markerNote, 0, len(notes))
	for _, slots := range notes {
		n := markerNote{Tag: texts[slots[0]], Kind: markers[slots[0]].Kind}
		for _, i := range slots {
			n.Items = append(n.Items, markerNoteItem{Kind: markers[i].Kind, Text: markerName(markers[i])})
		}
		out = append(out, n)
	}
	return lines, out
}

// boxPad pads a marker text's background box on each side (user units).
const boxPad = 1.5

// shorten cuts s to at most n runes, ending in "…" when cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return string(runes[:n-1]) + "…"
}

// formatValue prints a figure with a precision that fits its size.
func formatValue(v float64) string {
	a := math.Abs(v)
	var s string
	switch {
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 0.001 || a == 0:
		s = strconv.FormatFloat(v, 'f', 3, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

func withUnit(v float64, unit string) string {
	if unit == "" {
		return formatValue(v)
	}
	return formatValue(v) + " " + unit
}

// verdictClass colours the checker's verdict.
func verdictClass(v string) string {
	switch {
	case strings.EqualFold(v, "VALID"):
		return "valid"
	case strings.EqualFold(v, "INVALID"):
		return "invalid"
	}
	return "unknown"
}

// findingClass highlights a non-zero finding: the anomalies that make a
// run invalid (the checker's deciding findings) as bad, the tolerated one
// (duplicated) as a warning.
func findingClass(name string, count uint64) string {
	if count == 0 {
		return ""
	}
	switch name {
	case "lost", "unexpected", "skipped", "reordered", "lost-in-store", "unstored-at-ack", "double-stored", "seq-conflict", "ack-mismatch":
		return "bad"
	case "duplicated":
		return "warn"
	}
	return ""
}
