package dashboards_test

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// This file checks a dashboard query against the registry. Prometheus's own
// parser reads the query; the walk below does not evaluate anything: it
// follows, for every sub-expression, the set of labels its series carry, so
// that a query can be checked against the registry.

// Metric types, as the registry's families name them.
const (
	kindCounter   = "counter"
	kindGauge     = "gauge"
	kindHistogram = "histogram"
	kindSummary   = "summary"
	kindUntyped   = "untyped"
)

// metricDesc is one metric of the registry.
type metricDesc struct {
	Name   string
	Kind   string
	Labels []string
}

// catalog is what a query may use: the registry's metrics, and the labels
// Prometheus adds to every scraped series (job, instance, static target
// labels).
type catalog struct {
	Metrics      map[string]metricDesc
	TargetLabels []string
}

// exprResult is what the analysis of one expression found.
type exprResult struct {
	Labels    []string // labels of the result's series, sorted
	Metrics   []string // registry metrics referenced (base names, histograms without suffix)
	Selectors []selectorUse
	Problems  []string
}

// selectorUse is one series selector of a query, as written.
type selectorUse struct {
	Series   string
	Matchers []matcher
}

type matcher struct {
	Label, Op, Value string
}

// grafanaDurationRE matches Grafana's time-range variables, which stand
// where PromQL wants a duration ([$__rate_interval]). Variables inside
// matcher strings ($job, $instance) are left as they are: they are valid
// PromQL already, and the selector-filter check reads them.
var grafanaDurationRE = regexp.MustCompile(`\$(?:\{__(?:rate_interval|interval|range)\}|__(?:rate_interval|interval|range)\b)`)

var promqlParser = parser.NewParser(parser.Options{})

// value is what the analysis knows about a sub-expression.
type value struct {
	labels map[string]bool
	// unrated names a counter (or histogram series) that has not been
	// through rate()/increase()/irate() yet; sel is set while the value is
	// a bare selector (what the rate-like functions accept).
	unrated string
	sel     *selector
}

type selector struct {
	series string // the series name as written (with _bucket etc.)
	base   metricDesc
	known  bool
}

type checker struct {
	cat       *catalog
	problems  []string
	metrics   map[string]bool
	selectors []selectorUse
}

// analyze parses expr and checks it against cat. With selectorOnly the
// expression must be one series selector (a template variable's
// label_values), which needs no rate().
func analyze(expr string, cat *catalog, selectorOnly bool) exprResult {
	var res exprResult
	e, err := promqlParser.ParseExpr(grafanaDurationRE.ReplaceAllString(expr, "5m"))
	if err != nil {
		res.Problems = append(res.Problems, "parse: "+err.Error())
		return res
	}
	c := &checker{cat: cat, metrics: map[string]bool{}}
	v := c.walk(e)
	if _, isSel := e.(*parser.VectorSelector); selectorOnly && !isSel {
		c.problem("want a single series selector")
	} else if !selectorOnly {
		c.consume(v, "the query's result")
	}
	if t := e.Type(); t != parser.ValueTypeVector && t != parser.ValueTypeScalar {
		c.problem("the query returns a %s, Grafana needs an instant vector or a scalar", t)
	}
	res.Labels = sortedKeys(v.labels)
	res.Metrics = sortedKeys(c.metrics)
	res.Selectors = c.selectors
	res.Problems = c.problems
	return res
}

func (c *checker) problem(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	if !slices.Contains(c.problems, msg) {
		c.problems = append(c.problems, msg)
	}
}

// consume is every use of a value other than by a rate-like function: a
// counter must have been rated by then.
func (c *checker) consume(v value, by string) {
	if v.unrated != "" {
		c.problem("%s is a counter or histogram series: %s must see it through rate() or increase()", v.unrated, by)
	}
}

