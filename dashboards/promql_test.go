package dashboards_test

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// This file is a small PromQL reader, enough for the dashboards' queries:
// selectors with matchers and ranges, function calls, aggregations with
// by/without, binary operators with on/ignoring/group_left/group_right,
// offset and @ modifiers, subqueries, and Grafana's $variables. It does not
// evaluate anything: it follows, for every sub-expression, the set of labels
// its series carry, so that a query can be checked against the registry.

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

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tNumber // also durations: 5m, 1h30m
	tString
	tVar // $name or ${name}
	tPunct
	tOp
)

type qtoken struct {
	kind tokKind
	text string
	pos  int
}

func lex(s string) ([]qtoken, error) {
	var out []qtoken
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case isIdentStart(c):
			j := i + 1
			for j < len(s) && (isIdentStart(s[j]) || isDigit(s[j]) || s[j] == ':') {
				j++
			}
			out = append(out, qtoken{tIdent, s[i:j], i})
			i = j
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			j := i + 1
			for j < len(s) && (isDigit(s[j]) || isIdentStart(s[j]) || s[j] == '.' ||
				((s[j] == '+' || s[j] == '-') && (s[j-1] == 'e' || s[j-1] == 'E') && !strings.ContainsAny(s[i:j], "smhdwy"))) {
				j++
			}
			out = append(out, qtoken{tNumber, s[i:j], i})
			i = j
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			raw := s[i : j+1]
			val := raw[1 : len(raw)-1]
			if c == '"' {
				u, err := strconv.Unquote(raw)
				if err != nil {
					return nil, fmt.Errorf("bad string %s: %v", raw, err)
				}
				val = u
			}
			out = append(out, qtoken{tString, val, i})
			i = j + 1
		case c == '$':
			j := i + 1
			if j < len(s) && s[j] == '{' {
				k := strings.IndexByte(s[j:], '}')
				if k < 0 {
					return nil, fmt.Errorf("unterminated ${ at %d", i)
				}
				j += k + 1
			} else {
				for j < len(s) && (isIdentStart(s[j]) || isDigit(s[j])) {
					j++
				}
			}
			if j == i+1 {
				return nil, fmt.Errorf("lone $ at %d", i)
			}
			out = append(out, qtoken{tVar, s[i:j], i})
			i = j
		case strings.ContainsRune("(){}[],:@", rune(c)):
			out = append(out, qtoken{tPunct, string(c), i})
			i++
		default:
			two := ""
			if i+1 < len(s) {
				two = s[i : i+2]
			}
			switch two {
			case "==", "!=", "<=", ">=", "=~", "!~":
				out = append(out, qtoken{tOp, two, i})
				i += 2
				continue
			}
			if strings.ContainsRune("+-*/%^<>=", rune(c)) {
				out = append(out, qtoken{tOp, string(c), i})
				i++
				continue
			}
			return nil, fmt.Errorf("unexpected %q at %d", c, i)
		}
	}
	return append(out, qtoken{tEOF, "", len(s)}), nil
}

