package report

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io"
	"time"
)

// Limits of one report. Beyond MaxPoints a series is decimated; beyond the
// others WriteHTML refuses the report.
const (
	// MaxCharts is the number of charts one report may hold.
	MaxCharts = 32
	// MaxSeries is the number of series one chart may hold.
	MaxSeries = 64
	// MaxPoints is the number of points drawn per series; longer series
	// are decimated evenly (first and last point kept).
	MaxPoints = 20000
	// MaxMarkers is the number of markers (fault injections, heals,
	// errors) one report may hold; each is drawn on every chart.
	MaxMarkers = 500
	// MaxExamples is the number of examples shown per finding; the rest
	// are summarised as "+N more".
	MaxExamples = 20
	// MaxMarkerLabelRunes is the length of the small label drawn next to a
	// marker line; the full label is in the line's hover title, in the
	// fault schedule table and, for a marker drawn with a numbered tag, in
	// its chart's footnote.
	MaxMarkerLabelRunes = 32
	// MaxMarkerLabelWideRunes is the most of a label drawn where its row
	// has room beside its neighbours once every marker is placed.
	MaxMarkerLabelWideRunes = 96
	// MaxTables bounds the extra tables of a report, MaxTableRows the rows
	// of one (the rest are summarised as "+N more rows") and MaxTableCols
	// its columns.
	MaxTables    = 16
	MaxTableRows = 1000
	MaxTableCols = 16
	// MaxLatencies bounds the whole-run latencies of a report's header.
	MaxLatencies = 16
	// OffScaleFactor: a threshold above OffScaleFactor times the largest
	// point of its chart is marked at the top edge instead of stretching
	// the value axis.
	OffScaleFactor = 2.5
)

// Marker kinds.
const (
	KindInject = "inject"
	KindHeal   = "heal"
	KindError  = "error"
	// KindAlign is a reference line on the charts (e.g. the point several
	// runs are aligned at), not an event of the run: it is drawn, never
	// listed in the fault schedule.
	KindAlign = "align"
	// kindMark is a chart's own Mark on its XAxis.
	kindMark = "mark"
)

// ErrInvalid is wrapped by every error about a report that cannot be drawn.
var ErrInvalid = errors.New("invalid report")

// Point is one sample of a series.
type Point struct {
	T, V float64 // T: seconds since the run's start, or the value on the chart's own XAxis
	// Hollow draws the point as an open circle, e.g. a step that broke
	// the SLO; Chart.Hollow says what it means. A series without Dots
	// draws a circle at its open points only.
	Hollow bool `json:"hollow,omitempty"`
}

// Series is one line of a chart.
type Series struct {
	Name   string  `json:"name"` // legend, e.g. "ACK p99", "partition 3"
	Points []Point `json:"points"`
	// Gaps are the times at which the series has no measurement (a second
	// without an ACK has no ACK latency; a lag poll that failed has no
	// lag): the line is broken there, never drawn through, and the span
	// it would have crossed is shaded. At most MaxPoints; non-finite ones
	// are dropped.
	Gaps []float64 `json:"gaps,omitempty"`
	// Dots draws every point as a circle (filled, or open when Hollow)
	// besides the line through them; without it only open points are.
	Dots bool `json:"dots,omitempty"`
	// Slot, when > 0, picks the series' colour (the palette's Slot-th)
	// instead of its position's, so that one thing keeps one colour on
	// every page whatever else a chart holds.
	Slot int `json:"slot,omitempty"`
}

// Chart is one plot of the report.
type Chart struct {
	Title  string   `json:"title"` // "Consumer lag (age of oldest unprocessed message)"
	Unit   string   `json:"unit"`  // "s", "ms", "msg/s", "records"
	Series []Series `json:"series"`
	// Threshold, when > 0, is drawn as a dashed horizontal line labelled ThresholdLabel (e.g. the scenario's limit).
	// The value axis is scaled to the data: a threshold more than OffScaleFactor times above every point is not
	// drawn to scale but marked by a short stub at the plot's top edge, so it never flattens the curves; its label and
	// value go in a note under the plot, where no point of the data can lie under them.
	Threshold      float64 `json:"threshold,omitempty"`
	ThresholdLabel string  `json:"threshold_label,omitempty"`
	// XAxis, when set, gives the chart its own numeric x axis (a rate, a
	// size): Point.T and Series.Gaps are values on it, not times. Such a
	// chart is not aligned with the page's time axis and the page's
	// markers are not drawn on it; its Marks are.
	XAxis *XAxis `json:"x_axis,omitempty"`
	// Marks are labelled vertical lines at values of the chart's own XAxis
	// (e.g. the knee, the sustainable rate). At most MaxMarkers; only with
	// XAxis.
	Marks []Mark `json:"marks,omitempty"`
	// Hollow says what an open point means (e.g. "the step broke the
	// SLO"): it is shown under the legend and in each open point's title.
	Hollow string `json:"hollow,omitempty"`
}