// walk follows the labels through e and records what it finds wrong.
func (c *checker) walk(e parser.Expr) value {
	switch e := e.(type) {
	case *parser.ParenExpr:
		v := c.walk(e.Expr)
		v.sel = nil // (x)[5m] is a subquery, not a range selector
		return v
	case *parser.StepInvariantExpr:
		return c.walk(e.Expr)
	case *parser.NumberLiteral, *parser.StringLiteral:
		return value{}
	case *parser.UnaryExpr:
		v := c.walk(e.Expr)
		c.consume(v, "unary "+e.Op.String())
		v.sel, v.unrated = nil, ""
		return v
	case *parser.VectorSelector:
		return c.selector(e)
	case *parser.MatrixSelector:
		return c.walk(e.VectorSelector)
	case *parser.SubqueryExpr:
		v := c.walk(e.Expr)
		c.consume(v, "a subquery")
		v.sel, v.unrated = nil, ""
		return v
	case *parser.AggregateExpr:
		return c.aggregation(e)
	case *parser.Call:
		return c.call(e)
	case *parser.BinaryExpr:
		return c.binary(e)
	}
	c.problem("unsupported expression %s", e)
	return value{}
}

func (c *checker) binary(e *parser.BinaryExpr) value {
	op := e.Op.String()
	l, r := c.walk(e.LHS), c.walk(e.RHS)
	c.consume(l, "the operator "+op)
	c.consume(r, "the operator "+op)
	switch {
	case e.LHS.Type() == parser.ValueTypeScalar && e.RHS.Type() == parser.ValueTypeScalar:
		return value{}
	case e.LHS.Type() == parser.ValueTypeScalar:
		return value{labels: r.labels}
	case e.RHS.Type() == parser.ValueTypeScalar:
		return value{labels: l.labels}
	}
	vm := e.VectorMatching
	if vm == nil {
		vm = &parser.VectorMatching{}
	}
	var on, ignoring []string
	if vm.On {
		on = vm.MatchingLabels
	} else {
		ignoring = vm.MatchingLabels
	}
	for _, x := range on {
		if !l.labels[x] || !r.labels[x] {
			c.problem("on(%s): label %s is not on both sides of %s (left %v, right %v)", strings.Join(on, ","), x, op,
				sortedKeys(l.labels), sortedKeys(r.labels))
		}
	}
	for _, x := range ignoring {
		if !l.labels[x] && !r.labels[x] {
			c.problem("ignoring(%s): label %s is on neither side of %s", strings.Join(ignoring, ","), x, op)
		}
	}
	if e.Op == parser.LOR {
		out := map[string]bool{}
		for k := range l.labels {
			if r.labels[k] {
				out[k] = true
			}
		}
		return value{labels: out}
	}
	// The labels the two sides are matched on must be the same set, or no
	// series ever matches.
	match := func(ls map[string]bool) map[string]bool {
		out := map[string]bool{}
		for k := range ls {
			if vm.On == slices.Contains(vm.MatchingLabels, k) {
				out[k] = true
			}
		}
		return out
	}
	lm, rm := match(l.labels), match(r.labels)
	grouped := vm.Card == parser.CardManyToOne || vm.Card == parser.CardOneToMany
	if !grouped && !maps.Equal(lm, rm) {
		c.problem("%s matches series on labels %v on the left and %v on the right: no series would match (use on()/ignoring() or aggregate both sides alike)",
			op, sortedKeys(lm), sortedKeys(rm))
	}
	include := func(kind string, keep, other map[string]bool, side string) value {
		out := copySet(keep)
		for _, x := range vm.Include {
			if !other[x] {
				c.problem("%s(%s): label %s is not on the %s side", kind, strings.Join(vm.Include, ","), x, side)
			}
			out[x] = true
		}
		return value{labels: out}
	}
	switch {
	case vm.Card == parser.CardManyToOne:
		return include("group_left", l.labels, r.labels, "right")
	case vm.Card == parser.CardOneToMany:
		return include("group_right", r.labels, l.labels, "left")
	case e.Op == parser.LAND || e.Op == parser.LUNLESS:
		return value{labels: l.labels}
	}
	return value{labels: lm}
}

