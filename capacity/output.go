package capacity

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

func fv(p *float64, format string) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf(format, *p)
}

func stepLine(st *Step) string {
	verdict := "held"
	if !st.Held {
		verdict = "BROKE (" + st.Limit + "): " + strings.Join(st.Broken, "; ")
	}
	started := ""
	if st.BacklogAtStartS != nil {
		started = fmt.Sprintf(" (started behind a backlog: group %s %.1fs)", st.BacklogGroup, *st.BacklogAtStartS)
	}
	return fmt.Sprintf("step %d %-6s offered %.0f/s%s: acked %s/s, ack p50 %s ms p99 %s ms, errors %s%%, lag %s s: %s",
		st.Index, st.Phase, st.OfferedPerSec, started, fv(st.AckedPerSec, "%.0f"), fv(st.AckP50Ms, "%.1f"), fv(st.AckP99Ms, "%.1f"),
		fv(pct(st.ErrorRate), "%.3f"), fv(st.LagS, "%.2f"), verdict)
}

func pct(p *float64) *float64 {
	if p == nil {
		return nil
	}
	return ptr(*p * 100)
}

// GeneratorShareLine says how much of the machine's CPU the generator
// used in a measured window, and labels a share over half.
func GeneratorShareLine(share *float64) string {
	if share == nil {
		return "generator's share of the machine's CPU during the measured window: unknown"
	}
	s := fmt.Sprintf("generator used %.0f%% of the machine's CPU during the measured window", *share*100)
	if *share > 0.5 {
		s += ": more than half, the target had less than half of the machine"
	}
	return s
}

// WriteTable writes the steps and the answer as text.
func (r *Result) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "capacity of %s within %s (warm-up %gs not counted, %gs measured per step)\n", r.Target, r.SLO, r.WarmUpS, r.StepS)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	hdr := "step\tphase\toffered/s\tacked/s\tack p50 ms\tack p99 ms\tservice p99 ms\tlate %\terrors %\tunknown %\tlag s\tvalid\tgenerator %cpu\t"
	for _, p := range r.Procs {
		hdr += p.Name + " cores\t" + p.Name + " µs/msg\t"
	}
	fmt.Fprintln(tw, hdr+"verdict\t")
	for _, st := range r.Steps {
		valid := "-"
		if st.Valid != nil {
			valid = fmt.Sprint(*st.Valid)
		}
		line := fmt.Sprintf("%d\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t", st.Index, st.Phase, st.OfferedPerSec, fv(st.AckedPerSec, "%.0f"),
			fv(st.AckP50Ms, "%.1f"), fv(st.AckP99Ms, "%.1f"), fv(st.ServiceP99Ms, "%.1f"), fv(pct(st.LateFraction), "%.2f"), fv(pct(st.ErrorRate), "%.3f"),
			fv(pct(st.UnknownRate), "%.3f"), fv(st.LagS, "%.2f"), valid, fv(pct(st.GeneratorCPUShare), "%.0f"))
		for _, pc := range st.CPU {
			line += fv(pc.Cores, "%.2f") + "\t" + fv(pc.USPerMsg, "%.0f") + "\t"
		}
		v := "held"
		if !st.Held {
			v = "broke (" + st.Limit + ")"
		}
		fmt.Fprintln(tw, line+v+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, st := range r.Steps {
		if !st.Held {
			fmt.Fprintf(&b, "  step %d: %s\n", st.Index, strings.Join(st.Broken, "; "))
		}
		if st.GeneratorOverHalf {
			fmt.Fprintf(&b, "  step %d: %s\n", st.Index, GeneratorShareLine(st.GeneratorCPUShare))
		}
		for _, e := range st.Errors {
			fmt.Fprintf(&b, "  step %d error: %s\n", st.Index, e)
		}
	}
	fmt.Fprintf(&b, "answer: %s\n", r.Answer)
	if r.Knee != nil {
		fmt.Fprintf(&b, "knee: %.0f sends/s (the ACK p99 more than doubled above it)\n", *r.Knee)
	}
	if len(r.Cost) > 0 {
		names := make([]string, 0, len(r.Cost))
		for n := range r.Cost {
			names = append(names, n)
		}
		sort.Strings(names)
		var parts []string
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s %.0f", n, r.Cost[n]))
		}
		fmt.Fprintf(&b, "CPU-µs per ACKed message at the sustainable rate: %s\n", strings.Join(parts, ", "))
	}
	for _, m := range r.Marginal {
		fmt.Fprintf(&b, "marginal cost %s: %s CPU-µs per extra msg/s, %s cores idle (R² %s over %d steps)%s\n", m.Name, fv(m.USPerMsg, "%.0f"), fv(m.IdleCores, "%.2f"),
			fv(m.R2, "%.2f"), m.Steps, noteSuffix(m.Note))
	}
	fmt.Fprintf(&b, "machine: %d CPUs; %s\n", r.Machine.CPUs, r.Machine.Note)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "error: %s\n", e)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// chart geometry (the legend is a column right of the plot)