func isIdentStart(c byte) bool { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isDigit(c byte) bool      { return c >= '0' && c <= '9' }

// Value types of sub-expressions.
const (
	vScalar = "scalar"
	vVector = "instant vector"
	vRange  = "range vector"
	vString = "string"
)

// value is what the analysis knows about a sub-expression.
type value struct {
	typ    string
	labels map[string]bool
	// unrated names a counter (or histogram series) that has not been
	// through rate()/increase()/irate() yet; sel is set while the value is
	// a bare selector (what the rate-like functions accept).
	unrated string
	sel     *selector
	num     float64 // for scalar literals
	str     string  // for string literals
}

type selector struct {
	series string // the series name as written (with _bucket etc.)
	base   metricDesc
	known  bool
}

type qparser struct {
	toks      []qtoken
	i         int
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
	toks, err := lex(expr)
	if err != nil {
		res.Problems = append(res.Problems, "lex: "+err.Error())
		return res
	}
	p := &qparser{toks: toks, cat: cat, metrics: map[string]bool{}}
	v, err := p.parseExpr(0)
	if err == nil && p.peek().kind != tEOF {
		err = fmt.Errorf("unexpected %q at %d", p.peek().text, p.peek().pos)
	}
	if err != nil {
		res.Problems = append(res.Problems, "parse: "+err.Error())
		return res
	}
	switch {
	case selectorOnly && (v.sel == nil || v.typ != vVector):
		p.problem("want a single series selector")
	case !selectorOnly:
		p.consume(v, "the query's result")
	}
	if v.typ != vVector && v.typ != vScalar {
		p.problem("the query returns a %s, Grafana needs an instant vector or a scalar", v.typ)
	}
	res.Labels = sortedKeys(v.labels)
	res.Metrics = sortedKeys(p.metrics)
	res.Selectors = p.selectors
	res.Problems = p.problems
	return res
}

func (p *qparser) peek() qtoken { return p.toks[p.i] }
func (p *qparser) next() qtoken {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *qparser) accept(kind tokKind, text string) bool {
	if t := p.peek(); t.kind == kind && t.text == text {
		p.i++
		return true
	}
	return false
}

func (p *qparser) expect(kind tokKind, text string) error {
	if !p.accept(kind, text) {
		t := p.peek()
		return fmt.Errorf("want %q at %d, got %q", text, t.pos, t.text)
	}
	return nil
}

func (p *qparser) problem(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	if !slices.Contains(p.problems, msg) {
		p.problems = append(p.problems, msg)
	}
}

// consume is every use of a value other than by a rate-like function: a
// counter must have been rated by then.
func (p *qparser) consume(v value, by string) {
	if v.unrated != "" {
		p.problem("%s is a counter or histogram series: %s must see it through rate() or increase()", v.unrated, by)
	}
}

// Binary operator precedence (higher binds tighter).
func precedence(t qtoken) int {
	switch {
	case t.kind == tIdent && t.text == "or":
		return 1
	case t.kind == tIdent && (t.text == "and" || t.text == "unless"):
		return 2
	case t.kind == tOp && (t.text == "==" || t.text == "!=" || t.text == "<=" || t.text == ">=" || t.text == "<" || t.text == ">"):
		return 3
	case t.kind == tOp && (t.text == "+" || t.text == "-"):
		return 4
	case t.kind == tOp && (t.text == "*" || t.text == "/" || t.text == "%"), t.kind == tIdent && t.text == "atan2":
		return 5
	case t.kind == tOp && t.text == "^":
		return 6
	}
	return 0
}

func (p *qparser) parseExpr(minPrec int) (value, error) {
	left, err := p.parseUnary()
	if err != nil {
		return value{}, err
	}
	for {
		op := p.peek()
		prec := precedence(op)
		if prec == 0 || prec < minPrec {
			return left, nil
		}
		p.next()
		boolMod := p.accept(tIdent, "bool")
		var on, ignoring, include []string
		onSet, ignSet, groupLeft, groupRight := false, false, false, false
		if p.accept(tIdent, "on") {
			onSet = true
			if on, err = p.labelList(); err != nil {
				return value{}, err
			}
		} else if p.accept(tIdent, "ignoring") {
			ignSet = true
			if ignoring, err = p.labelList(); err != nil {
				return value{}, err
			}
		}
		if p.accept(tIdent, "group_left") {
			groupLeft = true
		} else if p.accept(tIdent, "group_right") {
			groupRight = true
		}
		if (groupLeft || groupRight) && p.peek().kind == tPunct && p.peek().text == "(" {
			if include, err = p.labelList(); err != nil {
				return value{}, err
			}
		}
		next := prec + 1
		if op.text == "^" {
			next = prec // right-associative
		}
		right, err := p.parseExpr(next)
		if err != nil {
			return value{}, err
		}
		p.consume(left, "the operator "+op.text)
		p.consume(right, "the operator "+op.text)
		if left.typ == vRange || right.typ == vRange || left.typ == vString || right.typ == vString {
			p.problem("operator %s applied to a %s and a %s", op.text, left.typ, right.typ)
		}
		setOp := op.text == "and" || op.text == "or" || op.text == "unless"
		switch {
		case left.typ == vScalar && right.typ == vScalar:
			if setOp {
				p.problem("set operator %s between scalars", op.text)
			}
			left = value{typ: vScalar}
		case left.typ == vScalar:
			left = value{typ: vVector, labels: right.labels}
		case right.typ == vScalar:
			left = value{typ: vVector, labels: left.labels}
		default:
			left = p.vectorMatch(op.text, left, right, on, onSet, ignoring, ignSet, include, groupLeft, groupRight, boolMod)
		}
	}
}

// vectorMatch checks a vector-vector operation and returns its result.
func (p *qparser) vectorMatch(op string, l, r value, on []string, onSet bool, ignoring []string, ignSet bool,
	include []string, groupLeft, groupRight, _ bool) value {
	for _, x := range on {
		if !l.labels[x] || !r.labels[x] {
			p.problem("on(%s): label %s is not on both sides of %s (left %v, right %v)", strings.Join(on, ","), x, op,
				sortedKeys(l.labels), sortedKeys(r.labels))
		}
	}
	for _, x := range ignoring {
		if !l.labels[x] && !r.labels[x] {
			p.problem("ignoring(%s): label %s is on neither side of %s", strings.Join(ignoring, ","), x, op)
		}
	}
	if op == "or" {
		out := map[string]bool{}
		for k := range l.labels {
			if r.labels[k] {
				out[k] = true
			}
		}
		return value{typ: vVector, labels: out}
	}
	// The labels the two sides are matched on must be the same set, or no
	// series ever matches.
	match := func(ls map[string]bool) map[string]bool {
		out := map[string]bool{}
		for k := range ls {
			switch {
			case onSet && slices.Contains(on, k):
				out[k] = true
			case !onSet && !(ignSet && slices.Contains(ignoring, k)):
				out[k] = true
			}
		}
		return out
	}
	lm, rm := match(l.labels), match(r.labels)
	if !groupLeft && !groupRight && !sameSet(lm, rm) {
		p.problem("%s matches series on labels %v on the left and %v on the right: no series would match (use on()/ignoring() or aggregate both sides alike)",
			op, sortedKeys(lm), sortedKeys(rm))
	}
	switch {
	case groupLeft:
		out := copySet(l.labels)
		for _, x := range include {
			if !r.labels[x] {
				p.problem("group_left(%s): label %s is not on the right side", strings.Join(include, ","), x)
			}
			out[x] = true
		}
		return value{typ: vVector, labels: out}
	case groupRight:
		out := copySet(r.labels)
		for _, x := range include {
			if !l.labels[x] {
				p.problem("group_right(%s): label %s is not on the left side", strings.Join(include, ","), x)
			}
			out[x] = true
		}
		return value{typ: vVector, labels: out}
	case op == "and" || op == "unless":
		return value{typ: vVector, labels: l.labels}
	}
	return value{typ: vVector, labels: lm}
}

func (p *qparser) parseUnary() (value, error) {
	if t := p.peek(); t.kind == tOp && (t.text == "-" || t.text == "+") {
		p.next()
		v, err := p.parseUnary()
		if err != nil {
			return value{}, err
		}
		p.consume(v, "unary "+t.text)
		if v.typ == vScalar {
			v.num = -v.num
		}
		v.sel, v.unrated = nil, ""
		return v, nil
	}
	v, err := p.parsePrimary()
	if err != nil {
		return value{}, err
	}
	return p.parsePostfix(v)
}

// parsePostfix reads ranges, subqueries, offset and @ after a primary.
func (p *qparser) parsePostfix(v value) (value, error) {
	for {
		switch {
		case p.peek().kind == tPunct && p.peek().text == "[":
			p.next()
			if err := p.duration(); err != nil {
				return value{}, err
			}
			subquery := false
			if p.accept(tPunct, ":") {
				subquery = true
				if !(p.peek().kind == tPunct && p.peek().text == "]") {
					if err := p.duration(); err != nil {
						return value{}, err
					}
				}
			}
			if err := p.expect(tPunct, "]"); err != nil {
				return value{}, err
			}
			if v.typ != vVector {
				return value{}, fmt.Errorf("range on a %s", v.typ)
			}
			if !subquery && v.sel == nil {
				p.problem("a range [..] needs a selector; use a subquery [range:step] on an expression")
			}
			if subquery {
				p.consume(v, "a subquery")
				v.sel, v.unrated = nil, ""
			}
			v.typ = vRange
		case p.accept(tIdent, "offset"):
			p.accept(tOp, "-")
			if err := p.duration(); err != nil {
				return value{}, err
			}
		case p.accept(tPunct, "@"):
			t := p.next()
			if t.kind == tIdent && (t.text == "start" || t.text == "end") {
				if err := p.expect(tPunct, "("); err != nil {
					return value{}, err
				}
				if err := p.expect(tPunct, ")"); err != nil {
					return value{}, err
				}
			} else if t.kind != tNumber && t.kind != tVar {
				return value{}, fmt.Errorf("bad @ modifier at %d", t.pos)
			}
		default:
			return v, nil
		}
	}
}

var durationRE = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)

