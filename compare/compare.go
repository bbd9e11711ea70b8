package compare

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"golang.org/x/perf/benchmath"
)

// Verdicts of one metric.
const (
	VRegressed = "REGRESSED" // worse beyond tolerance (and beyond noise when tested)
	VFailed    = "FAILED"    // a must-hold metric did not hold in a new run
	VMissing   = "MISSING"   // the base measured it, no new run did
	VImproved  = "improved"
	VSame      = "~" // the U test cannot tell the sides apart
	VWithin    = "within tolerance"
	VNew       = "new metric" // only the new side measured it
	// VUnlike: a measured metric worse beyond tolerance between sides
	// measured on unlike backends or machines, or under unlike machine
	// load: it fails the gate (see the package doc) and says why.
	VUnlike = "REGRESSED (unlike sides)"
)

// Methods say how a verdict was reached.
const (
	MethodUTest     = "U test"
	MethodTolerance = "tolerance only"
	MethodExact     = "exact"
)

// Options of Compare.
type Options struct {
	Tolerances Tolerances
	// Alpha is the U test's significance level (default 0.05).
	Alpha float64
	// AllowMismatch compares runs of different subjects of the same kind.
	AllowMismatch bool
}

// Row is one metric's comparison.
type Row struct {
	Metric string  `json:"metric"`
	Def    Def     `json:"-"`
	Unit   string  `json:"unit"`
	Base   float64 `json:"base"` // median of the base runs (NaN: not measured)
	New    float64 `json:"new"`
	NBase  int     `json:"n_base"`
	NNew   int     `json:"n_new"`
	// Delta is New - Base; Pct the same relative to Base (NaN when Base is 0).
	Delta float64 `json:"delta"`
	Pct   float64 `json:"delta_pct"`
	// P is the U test's p-value (NaN: no test).
	P         float64 `json:"p"`
	Tolerance string  `json:"tolerance"`
	Verdict   string  `json:"verdict"`
	Method    string  `json:"method"`
	Note      string  `json:"note,omitempty"`
}

// Bad tells whether the row fails the gate.
func (r Row) Bad() bool {
	return r.Verdict == VRegressed || r.Verdict == VUnlike || r.Verdict == VFailed || r.Verdict == VMissing
}

// Report is a whole comparison.
type Report struct {
	Kind     string   `json:"kind"`
	Subject  string   `json:"subject"`
	Base     []string `json:"base"`
	New      []string `json:"new"`
	Rows     []Row    `json:"rows"`
	Notes    []string `json:"notes,omitempty"`
	NoiseRun bool     `json:"noise_tested"`
	// Mismatch is set when runs of different subjects were compared on
	// purpose (AllowMismatch).
	Mismatch string `json:"mismatch,omitempty"`
	// Unlike says how the sides differ in where they were measured
	// (backends, machine, machine load); nil: alike as far as the files
	// say. The measured rows are then labelled (VUnlike, notes).
	Unlike []string `json:"unlike_sides,omitempty"`
}

// Regressed tells whether any metric fails the gate.
func (r *Report) Regressed() bool {
	for _, row := range r.Rows {
		if row.Bad() {
			return true
		}
	}
	return false
}

// Compare compares the base runs with the new ones. It returns an error
// wrapping ErrInput when the input is unusable: no run on a side, runs of
// different kinds, or of different subjects unless allowed.
func Compare(base, nw []*Run, o Options) (*Report, error) {
	if len(base) == 0 || len(nw) == 0 {
		return nil, fmt.Errorf("%w: need at least one run on each side (base %d, new %d)", ErrInput, len(base), len(nw))
	}
	if o.Alpha == 0 {
		o.Alpha = 0.05
	}
	if o.Alpha <= 0 || o.Alpha >= 1 {
		return nil, fmt.Errorf("%w: alpha %v: want 0 < alpha < 1", ErrInput, o.Alpha)
	}
	rep := &Report{Kind: base[0].Kind, Subject: base[0].Subject}
	for _, r := range slices.Concat(base, nw) {
		if r.Kind != rep.Kind {
			return nil, fmt.Errorf("%w: %s is a %s result, %s a %s result", ErrInput, base[0].Path, base[0].Kind, r.Path, r.Kind)
		}
		if r.Subject != rep.Subject {
			if !o.AllowMismatch {
				return nil, fmt.Errorf("%w: %s measured %q, %s measured %q (allow with --allow-mismatch)", ErrInput, base[0].Path, rep.Subject, r.Path, r.Subject)
			}
			rep.Mismatch = fmt.Sprintf("compared on purpose: %q against %q", rep.Subject, r.Subject)
		}
	}
	for _, r := range base {
		rep.Base = append(rep.Base, r.Path)
	}
	for _, r := range nw {
		rep.New = append(rep.New, r.Path)
	}
	names := metricNames(slices.Concat(base, nw))
	for _, n := range names {
		d, ok := Lookup(n)
		if !ok && isFinding(slices.Concat(base, nw), n) {
			d, ok = FindingDef(n), true
		}
		if !ok {
			continue
		}
		row := compareMetric(d, values(base, n), values(nw, n), o)
		if row.Method == MethodUTest {
			rep.NoiseRun = true
		}
		rep.Rows = append(rep.Rows, row)
	}
	if len(rep.Rows) == 0 {
		return nil, fmt.Errorf("%w: no metric in common", ErrInput)
	}
	rep.Unlike = unlikeSides(base, nw)
	markUnlike(rep.Rows, rep.Unlike)
	for _, r := range slices.Concat(base, nw) {
		for _, n := range r.Notes {
			rep.Notes = append(rep.Notes, r.Path+": "+n)
		}
	}
	return rep, nil
}