func (c *checker) aggregation(e *parser.AggregateExpr) value {
	op := e.Op.String()
	if e.Param != nil {
		c.walk(e.Param)
	}
	arg := c.walk(e.Expr)
	c.consume(arg, op+"()")
	mode := "by"
	if e.Without {
		mode = "without"
	}
	for _, l := range e.Grouping {
		if !arg.labels[l] {
			c.problem("%s %s (%s): label %s is not on the aggregated series (they carry %v)", op, mode, strings.Join(e.Grouping, ", "), l, sortedKeys(arg.labels))
		}
	}
	out := map[string]bool{}
	switch {
	case e.Op == parser.TOPK || e.Op == parser.BOTTOMK || e.Op == parser.LIMITK || e.Op == parser.LIMIT_RATIO:
		out = copySet(arg.labels)
	case e.Without:
		out = copySet(arg.labels)
		for _, l := range e.Grouping {
			delete(out, l)
		}
	default:
		for _, l := range e.Grouping {
			out[l] = true
		}
	}
	if e.Op == parser.COUNT_VALUES {
		name, ok := stringArg(e.Param)
		if !ok || name == "" {
			c.problem("count_values needs a label name string")
		}
		out[name] = true
	}
	return value{labels: out}
}

// Functions by what they do to labels; the parser has checked the
// arguments' number and types.
var (
	rateFuncs = map[string]bool{"rate": true, "increase": true, "irate": true}
	// over a range of gauges, result keeps the labels
	rangeFuncs = map[string]bool{
		"avg_over_time": true, "min_over_time": true, "max_over_time": true, "sum_over_time": true,
		"count_over_time": true, "last_over_time": true, "stddev_over_time": true, "stdvar_over_time": true,
		"present_over_time": true, "deriv": true, "delta": true, "idelta": true, "changes": true,
		"quantile_over_time": true, "predict_linear": true,
	}
	// instant vector in, same labels out (extra scalar arguments allowed)
	vectorFuncs = map[string]bool{
		"abs": true, "ceil": true, "floor": true, "round": true, "sqrt": true, "exp": true, "ln": true,
		"log2": true, "log10": true, "clamp": true, "clamp_min": true, "clamp_max": true, "sort": true,
		"sort_desc": true, "timestamp": true, "sgn": true,
	}
)

func (c *checker) call(e *parser.Call) value {
	name := e.Func.Name
	args := make([]value, len(e.Args))
	for i, a := range e.Args {
		args[i] = c.walk(a)
	}
	switch {
	case rateFuncs[name]:
		a := args[0]
		if a.sel != nil && a.sel.known && a.unrated == "" {
			c.problem("%s() over %s, a %s: %s applies to counters (a gauge is shown as it is)", name, a.sel.series, a.sel.base.Kind, name)
		}
		return value{labels: a.labels}
	case rangeFuncs[name]:
		r := args[len(args)-1]
		if name == "predict_linear" {
			r = args[0]
		}
		c.consume(r, name+"()")
		return value{labels: r.labels}
	case name == "histogram_quantile":
		v := args[1]
		c.consume(v, "histogram_quantile()")
		if q, ok := numberArg(e.Args[0]); ok && (q < 0 || q > 1) {
			c.problem("histogram_quantile(%v, ...): the quantile is outside [0, 1]", q)
		}
		if !v.labels["le"] {
			c.problem("histogram_quantile over series without the le label (aggregate with sum by (le, ...) (rate(x_bucket[..])))")
		}
		out := copySet(v.labels)
		delete(out, "le")
		return value{labels: out}
	case vectorFuncs[name]:
		c.consume(args[0], name+"()")
		return value{labels: args[0].labels}
	case name == "label_replace":
		c.consume(args[0], name+"()")
		out := copySet(args[0].labels)
		dst, _ := stringArg(e.Args[1])
		if src, _ := stringArg(e.Args[3]); src != "" && !out[src] {
			c.problem("label_replace: source label %s is not on the series", src)
		}
		out[dst] = true
		return value{labels: out}
	case name == "absent" || name == "scalar":
		c.consume(args[0], name+"()")
		return value{labels: map[string]bool{}}
	case name == "vector" || name == "time":
		return value{labels: map[string]bool{}}
	}
	c.problem("unknown or unsupported function %s()", name)
	return value{}
}