// duration reads a duration literal or a Grafana variable ($__rate_interval).
func (p *qparser) duration() error {
	t := p.next()
	switch {
	case t.kind == tVar:
		return nil
	case t.kind == tNumber && durationRE.MatchString(t.text):
		return nil
	}
	return fmt.Errorf("bad duration %q at %d", t.text, t.pos)
}

// labelList reads ( label, ... ).
func (p *qparser) labelList() ([]string, error) {
	if err := p.expect(tPunct, "("); err != nil {
		return nil, err
	}
	var out []string
	for !p.accept(tPunct, ")") {
		t := p.next()
		if t.kind != tIdent {
			return nil, fmt.Errorf("want a label name at %d, got %q", t.pos, t.text)
		}
		out = append(out, t.text)
		if !p.accept(tPunct, ",") {
			if err := p.expect(tPunct, ")"); err != nil {
				return nil, err
			}
			break
		}
	}
	return out, nil
}

var aggregations = map[string]bool{
	"sum": true, "avg": true, "min": true, "max": true, "count": true, "group": true, "stddev": true, "stdvar": true,
	"topk": true, "bottomk": true, "quantile": true, "count_values": true, "limitk": true, "limit_ratio": true,
}

// Aggregations whose first argument is a parameter.
var aggregationParam = map[string]bool{
	"topk": true, "bottomk": true, "quantile": true, "count_values": true, "limitk": true, "limit_ratio": true,
}

