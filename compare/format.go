package compare

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// FormatValue writes a metric value in its unit ("-" when not measured).
func FormatValue(unit string, v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	switch unit {
	case "ms":
		return fmt.Sprintf("%.2fms", v)
	case "s":
		return fmt.Sprintf("%.2fs", v)
	case "/s":
		return fmt.Sprintf("%.0f/s", v)
	case "ratio":
		return fmt.Sprintf("%.3f%%", v*100)
	case "bool":
		if v >= 1 {
			return "yes"
		}
		return "no"
	case "count":
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.3g%s", v, unit)
	}
}

func (r Row) delta() string {
	switch {
	case math.IsNaN(r.Delta) || r.Unit == "bool":
		return "-"
	case r.Unit == "ratio":
		return fmt.Sprintf("%+.3fpp", r.Delta*100)
	case math.IsNaN(r.Pct):
		return fmt.Sprintf("%+.3g", r.Delta)
	default:
		return fmt.Sprintf("%+.1f%%", r.Pct)
	}
}

func (r Row) p() string {
	if math.IsNaN(r.P) {
		return "-"
	}
	return fmt.Sprintf("%.3f", r.P)
}

func (r Row) n() string { return fmt.Sprintf("%d+%d", r.NBase, r.NNew) }

// Outcome is the report's one-line answer.
func (r *Report) Outcome() string {
	bad := 0
	for _, row := range r.Rows {
		if row.Bad() {
			bad++
		}
	}
	method := "noise-tested by the Mann-Whitney U test where the runs allow it"
	if !r.NoiseRun {
		method = "decided by tolerance alone: no noise test was possible with these runs"
	}
	unlike := ""
	if len(r.Unlike) > 0 {
		unlike = "; UNLIKE SIDES, latency and rate not like for like: " + strings.Join(r.Unlike, "; ")
	}
	if bad > 0 {
		return fmt.Sprintf("REGRESSION: %d of %d metrics failed the gate (%s)%s", bad, len(r.Rows), method, unlike)
	}
	return fmt.Sprintf("no regression in %d metrics (%s)%s", len(r.Rows), method, unlike)
}

// WriteText writes the table for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d base run(s) against %d new run(s)\n", r.Subject, len(r.Base), len(r.New))
	if r.Mismatch != "" {
		fmt.Fprintf(&b, "subjects differ, %s\n", r.Mismatch)
	}
	for _, u := range r.Unlike {
		fmt.Fprintf(&b, "UNLIKE SIDES: %s\n", u)
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tbase\tnew\tdelta\tp\tn\ttolerance\tverdict\tmethod")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Metric, FormatValue(row.Unit, row.Base), FormatValue(row.Unit, row.New),
			row.delta(), row.p(), row.n(), dash(row.Tolerance), row.Verdict, row.Method)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, row := range r.Rows {
		if row.Note != "" {
			fmt.Fprintf(&b, "  %s: %s\n", row.Metric, row.Note)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	fmt.Fprintln(&b, r.Outcome())
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown writes the report as a Markdown section (a PR comment).
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	mark := "✅"
	if r.Regressed() {
		mark = "❌"
	}
	fmt.Fprintf(&b, "### %s imlab compare: %s\n\n%s. %d base run(s), %d new run(s).\n\n", mark, mdEscape(r.Subject), r.Outcome(), len(r.Base), len(r.New))
	if r.Mismatch != "" {
		fmt.Fprintf(&b, "Subjects differ, %s.\n\n", mdEscape(r.Mismatch))
	}
	for _, u := range r.Unlike {
		fmt.Fprintf(&b, "> **Unlike sides**: %s. Latency and rate rows compare unlike runs; a regression among them is marked and fails the gate until a like-for-like run clears it.\n\n", mdEscape(u))
	}
	fmt.Fprintln(&b, "| metric | base | new | delta | p | n | tolerance | verdict | method |")
	fmt.Fprintln(&b, "|---|---:|---:|---:|---:|---:|---|---|---|")
	for _, row := range r.Rows {
		v := row.Verdict
		if row.Bad() {
			v = "**" + v + "**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Metric, FormatValue(row.Unit, row.Base), FormatValue(row.Unit, row.New),
			row.delta(), row.p(), row.n(), mdEscape(dash(row.Tolerance)), v, row.Method)
	}
	var notes []string
	for _, row := range r.Rows {
		if row.Note != "" {
			notes = append(notes, fmt.Sprintf("- `%s`: %s", row.Metric, mdEscape(row.Note)))
		}
	}
	for _, n := range r.Notes {
		notes = append(notes, "- "+mdEscape(n))
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, "\n%s\n", strings.Join(notes, "\n"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type junitSuites struct {
	XMLName  xml.Name   `xml:"testsuites"`
	Name     string     `xml:"name,attr"`
	Tests    int        `xml:"tests,attr"`
	Failures int        `xml:"failures,attr"`
	Suite    junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Cases    []junitCase `xml:"testcase"`
	Out      string      `xml:"system-out,omitempty"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes one testcase per metric, a failure for each that
// fails the gate.
func (r *Report) WriteJUnit(w io.Writer) error {
	s := junitSuite{Name: "imlab compare: " + r.Subject}
	for _, row := range r.Rows {
		c := junitCase{Name: row.Metric, Classname: "compare." + r.Kind}
		if row.Bad() {
			c.Failure = &junitFailure{Type: row.Verdict,
				Message: fmt.Sprintf("%s %s: base %s, new %s (%s, %s)", row.Metric, row.Verdict, FormatValue(row.Unit, row.Base), FormatValue(row.Unit, row.New), row.delta(), row.Method),
				Text:    row.Note}
			s.Failures++
		}
		s.Cases = append(s.Cases, c)
	}
	s.Tests = len(s.Cases)
	s.Out = r.Outcome() + "\n" + strings.Join(r.Notes, "\n")
	top := junitSuites{Name: "imlab compare", Tests: s.Tests, Failures: s.Failures, Suite: s}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(top); err != nil {
		return fmt.Errorf("compare: junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// MarshalJSON writes a value that was not measured (NaN) as null.
func (r Row) MarshalJSON() ([]byte, error) {
	type plain Row
	num := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	return json.Marshal(struct {
		plain
		Base  *float64 `json:"base"`
		New   *float64 `json:"new"`
		Delta *float64 `json:"delta"`
		Pct   *float64 `json:"delta_pct"`
		P     *float64 `json:"p"`
	}{plain(r), num(r.Base), num(r.New), num(r.Delta), num(r.Pct), num(r.P)})
}