func (c *checker) selector(e *parser.VectorSelector) value {
	name := e.Name
	var matchers []matcher
	for _, m := range e.LabelMatchers {
		switch {
		case m.Name == labels.MetricName && m.Type == labels.MatchEqual && name == "":
			name = m.Value
		case m.Name != labels.MetricName:
			matchers = append(matchers, matcher{Label: m.Name, Op: m.Type.String(), Value: m.Value})
		}
	}
	if name == "" {
		c.problem("a selector without a metric name: every query must name its metrics")
		return value{labels: map[string]bool{}}
	}
	sel, labels, unrated := c.resolve(name)
	for _, m := range matchers {
		if sel.known && !labels[m.Label] {
			c.problem("%s has no label %s (it has %v)", name, m.Label, sortedKeys(labels))
		}
	}
	c.selectors = append(c.selectors, selectorUse{Series: name, Matchers: matchers})
	return value{labels: labels, sel: sel, unrated: unrated}
}

// resolve finds the registry metric behind a series name: the name itself,
// or a histogram's _bucket, _sum or _count (a summary's _sum or _count).
func (c *checker) resolve(series string) (*selector, map[string]bool, string) {
	sel := &selector{series: series}
	labels := map[string]bool{}
	for _, l := range c.cat.TargetLabels {
		labels[l] = true
	}
	m, ok := c.cat.Metrics[series]
	suffix := ""
	if ok && (m.Kind == kindHistogram || m.Kind == kindSummary) {
		c.problem("%s is a %s: its series are %[1]s_bucket, %[1]s_sum and %[1]s_count", series, m.Kind)
	}
	if !ok {
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			base, found := strings.CutSuffix(series, s)
			if !found {
				continue
			}
			if bm, bok := c.cat.Metrics[base]; bok && (bm.Kind == kindHistogram || (bm.Kind == kindSummary && s != "_bucket")) {
				m, ok, suffix = bm, true, s
			}
		}
	}
	if !ok {
		c.problem("metric %s is not in the reference server's registry", series)
		return sel, labels, ""
	}
	sel.base, sel.known = m, true
	c.metrics[m.Name] = true
	for _, l := range m.Labels {
		labels[l] = true
	}
	if suffix == "_bucket" {
		labels["le"] = true
	}
	if m.Kind == kindSummary && suffix == "" {
		labels["quantile"] = true
	}
	unrated := ""
	if m.Kind == kindCounter || suffix != "" {
		unrated = series
	}
	return sel, labels, unrated
}

// numberArg is the value of a literal number argument such as 0.99 or -1.
func numberArg(e parser.Expr) (float64, bool) {
	switch e := e.(type) {
	case *parser.NumberLiteral:
		return e.Val, true
	case *parser.ParenExpr:
		return numberArg(e.Expr)
	case *parser.StepInvariantExpr:
		return numberArg(e.Expr)
	case *parser.UnaryExpr:
		v, ok := numberArg(e.Expr)
		if e.Op == parser.SUB {
			v = -v
		}
		return v, ok
	}
	return 0, false
}

// stringArg is the value of a literal string argument.
func stringArg(e parser.Expr) (string, bool) {
	switch e := e.(type) {
	case *parser.StringLiteral:
		return e.Val, true
	case *parser.ParenExpr:
		return stringArg(e.Expr)
	case *parser.StepInvariantExpr:
		return stringArg(e.Expr)
	}
	return "", false
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

func copySet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	maps.Copy(out, m)
	return out
}