// isFinding tells whether some run read name as a checker finding.
func isFinding(runs []*Run, name string) bool {
	for _, r := range runs {
		if r.Findings[name] {
			return true
		}
	}
	return false
}

func metricNames(runs []*Run) []string {
	set := map[string]bool{}
	for _, r := range runs {
		for n := range r.Metrics {
			set[n] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func values(runs []*Run, name string) []float64 {
	var out []float64
	for _, r := range runs {
		if v, ok := r.Metrics[name]; ok && !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	return out
}

func compareMetric(d Def, bv, nv []float64, o Options) Row {
	row := Row{Metric: d.Name, Def: d, Unit: d.Unit, NBase: len(bv), NNew: len(nv), Base: median(bv), New: median(nv),
		P: math.NaN(), Delta: math.NaN(), Pct: math.NaN()}
	tol := o.Tolerances.For(d)
	if d.Rule == Measured || d.Rule == Safety {
		row.Tolerance = tol.In(d.Unit)
	}
	switch {
	case len(nv) == 0:
		row.Verdict, row.Method, row.Note = VMissing, MethodExact, "the base measured it, no new run did"
		return row
	case len(bv) == 0:
		row.Verdict, row.Method, row.Note = VNew, MethodExact, "no base run measured it"
		return row
	}
	row.Delta = row.New - row.Base
	if row.Base != 0 {
		row.Pct = row.Delta / math.Abs(row.Base) * 100
	}
	switch d.Rule {
	case MustHold:
		row.Method = MethodExact
		row.New = slices.Min(nv)
		row.Base = slices.Min(bv)
		row.Verdict = VWithin
		if row.New < 1 {
			row.Verdict = VFailed
			row.Note = fmt.Sprintf("did not hold in %d of %d new runs", countBelow(nv, 1), len(nv))
			if row.Base < 1 {
				row.Note += "; nor in every base run"
			}
		}
		return row
	case Safety:
		if slices.Max(bv) == 0 && slices.Max(nv) > 0 {
			row.Method, row.Verdict = MethodExact, VRegressed
			row.Note = fmt.Sprintf("findings in %d of %d new runs, none in the base: never noise", countAbove(nv, 0), len(nv))
			return row
		}
		if slices.Max(bv) == 0 && slices.Max(nv) == 0 {
			row.Method, row.Verdict = MethodExact, VWithin
			return row
		}
	}
	worse := row.Delta
	if d.Better == Higher {
		worse = -worse
	}
	allowed := tol.Allowed(row.Base)
	beyond, better := worse > allowed, -worse > allowed
	row.Method = MethodTolerance
	if len(bv) == 1 || len(nv) == 1 {
		row.Note = "one run on a side: no noise test possible"
	} else {
		cmp := benchmath.AssumeNothing.Compare(benchmath.NewSample(bv, &benchmath.Thresholds{CompareAlpha: o.Alpha}),
			benchmath.NewSample(nv, &benchmath.Thresholds{CompareAlpha: o.Alpha}))
		if tooFew(cmp, bv, nv) {
			row.Note = fmt.Sprintf("%d+%d runs: too few for the U test to reach alpha %g (%s)", len(bv), len(nv), o.Alpha, errors.Join(cmp.Warnings...))
		} else {
			row.Method, row.P = MethodUTest, cmp.P
			if cmp.P > o.Alpha {
				row.Verdict = VSame
				return row
			}
		}
	}
	switch {
	case beyond:
		row.Verdict = VRegressed
	case better:
		row.Verdict = VImproved
	default:
		row.Verdict = VWithin
	}
	return row
}

// tooFew: the U test warned that these sample sizes cannot reach alpha.
// Identical samples on both sides are no difference, not too few runs.
func tooFew(c benchmath.Comparison, bv, nv []float64) bool {
	if c.P <= c.Alpha {
		return false
	}
	for _, w := range c.Warnings {
		if w != nil && strings.Contains(w.Error(), "samples to detect") && !allEqual(slices.Concat(bv, nv)) {
			return true
		}
	}
	return false
}

func allEqual(v []float64) bool {
	for _, x := range v {
		if x != v[0] {
			return false
		}
	}
	return true
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func countBelow(v []float64, x float64) (n int) {
	for _, y := range v {
		if y < x {
			n++
		}
	}
	return n
}

func countAbove(v []float64, x float64) (n int) {
	for _, y := range v {
		if y > x {
			n++
		}
	}
	return n
}