func (p *qparser) parsePrimary() (value, error) {
	t := p.peek()
	switch t.kind {
	case tNumber:
		p.next()
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return value{}, fmt.Errorf("bad number %q at %d", t.text, t.pos)
		}
		return value{typ: vScalar, num: f}, nil
	case tVar:
		p.next()
		return value{typ: vScalar}, nil
	case tString:
		p.next()
		return value{typ: vString, str: t.text}, nil
	case tPunct:
		switch t.text {
		case "(":
			p.next()
			v, err := p.parseExpr(0)
			if err != nil {
				return value{}, err
			}
			if err := p.expect(tPunct, ")"); err != nil {
				return value{}, err
			}
			v.sel = nil // (x)[5m] is a subquery, not a range selector
			return v, nil
		case "{":
			return p.parseSelector("")
		}
	case tIdent:
		p.next()
		next := p.peek()
		if aggregations[t.text] && ((next.kind == tPunct && next.text == "(") || (next.kind == tIdent && (next.text == "by" || next.text == "without"))) {
			return p.parseAggregation(t.text)
		}
		if next.kind == tPunct && next.text == "(" {
			return p.parseCall(t.text)
		}
		return p.parseSelector(t.text)
	}
	return value{}, fmt.Errorf("unexpected %q at %d", t.text, t.pos)
}

func (p *qparser) grouping() (mode string, labels []string, err error) {
	if p.accept(tIdent, "by") {
		labels, err = p.labelList()
		return "by", labels, err
	}
	if p.accept(tIdent, "without") {
		labels, err = p.labelList()
		return "without", labels, err
	}
	return "", nil, nil
}

