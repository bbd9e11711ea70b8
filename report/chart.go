package report

import (
	"cmp"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

type markerRow struct {
	T     string
	Kind  string
	Label string
}

type chartView struct {
	ID        string
	Title     string
	Unit      string
	Width     int
	Height    int
	Left      string
	Right     string
	Top       string
	Bottom    string
	PlotW     string
	PlotH     string
	MidX      string
	MidY      string
	CaptionY  string
	XCaption  string
	XTicks    []tickView
	YTicks    []tickView
	Lines     []lineView
	Legend    []legendView
	Threshold *thresholdView
	Markers   []markerLine
	NoData    bool
	// MarkNotes name the chart's own marks that had no room for their
	// label (a chart with its own x axis); Hollow says what an open point
	// means.
	MarkNotes  []markerNote
	Hollow     string
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
	Points   []pointView
}

type dotView struct{ CX, CY, Color string }

// pointView is one point of a series that shows its points (Series.Dots):
// filled, or open (Fill white) when Hollow.
type pointView struct {
	CX, CY, Color, Fill, Title string
	Hollow                     bool
}

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
	// Note says, under the plot, what an off-scale threshold's stub
	// stands for: its label drawn inside the plot lay over the data's
	// top points.
	Note string
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
	xaxis     *XAxis // nil: the page's time axis
	marks     []Mark // sorted by X
	hollow    string
}

