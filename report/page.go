package report

import (
	"cmp"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// page is what the template renders: every number already formatted,
// every piece of text still raw (the template escapes it).
type page struct {
	Title        string
	Scenario     string
	Description  string
	Passed       bool
	Unmeasured   string
	StartedAt    string
	Duration     string
	DurationName string
	Backends     string
	Verdict      string
	VerdictClass string
	VerdictName  string
	Machine      string
	Style        template.CSS
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
	NoCharts      string
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
	Shown    string // the count as the page shows it ("not made" when it could not be judged)
	Examples []string
	More     int
	MsgIDs   []string
	MoreIDs  uint64 // messages counted but not listed
	Class    string
}

// buildPage validates r and turns it into the page model. It never
// modifies r.
func buildPage(r *Report) (*page, error) {
	if err := validateReport(r); err != nil {
		return nil, err
	}
	latencies, err := latencyViews(r.Latencies)
	if err != nil {
		return nil, err
	}
	tables, err := tableViews(r.Tables)
	if err != nil {
		return nil, err
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
		Unmeasured:   r.Unmeasured,
		Duration:     r.Duration.Round(time.Millisecond).String(),
		DurationName: cmp.Or(r.DurationLabel, "Duration"),
		Backends:     r.Backends,
		Verdict:      r.Verdict,
		VerdictClass: verdictClass(r.Verdict),
		VerdictName:  cmp.Or(r.VerdictLabel, "Safety verdict"),
		Style:        PageStyle(),
		Machine:      r.Machine,
		Settings:     slices.Clone(r.Settings),
		Checks:       slices.Clone(r.Checks),
		Tables:       tables,
		Notes:        append(slices.Clone(r.Notes), notes...),
		Latencies:    latencies,
		NoCharts:     cmp.Or(r.NoCharts, "no charts"),
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
		p.Findings = append(p.Findings, findingViewOf(f))
	}
	for _, m := range markers {
		if m.Kind == KindAlign {
			continue // a reference line, not an event of the run
		}
		// Every time to the millisecond, trailing zeros kept, so the
		// column reads alike (3.380 s beside 3.379 s, not 3.38 s).
		p.Markers = append(p.Markers, markerRow{T: strconv.FormatFloat(m.T, 'f', 3, 64) + " s", Kind: m.Kind, Label: m.Label})
	}
	p.Charts, p.MarkerNotes, err = drawCharts(charts, markers, r.TimeAxis)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// drawCharts draws the charts of one page: one time axis for every chart
// drawn on time, so that a moment lines up across them, with the page's
// markers (their footnotes, the same on every such chart, are returned
// once); a chart with an axis of its own is drawn on it with its marks.
func drawCharts(charts []cleanChart, markers []Marker, timeAxis string) ([]chartView, []markerNote, error) {
	tlo, thi := timeSpan(charts, markers)
	var views []chartView
	var pageNotes []markerNote
	noted := false
	for ci, c := range charts {
		cv, notes, err := drawChart(ci, c, markers, tlo, thi, timeAxis)
		if err != nil {
			return nil, nil, err
		}
		if !noted && c.xaxis == nil {
			pageNotes, noted = notes, true // one axis, one set of markers
		}
		views = append(views, cv)
	}
	return views, pageNotes, nil
}

// validateReport checks what the page needs of r before it is drawn: a
// title, a duration, the counts of charts and markers, each marker's
// kind and time.
func validateReport(r *Report) error {
	if r == nil {
		return fmt.Errorf("%w: nil report", ErrInvalid)
	}
	if strings.TrimSpace(r.Title) == "" {
		return fmt.Errorf("%w: title is empty", ErrInvalid)
	}
	if r.Duration < 0 {
		return fmt.Errorf("%w: duration %s is negative", ErrInvalid, r.Duration)
	}
	if len(r.Charts) > MaxCharts {
		return fmt.Errorf("%w: %d charts, at most %d (MaxCharts)", ErrInvalid, len(r.Charts), MaxCharts)
	}
	if len(r.Markers) > MaxMarkers {
		return fmt.Errorf("%w: %d markers, at most %d (MaxMarkers)", ErrInvalid, len(r.Markers), MaxMarkers)
	}
	for i, m := range r.Markers {
		switch m.Kind {
		case KindInject, KindHeal, KindError, KindAlign:
		default:
			return fmt.Errorf("%w: marker %d %q: kind %q, want %q, %q, %q or %q",
				ErrInvalid, i, m.Label, m.Kind, KindInject, KindHeal, KindError, KindAlign)
		}
		if !finite(m.T) {
			return fmt.Errorf("%w: marker %d %q: T is %g", ErrInvalid, i, m.Label, m.T)
		}
	}
	return nil
}

// tableViews checks the tables and copies them for the page, each cut to
// MaxTableRows rows.
func tableViews(ts []Table) ([]tableView, error) {
	if len(ts) > MaxTables {
		return nil, fmt.Errorf("%w: %d tables, at most %d (MaxTables)", ErrInvalid, len(ts), MaxTables)
	}
	tables := make([]tableView, 0, len(ts))
	for i, t := range ts {
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
	return tables, nil
}

// findingViewOf is one finding's row: its count (or "not made"), its
// examples and msg_ids cut to MaxExamples.
func findingViewOf(f Finding) findingView {
	fv := findingView{Name: f.Name, Count: f.Count, Shown: cmp.Or(f.Counted, strconv.FormatUint(f.Count, 10)), Class: findingClass(lastWord(f.Name), f.Count)}
	if f.NotMade {
		fv.Shown, fv.Class = "not made", "unknown"
	}
	fv.Examples = slices.Clone(f.Examples[:min(len(f.Examples), MaxExamples)])
	fv.More = len(f.Examples) - len(fv.Examples)
	for _, id := range f.MsgIDs[:min(len(f.MsgIDs), MaxExamples)] {
		fv.MsgIDs = append(fv.MsgIDs, strconv.FormatUint(id, 10))
	}
	if n := uint64(len(fv.MsgIDs)); len(f.MsgIDs) > 0 {
		fv.MoreIDs = moreIDs(f) - n
	}
	return fv
}

// moreIDs is how many msg_ids a finding concerns, listed or not: its
// Messages when recorded; else its Count where that counts messages, but
// never a count of copies (duplicated), for which only the listed ones are
// known.
func moreIDs(f Finding) uint64 {
	listed := uint64(len(f.MsgIDs))
	switch {
	case f.Messages > 0:
		return max(f.Messages, listed)
	case lastWord(f.Name) == "duplicated":
		return listed
	}
	return max(f.Count, listed)
}

// timeSpan is the one time axis of every chart drawn on it (not those
// with an axis of their own): from 0 (or earlier) to the last point, gap
// or marker.
func timeSpan(charts []cleanChart, markers []Marker) (lo, hi float64) {
	for _, c := range charts {
		if c.xaxis == nil {
			lo, hi = c.span(lo, hi)
		}
	}
	for _, m := range markers {
		lo, hi = math.Min(lo, m.T), math.Max(hi, m.T)
	}
	return lo, hi
}

// span widens [lo, hi] to every point and gap of c.
func (c cleanChart) span(lo, hi float64) (float64, float64) {
	for _, s := range c.series {
		for _, pt := range s.points {
			lo, hi = math.Min(lo, pt.T), math.Max(hi, pt.T)
		}
		for _, g := range s.gaps {
			lo, hi = math.Min(lo, g), math.Max(hi, g)
		}
	}
	return lo, hi
}

// ownSpan is the range of a chart's own x axis: its points, gaps and marks,
// widened by a twentieth of their span each side (never below 0 when all
// are at or above it), so the axis starts near the smallest x rather than
// at 0: rates of 200 to 400 fill the plot, not its right half. A chart
// with nothing on it spans [0, 0].
func (c cleanChart) ownSpan() (lo, hi float64) {
	lo, hi = c.span(math.Inf(1), math.Inf(-1))
	for _, m := range c.marks {
		lo, hi = math.Min(lo, m.X), math.Max(hi, m.X)
	}
	if lo > hi {
		return 0, 0
	}
	pad := (hi - lo) / 20
	if lo >= 0 {
		return max(lo-pad, 0), hi + pad
	}
	return lo - pad, hi + pad
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
		parts = append(parts, f.Name+" "+cmp.Or(f.Counted, strconv.FormatUint(f.Count, 10)))
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
			switch {
			case strings.TrimSpace(l.Of) == "" && l.Unknown != "": // no count to speak of
				lv.Detail = "not measured: " + l.Unknown
			case l.Unknown != "":
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