const (
	cw, ch         = 860.0, 300.0
	padL, padR     = 72.0, 240.0
	padT, padB     = 20.0, 40.0
	plotW, plotH   = cw - padL - padR, ch - padT - padB
	maxChartPoints = 200
)

// xy is one step's point; Broke draws it hollow (the step broke the SLO),
// Gap ends the line before it (a step between had no figure: a line
// across it would draw a value nobody measured).
type xy struct {
	X, Y       float64
	Broke, Gap bool
}

type svgSeries struct {
	Name, Color string
	Pts         []xy
}

// svgChart renders a rate-axis chart with vertical markers (knee,
// sustainable) and an optional horizontal limit.
func svgChart(title, yLabel string, series []svgSeries, marks map[string]float64, limit *float64, limitLabel string) template.HTML {
	maxX, maxY := 1.0, 1.0
	for _, s := range series {
		for _, p := range s.Pts {
			maxX, maxY = math.Max(maxX, p.X), math.Max(maxY, p.Y)
		}
	}
	for _, v := range marks {
		maxX = math.Max(maxX, v)
	}
	if limit != nil {
		maxY = math.Max(maxY, *limit)
	}
	maxX, maxY = niceMax(maxX*1.02), niceMax(maxY*1.05)
	px := func(x float64) float64 { return padL + x/maxX*plotW }
	py := func(y float64) float64 { return padT + plotH - y/maxY*plotH }
	var b strings.Builder
	e := template.HTMLEscapeString
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s">`, cw, ch, cw, ch, e(title))
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="#fff" stroke="#999"/>`, padL, padT, plotW, plotH)
	for i := 0; i <= 4; i++ {
		y, x := maxY*float64(i)/4, maxX*float64(i)/4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`, padL, py(y), padL+plotW, py(y))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="end">%s</text>`, padL-4, py(y)+4, tick(y))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%.0f</text>`, px(x), padT+plotH+16, x)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12" text-anchor="middle">offered rate (sends/s)</text>`, padL+plotW/2, ch-6)
	fmt.Fprintf(&b, `<text x="12" y="%.1f" font-size="12" text-anchor="middle" transform="rotate(-90 12 %.1f)">%s</text>`, padT+plotH/2, padT+plotH/2, e(yLabel))
	if limit != nil {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#c00" stroke-dasharray="6 3"/>`, padL, py(*limit), padL+plotW, py(*limit))
	}
	names := make([]string, 0, len(marks))
	for n := range marks {
		names = append(names, n)
	}
	sort.Strings(names)
	legendX := padL + plotW + 12
	legend := 0
	legendLine := func(color, text string) {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" fill="%s">%s</text>`, legendX, padT+10+float64(legend)*14, color, e(text))
		legend++
	}
	for _, n := range names {
		x := px(marks[n])
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#060" stroke-dasharray="3 3"/><text x="%.1f" y="%.1f" font-size="11" fill="#060" text-anchor="end" transform="rotate(-90 %.1f %.1f)">%s %.0f/s</text>`,
			x, padT, x, padT+plotH, x-3, padT+4, x-3, padT+4, e(n), marks[n])
	}
	for _, s := range series {
		sort.SliceStable(s.Pts, func(i, j int) bool { return s.Pts[i].X < s.Pts[j].X })
		var run []string
		flush := func() {
			if len(run) > 1 {
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, s.Color, strings.Join(run, " "))
			}
			run = run[:0]
		}
		for _, p := range s.Pts {
			if p.Gap {
				flush()
			}
			run = append(run, fmt.Sprintf("%.1f,%.1f", px(p.X), py(p.Y)))
		}
		flush()
		for _, p := range s.Pts {
			fill, what := s.Color, "held"
			if p.Broke {
				fill, what = "#fff", "broke"
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s" stroke="%s" stroke-width="1.5"><title>%s: %.0f/s, %.4g (%s)</title></circle>`,
				px(p.X), py(p.Y), fill, s.Color, e(s.Name), p.X, p.Y, what)
		}
		legendLine(s.Color, s.Name)
	}
	if limit != nil {
		legendLine("#c00", "- - "+limitLabel)
	}
	legendLine("#555", "filled: the step held; hollow: it broke")
	legendLine("#555", "no line across a step without a figure")
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text above is escaped
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// niceMax rounds v up to a round multiple of a power of ten, so that the
// four grid steps fall on round values.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// tick formats an axis value.
func tick(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// charts builds the two capacity curves.
func (r *Result) charts() []template.HTML {
	marks := map[string]float64{}
	if r.Knee != nil {
		marks["knee"] = *r.Knee
	}
	if r.Sustainable != nil {
		marks["sustainable"] = *r.Sustainable
	}
	p50, p99 := svgSeries{Name: "ACK p50 (ms)", Color: palette[0]}, svgSeries{Name: "ACK p99 (ms)", Color: palette[3]}
	cpu := map[string]*svgSeries{}
	var order []string
	for _, pc := range r.Procs {
		cpu[pc.Name] = &svgSeries{Name: pc.Name + " (cores)", Color: palette[len(order)%len(palette)]}
		order = append(order, pc.Name)
	}
	// In rate order, a series' point after a step where the series had no
	// figure starts a new line.
	steps := slices.Clone(r.Steps)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].OfferedPerSec < steps[j].OfferedPerSec })
	if len(steps) > maxChartPoints {
		steps = steps[:maxChartPoints]
	}
	latGap := false
	cpuGap := map[string]bool{}
	for _, st := range steps {
		if st.AckP99Ms != nil && st.AckP50Ms != nil {
			p99.Pts = append(p99.Pts, xy{X: st.OfferedPerSec, Y: *st.AckP99Ms, Broke: !st.Held, Gap: latGap})
			p50.Pts = append(p50.Pts, xy{X: st.OfferedPerSec, Y: *st.AckP50Ms, Broke: !st.Held, Gap: latGap})
			latGap = false
		} else {
			latGap = true
		}
		for _, pc := range st.CPU {
			s, ok := cpu[pc.Name]
			if !ok {
				continue
			}
			if pc.Cores == nil {
				cpuGap[pc.Name] = true
				continue
			}
			s.Pts = append(s.Pts, xy{X: st.OfferedPerSec, Y: *pc.Cores, Broke: !st.Held, Gap: cpuGap[pc.Name]})
			cpuGap[pc.Name] = false
		}
	}
	var lim *float64
	if r.sloAck() > 0 {
		lim = ptr(r.sloAck())
	}
	out := []template.HTML{svgChart("rate vs ACK latency", "ACK latency from intended time (ms)", []svgSeries{p50, p99}, marks, lim, fmt.Sprintf("SLO ack_p99 (%.0f ms)", r.sloAck()))}
	var cs []svgSeries
	for _, n := range order {
		cs = append(cs, *cpu[n])
	}
	out = append(out, svgChart("rate vs CPU", "CPU (cores busy)", cs, marks, ptr(float64(r.Machine.CPUs)), fmt.Sprintf("%d CPUs of the machine", r.Machine.CPUs)))
	return out
}