type cleanSeries struct {
	name   string
	dots   bool
	slot   int
	points []Point   // at most MaxPoints
	gaps   []float64 // sorted, finite, at most MaxPoints
	max    float64   // over every finite point, before decimation
	last   float64
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
	out := cleanChart{title: c.Title, unit: c.Unit, threshold: c.Threshold, thLabel: c.ThresholdLabel, hollow: c.Hollow}
	marks, err := cleanMarks(where, c)
	if err != nil {
		return cleanChart{}, nil, err
	}
	out.marks = marks
	if c.XAxis != nil {
		ax := *c.XAxis
		out.xaxis = &ax
	}
	var notes []string
	for si := range c.Series {
		s := &c.Series[si]
		sw := fmt.Sprintf("%s, series %d %q", where, si+1, s.Name)
		pts := make([]Point, 0, len(s.Points))
		dropped, lastIdx := 0, -1
		cs := cleanSeries{name: s.Name, dots: s.Dots, slot: s.Slot, max: math.Inf(-1)}
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

// cleanMarks checks a chart's own x axis and marks: marks only on an own
// axis, which has a label; at most MaxMarkers, each at a finite X. It
// returns them sorted by X.
func cleanMarks(where string, c *Chart) ([]Mark, error) {
	if c.XAxis == nil {
		if len(c.Marks) > 0 {
			return nil, fmt.Errorf("%w: %s: %d marks without an x axis of its own (XAxis): marks are values on it", ErrInvalid, where, len(c.Marks))
		}
		return nil, nil
	}
	if strings.TrimSpace(c.XAxis.Label) == "" {
		return nil, fmt.Errorf("%w: %s: x axis label is empty", ErrInvalid, where)
	}
	if len(c.Marks) > MaxMarkers {
		return nil, fmt.Errorf("%w: %s: %d marks, at most %d (MaxMarkers)", ErrInvalid, where, len(c.Marks), MaxMarkers)
	}
	for i, m := range c.Marks {
		if !finite(m.X) {
			return nil, fmt.Errorf("%w: %s: mark %d %q: X is %g", ErrInvalid, where, i, m.Label, m.X)
		}
	}
	marks := slices.Clone(c.Marks)
	slices.SortStableFunc(marks, func(a, b Mark) int { return cmp.Compare(a.X, b.X) })
	return marks, nil
}

// xNames names values of a chart's x axis: the page's time (own nil) or
// the chart's own XAxis.
type xNames struct {
	own  *XAxis
	time string // the page's time axis caption ("": time since start)
}

// caption is the axis' caption under the plot.
func (n xNames) caption() string {
	switch {
	case n.own == nil && n.time != "":
		return n.time + " (s)"
	case n.own == nil:
		return "time since start (s)"
	case n.own.Unit == "":
		return n.own.Label
	default:
		return n.own.Label + " (" + n.own.Unit + ")"
	}
}

// at names values on the axis: "t=1, 2 s", "offered rate 5, 10 sends/s".
func (n xNames) at(vs ...string) string {
	j := strings.Join(vs, ", ")
	if n.own == nil {
		return "t=" + j + " s"
	}
	return strings.TrimSpace(n.own.Label + " " + j + " " + n.own.Unit)
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
//
// A chart with its own x axis is laid out on it instead, over its points,
// gaps and marks (ownSpan: near the smallest, not from 0), with its marks
// for markers.
func drawChart(ci int, c cleanChart, markers []Marker, tmin, tmax float64, timeAxis string) (chartView, []markerNote, error) {
	xn := xNames{own: c.xaxis, time: timeAxis}
	if c.xaxis != nil {
		tmin, tmax = c.ownSpan()
		markers = make([]Marker, 0, len(c.marks))
		for _, m := range c.marks {
			markers = append(markers, Marker{T: m.X, Label: m.Label, Kind: kindMark})
		}
	}
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
		return chartView{}, nil, fmt.Errorf("%s: x axis (%s): %w", where, xn.caption(), err)
	}
	if countUnit(c.unit) && vmin >= 0 {
		// A count has no half: a small one gets whole ticks (0..5), not 0.5
		// records.
		vmax = math.Max(vmax, yTickTarget)
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
		XCaption:   xn.caption(),
		Hollow:     c.hollowShown(),
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
	cv.Legend, cv.Lines = drawLegend(ax, ay, xn, c)
	if c.threshold > 0 {
		cv.Threshold = drawThreshold(ay, c, offScale, vmax)
	}
	var notes []markerNote
	cv.Markers, notes = drawMarkers(ax, xn, markers)
	if c.xaxis != nil {
		cv.MarkNotes, notes = notes, nil // the chart's own, not the page's
	}
	return cv, notes, nil
}

// hollowShown is what an open point means, said under the legend only
// when the chart has an open point ("" otherwise).
func (c cleanChart) hollowShown() string {
	for _, s := range c.series {
		for _, p := range s.points {
			if p.Hollow {
				return c.hollow
			}
		}
	}
	return ""
}

// drawLegend draws the chart's series: one legend entry each (its max and
// last value, its gaps) and one line each that has points.
func drawLegend(ax, ay axis, xn xNames, c cleanChart) ([]legendView, []lineView) {
	var legend []legendView
	var lines []lineView
	for si, s := range c.series {
		name := s.name
		if strings.TrimSpace(name) == "" {
			name = "series " + strconv.Itoa(si+1)
		}
		color := seriesColor(si)
		if s.slot > 0 {
			color = seriesColor(s.slot - 1)
		}
		lv := legendView{Name: name, Swatch: template.CSS("background-color:" + color)}
		gapNote := ""
		if n := len(s.gaps); n > 0 {
			gapNote = "; " + strconv.Itoa(n) + " without a measurement (gaps, shaded: the line is not drawn through them)"
		}
		if len(s.points) == 0 {
			lv.Empty, lv.Summary = true, "no data"+gapNote
			legend = append(legend, lv)
			continue
		}
		lv.Summary = "max " + withUnit(s.max, c.unit) + ", last " + withUnit(s.last, c.unit) + gapNote
		legend = append(legend, lv)
		line := drawSeries(ax, ay, xn, name, color, s)
		if s.dots {
			line.Points = drawPoints(ax, ay, xn, name, color, s, c)
		} else {
			line.Points = drawPoints(ax, ay, xn, name, color, openOnly(s), c)
		}
		lines = append(lines, line)
	}
	return legend, lines
}

// openOnly is the series with only its open (Hollow) points: a line
// without dots still marks those (e.g. a second whose percentiles rest
// on a handful of ACKs).
func openOnly(s cleanSeries) cleanSeries {
	out := s
	out.points = nil
	for _, p := range s.points {
		if p.Hollow {
			out.points = append(out.points, p)
		}
	}
	return out
}

// drawPoints draws every point of a series that shows its points: a
// circle, filled or (Hollow) open, titled with its values.
func drawPoints(ax, ay axis, xn xNames, name, color string, s cleanSeries, c cleanChart) []pointView {
	out := make([]pointView, 0, len(s.points))
	for _, p := range s.points {
		pv := pointView{CX: coord(xPos(ax, p.T)), CY: coord(yPos(ay, p.V)), Color: color, Fill: color,
			Title: name + " at " + xn.at(formatValue(p.T)) + ": " + withUnit(p.V, c.unit), Hollow: p.Hollow}
		if p.Hollow {
			pv.Fill = "#ffffff"
			pv.Title += " (open"
			if c.hollow != "" {
				pv.Title += ": " + c.hollow
			}
			pv.Title += ")"
		}
		out = append(out, pv)
	}
	return out
}

// drawThreshold draws the chart's threshold line, or, when it lies far
// above the data (offScale), a short stub at the top edge with no text:
// its label and value go in a note under the plot (Note), since any
// place inside the plot can hold the data's top points and the top
// margin holds the marks' labels.
func drawThreshold(ay axis, c cleanChart, offScale bool, vmax float64) *thresholdView {
	label := c.thLabel
	if strings.TrimSpace(label) == "" {
		label = "threshold"
	}
	label += " (" + withUnit(c.threshold, c.unit) + ")"
	y := yPos(ay, c.threshold)
	tv := &thresholdView{
		X1: coord(plotLeft), X2: coord(plotRight), Y: coord(y),
		TextX: coord(plotRight - 4), TextY: coord(y + 12),
		Label: label, Title: label,
	}
	switch {
	case offScale:
		// A short stub at the top right, not a line across the plot that
		// would read as a threshold at the axis' top value.
		note := "↑ " + label + " is off scale: above the value axis, which is scaled to the data, whose largest point is " + withUnit(vmax, c.unit)
		tv.X1, tv.Y = coord(plotRight-24), coord(plotTop)
		tv.Label, tv.Title, tv.Note, tv.OffScale = "", note, note, true
	case y-4 > plotTop+12:
		tv.TextY = coord(y - 4)
	}
	return tv
}

// drawSeries draws one series: its points split at its gaps into runs,
// each a polyline (a dot when alone), an open circle where a run ends at
// a gap, and a shaded band over each gap: from halfway between the last
// point before it and its first unmeasured time to halfway between its
// last and the first point after it (at an edge, as far beyond the gap as
// that half): for per-second points drawn at the middle of their second,
// exactly the seconds without a measurement. A series that shows its
// points (dots) has neither the lone dots nor the open circles: its
// points are drawn apart.
func drawSeries(ax, ay axis, xn xNames, name, color string, s cleanSeries) lineView {
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
			if !s.dots {
				line.Dots = append(line.Dots, dot(run[0]))
			}
		default:
			line.Segments = append(line.Segments, polylinePoints(ax, ay, run))
		}
		if s.dots {
			return
		}
		if start > 0 || leading {
			line.Ends = append(line.Ends, dot(run[0]))
		}
		if gapAfter && len(run) > 1 {
			line.Ends = append(line.Ends, dot(run[len(run)-1]))
		}
	}
	if leading {
		half := (pts[0].T - gaps[gi-1]) / 2
		line.Gaps = append(line.Gaps, gapBand(ax, ay, xn, gaps[0]-half, pts[0].T-half, gaps[:gi], color, pts[0].V))
	}
	for i := 1; i < len(pts); i++ {
		j := gi
		for j < len(gaps) && gaps[j] < pts[i].T {
			j++
		}
		if j > gi && gaps[j-1] > pts[i-1].T {
			// A gap between points i-1 and i: the line breaks.
			flush(i, true)
			from, to := (pts[i-1].T+gaps[gi])/2, (gaps[j-1]+pts[i].T)/2
			line.Gaps = append(line.Gaps, gapBand(ax, ay, xn, from, to, gaps[gi:j], color, pts[i-1].V, pts[i].V))
			start = i
		}
		gi = j
	}
	flush(len(pts), false)
	if gi < len(gaps) {
		last := pts[len(pts)-1]
		half := (gaps[gi] - last.T) / 2
		line.Gaps = append(line.Gaps, gapBand(ax, ay, xn, last.T+half, gaps[len(gaps)-1]+half, gaps[gi:], color, last.V))
	}
	return line
}

// gapBandPad is how far (px) a gap's band reaches above and below the
// values of the line on either side of it.
const gapBandPad = 12

// gapBand shades [from, to] on the time axis for the gaps in it, across
// the height of the line's values on either side of the gap (near), with
// gapBandPad beyond: on a chart of several lines one line's gap shades
// where that line runs, not the others'.
func gapBand(ax, ay axis, xn xNames, from, to float64, gaps []float64, color string, near ...float64) gapView {
	y1, y2 := float64(plotBottom), float64(plotTop)
	for _, v := range near {
		y := yPos(ay, v)
		y1, y2 = min(y1, y), max(y2, y)
	}
	y1, y2 = max(float64(plotTop), y1-gapBandPad), min(float64(plotBottom), y2+gapBandPad)
	x1, x2 := max(float64(plotLeft), xPos(ax, from)), min(float64(plotRight), xPos(ax, to))
	if x2-x1 < 3 {
		x1, x2 = x1-1.5, x2+1.5
	}
	ts := make([]string, 0, min(len(gaps), 8))
	for _, g := range gaps[:min(len(gaps), 8)] {
		ts = append(ts, formatValue(g))
	}
	title := "no measurement at " + xn.at(ts...)
	if len(gaps) > 8 {
		title += " (+" + strconv.Itoa(len(gaps)-8) + " more)"
	}
	return gapView{X: coord(x1), W: coord(x2 - x1), Y: coord(y1), H: coord(y2 - y1), Color: color, Title: title}
}

// drawMarkers draws one vertical line per marker with its text in the top
// margin (see markerLayout) and the footnotes of the markers that had no
// room for their label or kind.
func drawMarkers(ax axis, xn xNames, markers []Marker) ([]markerLine, []markerNote) {
	layout := newMarkerLayout(len(markers))
	full := make([]string, len(markers))
	rides := shortFaults(ax, markers)
	healed := make([]string, len(markers)) // what a short fault's inject says of its heal
	for j, i := range rides {
		if i >= 0 {
			healed[i] = healedSuffix(markers[i], markers[j])
		}
	}
	markers = slices.Clone(markers) // its title and footnote say it too
	for i := range markers {
		markers[i].Label += healed[i]
	}
	for i, m := range markers {
		x := xPos(ax, m.T)
		if rides[i] >= 0 {
			layout.ride(x, rides[i])
			continue
		}
		// A cut label keeps how long a short fault lasted.
		own := strings.TrimSuffix(m.Label, healed[i])
		short := shorten(own, MaxMarkerLabelRunes-utf8.RuneCountInString(healed[i])) + healed[i]
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
		if s.text == textShared || s.text == textRides {
			top = plotTop // no text of its own: a tag above names it
		}
		ml := markerLine{
			Kind: m.Kind, X: coord(s.x), Y1: coord(top), Y2: coord(plotBottom),
			TextX: coord(s.x + 3), TextY: coord(textY), Anchor: "start",
			Stroke: stroke, Dash: dash, Width: width,
			Title: xn.at(formatValue(m.T)) + " " + m.Kind + ": " + m.Label,
			Short: texts[i],
		}
		if m.Kind == kindMark {
			ml.Title = xn.at(formatValue(m.T)) + ": " + m.Label
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
			n.Items = append(n.Items, markerNoteItem{Kind: markers[i].Kind, Text: markerName(xn, markers[i])})
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

// countUnit tells whether a chart's values are counts of things (records,
// rows, messages a second), whose axis has no fractional ticks.
func countUnit(unit string) bool {
	switch unit {
	case "records", "rows", "msg/s", "messages":
		return true
	}
	return false
}