// XAxis is a chart's own numeric x axis: its label and unit, drawn as its
// caption ("offered rate (sends/s)").
type XAxis struct {
	Label string `json:"label"` // "offered rate"
	Unit  string `json:"unit"`  // "sends/s"
}

// Mark is a labelled vertical line at X on a chart's own XAxis.
type Mark struct {
	X     float64 `json:"x"`
	Label string  `json:"label"` // "knee 120/s"
}

// Marker is a fault injection or heal, drawn as a vertical line on every chart.
type Marker struct {
	T     float64 `json:"t"`
	Label string  `json:"label"` // "inject latency(redis,50ms)"
	Kind  string  `json:"kind"`  // "inject" | "heal" | "error"
	// Fault names the fault an inject and its heal act on ("" when not
	// known): a heal closer to its inject than a few pixels is drawn
	// without text, the inject's text saying how long it lasted.
	Fault string `json:"fault,omitempty"`
}

// Check is one assertion of the scenario.
type Check struct {
	Name string `json:"name"` // "lost", "ack_p99"
	Want string `json:"want"` // "<= 0", "<= 2s"
	Got  string `json:"got"`
	OK   bool   `json:"ok"`
}

// Finding is one row of the checker's verdict table.
type Finding struct {
	Name     string   `json:"name"` // ok and the checker's findings: lost, duplicated, unexpected, recovered, reordered, skipped, lost-in-store, ...
	Count    uint64   `json:"count"`
	Examples []string `json:"examples,omitempty"` // device/seq descriptions in words
	// MsgIDs are the messages concerned (possibly only the first of
	// them); the first MaxExamples are listed after the examples.
	MsgIDs []uint64 `json:"msg_ids,omitempty"`
	// Messages is how many distinct msg_ids the finding concerns, when
	// known (0: not recorded). Count is not always that: duplicated counts
	// extra copies.
	Messages uint64 `json:"messages,omitempty"`
	// Counted, when set, is shown instead of the bare Count: the count
	// with what it counts where that is not messages ("4275 extra copies
	// of 3869 msg_ids").
	Counted string `json:"counted,omitempty"`
	// NotMade, when set, says the checker could not judge this finding:
	// its count says nothing and is shown as "not made", never as 0.
	NotMade bool `json:"not_made,omitempty"`
}

// LoadVerdict is a run's load beside its safety verdict: whether its sends
// kept up (within load) or were OVERLOADED (too many failed, unknown or
// retried: its latencies then describe a server that was not keeping up,
// or the run's own faults), and why. The page's header shows it as a
// badge beside PASS / FAIL.
type LoadVerdict struct {
	Label      string `json:"label"` // "within load", "OVERLOADED: " and why, "OVERLOADED by the faults" (or the burst)
	Overloaded bool   `json:"overloaded"`
	// Detail: the achieved rate and the fractions; Cause: what the run
	// knows of why it was OVERLOADED ("" when it was not).
	Detail string `json:"detail"`
	Cause  string `json:"cause,omitempty"`
}