func (p *qparser) parseAggregation(op string) (value, error) {
	mode, labels, err := p.grouping()
	if err != nil {
		return value{}, err
	}
	if err := p.expect(tPunct, "("); err != nil {
		return value{}, err
	}
	var param value
	if aggregationParam[op] {
		if param, err = p.parseExpr(0); err != nil {
			return value{}, err
		}
		if err := p.expect(tPunct, ","); err != nil {
			return value{}, err
		}
	}
	arg, err := p.parseExpr(0)
	if err != nil {
		return value{}, err
	}
	if err := p.expect(tPunct, ")"); err != nil {
		return value{}, err
	}
	if mode == "" {
		if mode, labels, err = p.grouping(); err != nil {
			return value{}, err
		}
	}
	p.consume(arg, op+"()")
	if arg.typ != vVector {
		p.problem("%s() over a %s", op, arg.typ)
	}
	for _, l := range labels {
		if !arg.labels[l] {
			p.problem("%s %s (%s): label %s is not on the aggregated series (they carry %v)", op, mode, strings.Join(labels, ", "), l, sortedKeys(arg.labels))
		}
	}
	out := map[string]bool{}
	switch {
	case op == "topk" || op == "bottomk" || op == "limitk" || op == "limit_ratio":
		out = copySet(arg.labels)
	case mode == "by":
		for _, l := range labels {
			out[l] = true
		}
	case mode == "without":
		out = copySet(arg.labels)
		for _, l := range labels {
			delete(out, l)
		}
	}
	if op == "count_values" {
		if param.typ != vString || param.str == "" {
			p.problem("count_values needs a label name string")
		}
		out[param.str] = true
	}
	return value{typ: vVector, labels: out}, nil
}

// Functions by what they take and give.
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

func (p *qparser) parseCall(name string) (value, error) {
	if err := p.expect(tPunct, "("); err != nil {
		return value{}, err
	}
	var args []value
	for !p.accept(tPunct, ")") {
		a, err := p.parseExpr(0)
		if err != nil {
			return value{}, err
		}
		args = append(args, a)
		if !p.accept(tPunct, ",") {
			if err := p.expect(tPunct, ")"); err != nil {
				return value{}, err
			}
			break
		}
	}
	nargs := func(min, max int) bool {
		if len(args) < min || len(args) > max {
			p.problem("%s() takes %d to %d arguments, got %d", name, min, max, len(args))
			return false
		}
		return true
	}
	switch {
	case rateFuncs[name]:
		if !nargs(1, 1) {
			return value{typ: vVector}, nil
		}
		a := args[0]
		if a.typ != vRange {
			p.problem("%s() needs a range vector, got a %s", name, a.typ)
		}
		if a.sel != nil && a.sel.known && a.unrated == "" {
			p.problem("%s() over %s, a %s: %s applies to counters (a gauge is shown as it is)", name, a.sel.series, a.sel.base.Kind, name)
		}
		return value{typ: vVector, labels: a.labels}, nil
	case rangeFuncs[name]:
		min, max := 1, 1
		switch name {
		case "quantile_over_time":
			min, max = 2, 2
		case "predict_linear":
			min, max = 2, 2
		}
		if !nargs(min, max) {
			return value{typ: vVector}, nil
		}
		r := args[len(args)-1]
		if name == "predict_linear" {
			r = args[0]
		}
		p.consume(r, name+"()")
		if r.typ != vRange {
			p.problem("%s() needs a range vector, got a %s", name, r.typ)
		}
		return value{typ: vVector, labels: r.labels}, nil
	case name == "histogram_quantile":
		if !nargs(2, 2) {
			return value{typ: vVector}, nil
		}
		q, v := args[0], args[1]
		p.consume(v, "histogram_quantile()")
		if q.typ != vScalar {
			p.problem("histogram_quantile's first argument must be a scalar")
		} else if q.num < 0 || q.num > 1 {
			p.problem("histogram_quantile(%v, ...): the quantile is outside [0, 1]", q.num)
		}
		if v.typ != vVector || !v.labels["le"] {
			p.problem("histogram_quantile over series without the le label (aggregate with sum by (le, ...) (rate(x_bucket[..])))")
		}
		out := copySet(v.labels)
		delete(out, "le")
		return value{typ: vVector, labels: out}, nil
	case vectorFuncs[name]:
		if !nargs(1, 3) {
			return value{typ: vVector}, nil
		}
		p.consume(args[0], name+"()")
		if args[0].typ != vVector {
			p.problem("%s() needs an instant vector, got a %s", name, args[0].typ)
		}
		return value{typ: vVector, labels: args[0].labels}, nil
	case name == "label_replace":
		if !nargs(5, 5) {
			return value{typ: vVector}, nil
		}
		p.consume(args[0], name+"()")
		out := copySet(args[0].labels)
		if src := args[3].str; src != "" && !out[src] {
			p.problem("label_replace: source label %s is not on the series", src)
		}
		out[args[1].str] = true
		return value{typ: vVector, labels: out}, nil
	case name == "absent":
		if nargs(1, 1) {
			p.consume(args[0], name+"()")
		}
		return value{typ: vVector, labels: map[string]bool{}}, nil
	case name == "vector":
		nargs(1, 1)
		return value{typ: vVector, labels: map[string]bool{}}, nil
	case name == "scalar":
		if nargs(1, 1) {
			p.consume(args[0], name+"()")
		}
		return value{typ: vScalar}, nil
	case name == "time":
		nargs(0, 0)
		return value{typ: vScalar}, nil
	}
	p.problem("unknown or unsupported function %s()", name)
	return value{typ: vVector}, nil
}