// sloAck is the SLO's ack_p99 limit in ms (0: none).
func (r *Result) sloAck() float64 {
	o, err := ParseSLO(r.SLO)
	if err != nil || o.AckP99 == nil {
		return 0
	}
	return float64(*o.AckP99) / 1e6
}

var page = template.Must(template.New("capacity").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>imlab capacity: {{.R.Target}}</title>
<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f4f4f4}.bad{color:#b00}.ok{color:#060}
.answer{font-size:18px;margin:12px 0}.note{color:#555;font-size:13px}</style></head><body>
<h1>Capacity of {{.R.Target}}</h1>
<p class="answer">{{.R.Answer}}</p>
<p>SLO <code>{{.R.SLO}}</code>; rates {{printf "%.0f" .R.From}}..{{printf "%.0f" .R.To}}/s; each step {{.R.WarmUpS}}s warm-up (not counted) + {{.R.StepS}}s measured; {{len .R.Steps}} steps in {{printf "%.0f" .R.Seconds}}s.
{{with .R.Ceiling}}Generator ceiling (no-op endpoint, same client): {{printf "%.0f" .PerSec}} sends/s.{{end}}
{{with .Knee}}Knee: {{.}}/s.{{end}}</p>
<p class="note">Machine: {{.R.Machine.CPUs}} CPUs; {{.R.Machine.Note}}.</p>
{{range .Charts}}<div>{{.}}</div>{{end}}
{{with .Undrawn}}<p class="note">Not drawn (no figure: unknown, never 0): {{.}}.</p>{{end}}
<h2>Steps</h2>
<table><tr><th>#</th><th>phase</th><th>offered/s</th><th>acked/s</th><th>ack p50 ms</th><th>ack p99 ms</th><th>service p99 ms</th><th>errors %</th><th>unknown %</th><th>lag s</th><th>valid</th><th>generator % of the machine's CPU</th><th>verdict</th></tr>
{{range .Rows}}<tr><td>{{.Index}}</td><td>{{.Phase}}</td><td>{{.Offered}}</td><td>{{.Acked}}</td><td>{{.P50}}</td><td>{{.P99}}</td><td>{{.Svc}}</td><td>{{.Err}}</td><td>{{.Unk}}</td><td>{{.Lag}}</td><td>{{.Valid}}</td><td{{if .GenOverHalf}} class="bad"{{end}}>{{.GenShare}}{{if .GenOverHalf}} (more than half: the target had less than half of the machine){{end}}</td><td class="{{if .Held}}ok{{else}}bad{{end}}" style="text-align:left">{{.Verdict}}</td></tr>
{{end}}</table>
<h2>Marginal cost (what one more message per second costs)</h2>
<p class="note">Least squares of each process's cores against ACKed/s over every step that ran its whole window: the slope is CPU-µs per additional message, the intercept the cores it uses with no load. {{.R.Machine.Note}}.</p>
<table><tr><th>process</th><th>µs per extra msg</th><th>idle cores</th><th>R²</th><th>steps</th><th>note</th></tr>
{{range .Marginal}}<tr><td>{{.Name}}</td><td>{{.PerMsg}}</td><td>{{.Idle}}</td><td>{{.R2}}</td><td>{{.Steps}}</td><td style="text-align:left">{{.Note}}</td></tr>
{{end}}</table>
<h2>Cost per message at each step</h2>
<p class="note">CPU-µs per ACKed send and per inbox row, from /proc/PID/stat over each step's measured window. {{.R.Machine.Note}}.</p>
<table><tr><th>#</th><th>offered/s</th><th>process</th><th>pid</th><th>cores</th><th>µs/msg</th><th>µs/row</th><th>note</th></tr>
{{range .Costs}}<tr><td>{{.Index}}</td><td>{{.Offered}}</td><td>{{.Name}}</td><td>{{.PID}}</td><td>{{.Cores}}</td><td>{{.PerMsg}}</td><td>{{.PerRow}}</td><td style="text-align:left">{{.Err}}</td></tr>
{{end}}</table>
{{range .R.Notes}}<p>note: {{.}}</p>{{end}}
{{range .R.Errors}}<p class="bad">error: {{.}}</p>{{end}}
</body></html>
`))

type htmlRow struct {
	Index                                          int
	Phase, Offered, Acked, P50, P99, Svc, Err, Unk string
	Lag, Valid, Verdict                            string
	GenShare                                       string
	GenOverHalf                                    bool
	Held                                           bool
}

type htmlMarginal struct {
	Name, PerMsg, Idle, R2 string
	Steps                  int
	Note                   string
}

type htmlCost struct {
	Index                      int
	Offered, Name              string
	PID                        int
	Cores, PerMsg, PerRow, Err string
}

// WriteHTML writes the self-contained report page.
func (r *Result) WriteHTML(w io.Writer) error {
	d := struct {
		R        *Result
		Knee     string
		Charts   []template.HTML
		Rows     []htmlRow
		Costs    []htmlCost
		Marginal []htmlMarginal
		Undrawn  string
	}{R: r, Knee: fv(r.Knee, "%.0f"), Charts: r.charts(), Undrawn: undrawn(r)}
	if r.Knee == nil {
		d.Knee = ""
	}
	for _, m := range r.Marginal {
		d.Marginal = append(d.Marginal, htmlMarginal{Name: m.Name, PerMsg: fv(m.USPerMsg, "%.0f"), Idle: fv(m.IdleCores, "%.2f"),
			R2: fv(m.R2, "%.2f"), Steps: m.Steps, Note: m.Note})
	}
	for _, st := range r.Steps {
		valid := "-"
		if st.Valid != nil {
			valid = fmt.Sprint(*st.Valid)
		}
		v := "held"
		if !st.Held {
			v = "broke (" + st.Limit + "): " + strings.Join(st.Broken, "; ")
		}
		d.Rows = append(d.Rows, htmlRow{Index: st.Index, Phase: st.Phase, Offered: fmt.Sprintf("%.0f", st.OfferedPerSec), Acked: fv(st.AckedPerSec, "%.0f"),
			P50: fv(st.AckP50Ms, "%.1f"), P99: fv(st.AckP99Ms, "%.1f"), Svc: fv(st.ServiceP99Ms, "%.1f"), Err: fv(pct(st.ErrorRate), "%.3f"),
			Unk: fv(pct(st.UnknownRate), "%.3f"), Lag: fv(st.LagS, "%.2f"), Valid: valid, Verdict: v, Held: st.Held,
			GenShare: fv(pct(st.GeneratorCPUShare), "%.0f"), GenOverHalf: st.GeneratorOverHalf})
		for _, pc := range st.CPU {
			d.Costs = append(d.Costs, htmlCost{Index: st.Index, Offered: fmt.Sprintf("%.0f", st.OfferedPerSec), Name: pc.Name, PID: pc.PID,
				Cores: fv(pc.Cores, "%.2f"), PerMsg: fv(pc.USPerMsg, "%.0f"), PerRow: fv(pc.USPerRow, "%.0f"), Err: pc.Err})
		}
	}
	if err := page.Execute(w, d); err != nil {
		return fmt.Errorf("capacity: report: %w", err)
	}
	return nil
}

// undrawn names the steps and figures the charts leave out.
func undrawn(r *Result) string {
	var out []string
	for _, st := range r.Steps {
		if st.AckP99Ms == nil {
			why := "no ACK measured"
			if st.StoppedEarly != "" {
				why = "stopped early"
			}
			out = append(out, fmt.Sprintf("step %d at %.0f/s latency (%s)", st.Index, st.OfferedPerSec, why))
		}
		var cpu []string
		for _, pc := range st.CPU {
			if pc.Cores == nil {
				cpu = append(cpu, pc.Name)
			}
		}
		if len(cpu) > 0 {
			out = append(out, fmt.Sprintf("step %d at %.0f/s CPU of %s", st.Index, st.OfferedPerSec, strings.Join(cpu, ", ")))
		}
	}
	return strings.Join(out, "; ")
}

func noteSuffix(n string) string {
	if n == "" {
		return ""
	}
	return " (" + n + ")"
}