// Report is everything one page shows about a scenario run.
type Report struct {
	Title       string
	Scenario    string // scenario name
	Description string
	Passed      bool
	// Unmeasured, when set, replaces the PASS/FAIL badge: the run judged
	// nothing (e.g. "NOT MEASURED": the target refused the lab's
	// credentials), which is neither.
	Unmeasured string
	StartedAt  time.Time
	Duration   time.Duration
	// DurationLabel names Duration in the page's header ("": "Duration";
	// a page of several runs says what its figure is).
	DurationLabel string
	Backends      string      // e.g. "mysql=external mariadb 10.11; redis=external redis 7.0.15; kafka=embedded kfake"
	Settings      [][2]string // key/value rows: policy, allocator, rate shape, users, devices...
	Verdict       string      // "VALID" / "INVALID"
	// VerdictLabel names Verdict in the header ("": "Safety verdict"; a
	// capacity page gives its answer there).
	VerdictLabel string
	// Machine, when set, is a warning on the machine the figures were
	// measured on (busy with other work), shown beside the verdict at the
	// top of the page.
	Machine string
	// TimeAxis captions the time axis of the charts drawn on time ("":
	// "time since start"; a review page says what its t = 0 is).
	TimeAxis string
	// Load is the load verdict shown beside the safety verdict (nil: the
	// load did not run, or the page has none).
	Load     *LoadVerdict
	Findings []Finding
	Checks   []Check
	Charts   []Chart
	// NoCharts is what the Charts section says when there is no chart:
	// what the run measured instead and where it is drawn ("": "no
	// charts").
	NoCharts string
	Markers  []Marker
	Notes    []string // free text lines (warnings, e.g. "embedded MySQL: figures are not capacity figures")
	// Tables are extra tables shown after the fault schedule (e.g. the
	// server processes and how each incarnation ended).
	Tables []Table
	// Latencies are whole-run latency figures shown in the page's header
	// table, right after the verdict (e.g. the run's ACK latency; a page of
	// several runs has one per run).
	Latencies []Latency
}

// Validate reports, as an error wrapping ErrInvalid, the first reason r
// cannot be drawn; nil means WriteHTML would render it. It does not modify r.
func (r *Report) Validate() error {
	_, err := buildPage(r)
	return err
}

// WriteHTML renders r. It validates first (Title non-empty; every Series' points in non-decreasing T; no NaN/Inf:
// such points are dropped and counted in a note; at most MaxPoints = 20000 points per series, decimated evenly
// beyond that; at most MaxCharts = 32 charts, MaxSeries = 64 per chart) and returns a clear error for what cannot
// be drawn, writing nothing in that case.
//
// The page is rendered completely in memory and written with one Write, so
// an error from rendering also leaves w untouched. r is not modified.
func WriteHTML(w io.Writer, r *Report) error {
	if w == nil {
		return fmt.Errorf("report: nil writer")
	}
	p, err := buildPage(r)
	if err != nil {
		return err
	}
	tmpl, err := parseTemplates()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, p); err != nil {
		return fmt.Errorf("report: render %q: %w", r.Title, err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("report: write %q: %w", r.Title, err)
	}
	return nil
}

// Latency is one latency distribution of a whole run, for the page's
// header: its quantiles and what they count. Count 0 means nothing was
// measured: the page then says "unknown" (and, with Unknown, why), never
// 0, and shows no quantile.
type Latency struct {
	Name string `json:"name"` // "ACK latency, whole run"
	// Of names what Count counts, e.g. "ACKed sends only".
	Of    string `json:"of"`
	Count uint64 `json:"count"`
	// Means says what one sample is, e.g. "from the intended send time to
	// the ACK; failed and unknown sends have no ACK and are not counted".
	Means     string     `json:"means,omitempty"`
	Quantiles []Quantile `json:"quantiles,omitempty"`
	// Unknown says why nothing was measured (Count 0), e.g. "no send was
	// ACKed".
	Unknown string `json:"unknown,omitempty"`
}

// Quantile is one figure of a Latency: "p50", "p99", "max".
type Quantile struct {
	Name  string        `json:"name"`
	Value time.Duration `json:"value"`
}

// Table is an extra table of a report: a title, a header and rows of as
// many cells as the header has.
type Table struct {
	Title  string     `json:"title"`
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
}

// parseTemplates parses the page and the chart figure it draws each chart
// with.
func parseTemplates() (*template.Template, error) {
	tmpl, err := template.New("report").Parse(pageTemplate)
	if err != nil {
		return nil, fmt.Errorf("report: parse page template: %w", err)
	}
	if _, err := tmpl.New("chart").Parse(chartTemplate); err != nil {
		return nil, fmt.Errorf("report: parse chart template: %w", err)
	}
	if _, err := tmpl.New("header").Parse(headerTemplate); err != nil {
		return nil, fmt.Errorf("report: parse header template: %w", err)
	}
	if _, err := tmpl.New("table").Parse(tableTemplate); err != nil {
		return nil, fmt.Errorf("report: parse table template: %w", err)
	}
	return tmpl, nil
}