func (p *qparser) parseSelector(name string) (value, error) {
	var matchers []matcher
	if p.accept(tPunct, "{") {
		for !p.accept(tPunct, "}") {
			l := p.next()
			if l.kind != tIdent {
				return value{}, fmt.Errorf("want a label name at %d, got %q", l.pos, l.text)
			}
			op := p.next()
			if op.kind != tOp || (op.text != "=" && op.text != "!=" && op.text != "=~" && op.text != "!~") {
				return value{}, fmt.Errorf("want a matcher operator at %d, got %q", op.pos, op.text)
			}
			s := p.next()
			if s.kind != tString {
				return value{}, fmt.Errorf("want a string at %d, got %q", s.pos, s.text)
			}
			switch {
			case l.text == "__name__" && op.text == "=" && name == "":
				name = s.text
			case l.text != "__name__":
				matchers = append(matchers, matcher{Label: l.text, Op: op.text, Value: s.text})
			}
			if !p.accept(tPunct, ",") {
				if err := p.expect(tPunct, "}"); err != nil {
					return value{}, err
				}
				break
			}
		}
	}
	if name == "" {
		p.problem("a selector without a metric name: every query must name its metrics")
		return value{typ: vVector, labels: map[string]bool{}}, nil
	}
	sel, labels, unrated := p.resolve(name)
	for _, m := range matchers {
		if sel.known && !labels[m.Label] {
			p.problem("%s has no label %s (it has %v)", name, m.Label, sortedKeys(labels))
		}
	}
	p.selectors = append(p.selectors, selectorUse{Series: name, Matchers: matchers})
	return value{typ: vVector, labels: labels, sel: sel, unrated: unrated}, nil
}

// resolve finds the registry metric behind a series name: the name itself,
// or a histogram's _bucket, _sum or _count (a summary's _sum or _count).
func (p *qparser) resolve(series string) (*selector, map[string]bool, string) {
	sel := &selector{series: series}
	labels := map[string]bool{}
	for _, l := range p.cat.TargetLabels {
		labels[l] = true
	}
	m, ok := p.cat.Metrics[series]
	suffix := ""
	if ok && (m.Kind == kindHistogram || m.Kind == kindSummary) {
		p.problem("%s is a %s: its series are %[1]s_bucket, %[1]s_sum and %[1]s_count", series, m.Kind)
	}
	if !ok {
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			base, found := strings.CutSuffix(series, s)
			if !found {
				continue
			}
			if bm, bok := p.cat.Metrics[base]; bok && (bm.Kind == kindHistogram || (bm.Kind == kindSummary && s != "_bucket")) {
				m, ok, suffix = bm, true, s
			}
		}
	}
	if !ok {
		p.problem("metric %s is not in the reference server's registry", series)
		return sel, labels, ""
	}
	sel.base, sel.known = m, true
	p.metrics[m.Name] = true
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

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func copySet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
