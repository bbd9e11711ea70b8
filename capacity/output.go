package capacity

import (
	"cmp"
	"fmt"
	"html/template"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"imlab/report"
)

func fv(p *float64, format string) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf(format, *p)
}

// verdict is a step's verdict: held, or BROKE with whose limit it was
// (both when the server's figures broke it and the generator fell behind
// its schedule) and, when long, why.
func verdict(st *Step, long bool) string {
	if st.Held {
		return "held"
	}
	v := "BROKE (" + st.Limit
	if st.GeneratorBehind {
		v += ", and the generator fell behind"
	}
	v += ")"
	if !long {
		return strings.ToLower(v[:5]) + v[5:]
	}
	return v + ": " + strings.Join(st.Broken, "; ")
}

// errorsCell is the step's error percentage, said to be of the sends
// that started when some never did (those have no outcome).
func errorsCell(st *Step) string { return fv(pct(st.ErrorRate), "%.3f") + ofStarted(st) }

// ofStarted is " of started" when the step's error rate is of the sends
// started, some of its schedule never having started; "" otherwise.
func ofStarted(st *Step) string {
	if st.ErrorRate != nil && st.Missed+st.NotStarted > 0 {
		return " of started"
	}
	return ""
}

func stepLine(st *Step) string {
	errs := known(pct(st.ErrorRate), "%.3f%%")
	if n := st.Missed + st.NotStarted; n > 0 && st.ErrorRate != nil {
		errs += fmt.Sprintf(" of the %d sends started in the window (%d of the step never started", st.Attempts, n)
		if st.NotStarted > 0 {
			errs += fmt.Sprintf(", %d of them as it was stopped early", st.NotStarted)
		}
		errs += ")"
	}
	started := ""
	if st.BacklogAtStartS != nil {
		started = fmt.Sprintf(" (started behind a backlog: group %s %.1fs)", st.BacklogGroup, *st.BacklogAtStartS)
	}
	lag := "unknown (no complete lag poll: no queue to poll, or every poll failed)"
	if st.LagS != nil {
		lag = fmt.Sprintf("%.2f s", *st.LagS)
	}
	return fmt.Sprintf("step %d %-6s offered %.0f/s%s: acked %s, ack p50 %s p99 %s, errors %s, lag %s: %s",
		st.Index, st.Phase, st.OfferedPerSec, started, known(st.AckedPerSec, "%.0f/s"), known(st.AckP50Ms, "%.1f ms"), known(st.AckP99Ms, "%.1f ms"),
		errs, lag, verdict(st, true))
}

// known is a step line's figure, or "unknown" when it was not measured
// (never a bare "-" or 0).
func known(p *float64, format string) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprintf(format, *p)
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
	if r.Generator.GOMAXPROCS > 0 {
		fmt.Fprintln(&b, r.Generator)
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	hdr := "step\tphase\toffered/s\tacked/s\tack p50 ms\tack p99 ms\tservice p99 ms\tlate %\tsend delay p99 ms\terrors %\tunknown %\tlag s\tvalid\tgenerator %cpu\t"
	for _, p := range r.Procs {
		hdr += p.Name + " cores\t" + p.Name + " µs/msg\t"
	}
	fmt.Fprintln(tw, hdr+"verdict\t")
	for _, st := range r.Steps {
		valid := "-"
		if st.Valid != nil {
			valid = fmt.Sprint(*st.Valid)
		}
		line := fmt.Sprintf("%d\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t", st.Index, st.Phase, st.OfferedPerSec, fv(st.AckedPerSec, "%.0f"),
			fv(st.AckP50Ms, "%.1f"), fv(st.AckP99Ms, "%.1f"), fv(st.ServiceP99Ms, "%.1f"), fv(pct(st.LateFraction), "%.2f"), fv(st.SendDelayP99Ms, "%.1f"), errorsCell(st),
			fv(pct(st.UnknownRate), "%.3f"), fv(st.LagS, "%.2f"), valid, fv(pct(st.GeneratorCPUShare), "%.0f"))
		for _, pc := range st.CPU {
			line += fv(pc.Cores, "%.2f") + "\t" + fv(pc.USPerMsg, "%.0f") + "\t"
		}
		fmt.Fprintln(tw, line+verdict(st, false)+"\t")
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
		if st.Busy != "" {
			fmt.Fprintf(&b, "  step %d: %s\n", st.Index, st.Busy)
		}
		for _, e := range st.Errors {
			fmt.Fprintf(&b, "  step %d error: %s\n", st.Index, e)
		}
	}
	fmt.Fprintf(&b, "answer: %s\n", r.Answer)
	if r.Knee != nil {
		fmt.Fprintf(&b, "knee: %.0f sends/s (%s)\n", *r.Knee, cmp.Or(r.KneeRule, kneeRule))
	}
	if len(r.Cost) > 0 {
		fmt.Fprintf(&b, "CPU-µs per ACKed message at the sustainable rate: %s\n", CostText(r.Cost))
	}
	for _, m := range r.Marginal {
		fmt.Fprintf(&b, "marginal cost %s: %s CPU-µs per extra msg/s, %s cores idle (R² %s over %d steps)%s\n", m.Name, fv(m.USPerMsg, "%.0f"), fv(m.IdleCores, "%.2f"),
			fv(m.R2, "%.2f"), m.Steps, noteSuffix(m.Note))
	}
	fmt.Fprintf(&b, "machine: %d CPUs; %s\n", r.Machine.CPUs, r.Machine.Note)
	fmt.Fprintf(&b, "load average: %s\n", r.LoadAverage)
	if r.Machine.Busy != "" {
		fmt.Fprintf(&b, "%s\n", r.Machine.Busy)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "error: %s\n", e)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// kneeRule says the knee's rule for a result written before its
// knee_rule.
const kneeRule = "the highest rate that held below the first rate whose ACK p99 was more than twice the lowest rate's and above a quarter of the ACK limit"

// maxChartPoints bounds the steps a chart draws (in rate order).
const maxChartPoints = 200

// charts draws the two capacity curves with the report drawer: ACK p50
// and p99, and each watched process's cores, against the offered rate.
// A step broken draws its point open; a step without a figure is a gap
// in that series (never a 0); the knee and the sustainable rate are
// marks, the SLO's ack_p99 and the machine's CPUs limit lines.
func (r *Result) charts() ([]template.HTML, []string, error) {
	rate := &report.XAxis{Label: "offered rate", Unit: "sends/s"}
	var marks []report.Mark
	if r.Knee != nil {
		marks = append(marks, report.Mark{X: *r.Knee, Label: fmt.Sprintf("knee %.0f/s", *r.Knee)})
	}
	if r.Sustainable != nil {
		marks = append(marks, report.Mark{X: *r.Sustainable, Label: fmt.Sprintf("sustainable %.0f/s", *r.Sustainable)})
	}
	const broke = "the step broke the SLO"
	// A repeat step measures a rate again: its points are series of their
	// own, so that no line joins two steps at one rate (a vertical stroke
	// that read as a jump) and each legend's last value is one phase's.
	lat := report.Chart{Title: "rate vs ACK latency: ACK latency from the intended send time", Unit: "ms", XAxis: rate, Marks: marks, Hollow: broke,
		Series: []report.Series{{Name: "ACK p50", Dots: true, Slot: 1}, {Name: "ACK p99", Dots: true, Slot: 2},
			{Name: "ACK p50, repeat steps", Dots: true, Slot: 1}, {Name: "ACK p99, repeat steps", Dots: true, Slot: 2}}}
	if slo := r.sloAck(); slo > 0 {
		lat.Threshold, lat.ThresholdLabel = slo, "SLO ack_p99"
	}
	cpu := report.Chart{Title: "rate vs CPU: cores busy per process", Unit: "cores", XAxis: rate, Marks: marks, Hollow: broke,
		Threshold: float64(r.Machine.CPUs), ThresholdLabel: "CPUs of the machine"}
	idx := map[string]int{}
	for _, pc := range r.Procs {
		if _, ok := idx[pc.Name]; !ok {
			idx[pc.Name] = len(cpu.Series)
			slot := len(idx) // a process's repeat points in its own colour
			cpu.Series = append(cpu.Series, report.Series{Name: pc.Name + " (cores)", Dots: true, Slot: slot},
				report.Series{Name: pc.Name + " (cores, repeat steps)", Dots: true, Slot: slot})
		}
	}
	steps := slices.Clone(r.Steps)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].OfferedPerSec < steps[j].OfferedPerSec })
	if len(steps) > maxChartPoints {
		steps = steps[:maxChartPoints]
	}
	add := func(s *report.Series, st *Step, v *float64) {
		if v == nil {
			s.Gaps = append(s.Gaps, st.OfferedPerSec)
			return
		}
		s.Points = append(s.Points, report.Point{T: st.OfferedPerSec, V: *v, Hollow: !st.Held})
	}
	for _, st := range steps {
		twin := 0 // the series' repeat twin: the next (CPU) or two on (latency)
		if st.Phase == PhaseRepeat {
			twin = 1
		}
		add(&lat.Series[2*twin], st, st.AckP50Ms)
		add(&lat.Series[1+2*twin], st, st.AckP99Ms)
		for _, pc := range st.CPU {
			if si, ok := idx[pc.Name]; ok {
				add(&cpu.Series[si+twin], st, pc.Cores)
			}
		}
	}
	lat.Series, cpu.Series = withPoints(lat.Series), withPoints(cpu.Series)
	figs, notes, err := report.Figures([]report.Chart{lat, cpu})
	if err != nil {
		return nil, nil, fmt.Errorf("capacity: charts: %w", err)
	}
	return figs, notes, nil
}

// withPoints drops the repeat series that have neither a point nor a gap
// (a search without a repeat step draws none); every other series stays,
// empty or not, so the legend says what was not measured.
func withPoints(ss []report.Series) []report.Series {
	return slices.DeleteFunc(ss, func(s report.Series) bool {
		return len(s.Points) == 0 && len(s.Gaps) == 0 && strings.Contains(s.Name, "repeat steps")
	})
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
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>imlab capacity: {{.R.Target}}</title>
<style>{{.Style}}</style></head><body><main>
{{.Pieces.Header}}
<p>SLO <code>{{.R.SLO}}</code>; rates {{printf "%.0f" .R.From}}..{{printf "%.0f" .R.To}}/s; each step {{.R.WarmUpS}}s warm-up (not counted) + {{.R.StepS}}s measured; {{len .R.Steps}} step{{if ne (len .R.Steps) 1}}s{{end}} in {{printf "%.0f" .R.Seconds}}s.
{{with .R.Ceiling}}Generator ceiling (no-op endpoint, same client): {{printf "%.0f" .PerSec}} sends/s.{{end}}
{{with .Knee}}Knee: {{.}}/s ({{$.KneeRule}}).{{end}}</p>
<p class="description">Machine: {{.R.Machine.CPUs}} CPUs; {{.R.Machine.Note}}. Load average {{.R.LoadAverage}}.</p>
{{if .R.Generator.GOMAXPROCS}}<p class="description">{{.R.Generator}}.</p>{{end}}
<section id="charts">
<h2>Charts</h2>
{{range .Charts}}{{.}}{{end}}
{{with .Undrawn}}<p class="empty">Not drawn (no figure: unknown, never 0; a gap in its line): {{.}}.</p>{{end}}
{{range .ChartNotes}}<p class="empty">{{.}}</p>{{end}}
</section>
<p class="description">Marginal cost: least squares of each process's cores against ACKed/s over every step that ran its whole window: the slope is CPU-µs per additional message, the intercept the cores it uses with no load. Cost per message: CPU-µs per ACKed send and per inbox row, from /proc/PID/stat over each step's measured window.{{with .NoteAlone}} {{.}}.{{end}}</p>
{{range $i, $t := .Pieces.Tables}}{{$t}}{{if eq $i 0}}<p class="description steps-legend">{{$.StepsLegend}}</p>{{end}}{{end}}
{{if or .R.Notes .R.Errors}}<section id="notes">
<h2>Notes</h2>
<ul class="notes">{{range .R.Notes}}<li>note: {{.}}</li>{{end}}{{range .R.Errors}}<li class="bad">error: {{.}}</li>{{end}}</ul>
</section>{{end}}
<footer>imlab capacity report</footer>
</main></body></html>
`))

// header is the page's header as report draws it: the answer as the
// verdict, PASS when a rate held, when the search started, and the
// target, its backends, the processes watched and the machine.
func (r *Result) header() *report.Report {
	rep := &report.Report{Title: "Capacity of " + r.Target, Description: r.Answer, Passed: r.Sustainable != nil,
		StartedAt: r.StartedAt, Duration: time.Duration(r.Seconds * float64(time.Second)), DurationLabel: "Search time",
		Verdict: r.Answer, VerdictLabel: "Answer", Backends: r.backendsLine(), Machine: r.Machine.Busy}
	if r.Limit == LimitCredentials && r.Sustainable == nil {
		rep.Unmeasured = "NOT MEASURED"
	}
	return rep
}

// backendsLine is the header's Backends row: the target, what serves its
// storage (when the caller said), every process whose CPU was read, by
// pid, and the machine.
func (r *Result) backendsLine() string {
	parts := []string{"target " + r.Target}
	if r.Backends != "" {
		parts = append(parts, r.Backends)
	} else {
		parts = append(parts, "its backends not known to the search")
	}
	watched := make([]string, 0, len(r.Procs))
	for _, p := range r.Procs {
		watched = append(watched, fmt.Sprintf("%s pid %d", p.Name, p.PID))
	}
	if len(watched) > 0 {
		parts = append(parts, "CPU read of "+strings.Join(watched, ", "))
	}
	parts = append(parts, fmt.Sprintf("machine %s, %d CPUs", cmp.Or(r.Machine.Hostname, "unknown"), r.Machine.CPUs))
	return strings.Join(parts, "; ")
}

// stepsHeader is the page's steps table header: short, so that the table
// fits the page with its verdict in sight (its columns were wider than
// the page, the verdict behind a scrollbar); stepsLegend spells it out.
var stepsHeader = []string{"step", "offered · acked /s", "ACK p50 · p99 ms", "svc p99 ms", "late %", "delay p99 ms", "err · unk %", "lag s", "valid", "gen CPU %", "verdict"}

// stepsLegend explains the steps table's short headers, under it.
const stepsLegend = "Steps table: step = its index and phase; offered · acked /s = the rate offered and the ACKed sends per second of the measured window; " +
	"ACK p50 · p99 = ACK latency from the intended send time; svc p99 = service time, from the actual send to its ACK; " +
	"late = sends of the step started late or never; delay p99 = intended to actual send (the generator's own lateness); " +
	"err · unk = failed and unknown outcomes, of the sends started when some never started; lag = largest consumer lag age over the window's polls; " +
	"valid = the checker's verdict on the step's ledger; gen CPU = the generator's share of the machine's CPU (over half: the target had less than half of the machine). " +
	"A \"-\" is a figure not measured (unknown, never 0): a lag where no lag poll answered (a set-up without a queue has no lag to poll), a verdict where the step's ledger was not checked."

// stepRow is one step's row of the page's steps table (stepsHeader).
func stepRow(st *Step) []string {
	valid := "-"
	if st.Valid != nil {
		valid = fmt.Sprint(*st.Valid)
	}
	gen := fv(pct(st.GeneratorCPUShare), "%.0f")
	if st.GeneratorOverHalf {
		gen += " (over half)"
	}
	unk := fv(pct(st.UnknownRate), "%.3f")
	errs := fv(pct(st.ErrorRate), "%.3f") + " · " + unk + ofStarted(st)
	return []string{fmt.Sprint(st.Index) + " " + st.Phase, fmt.Sprintf("%.0f", st.OfferedPerSec) + " · " + fv(st.AckedPerSec, "%.0f"),
		fv(st.AckP50Ms, "%.1f") + " · " + fv(st.AckP99Ms, "%.1f"), fv(st.ServiceP99Ms, "%.1f"), fv(pct(st.LateFraction), "%.2f"),
		fv(st.SendDelayP99Ms, "%.1f"), errs, fv(st.LagS, "%.2f"), valid, gen, verdict(st, true)}
}

// tables are the page's steps, marginal cost and cost per step, as
// report tables.
func (r *Result) tables() []report.Table {
	steps := report.Table{Title: "Steps", Header: stepsHeader}
	costs := report.Table{Title: "Cost per message at each step (CPU-µs per ACKed send and per inbox row)",
		Header: []string{"#", "offered/s", "process", "pid", "cores", "µs/msg", "µs/row", "note"}}
	for _, st := range r.Steps {
		steps.Rows = append(steps.Rows, stepRow(st))
		for _, pc := range st.CPU {
			costs.Rows = append(costs.Rows, []string{fmt.Sprint(st.Index), fmt.Sprintf("%.0f", st.OfferedPerSec), pc.Name, fmt.Sprint(pc.PID),
				fv(pc.Cores, "%.2f"), fv(pc.USPerMsg, "%.0f"), fv(pc.USPerRow, "%.0f"), pc.Err})
		}
	}
	marginal := report.Table{Title: "Marginal cost (what one more message per second costs)",
		Header: []string{"process", "µs per extra msg", "idle cores", "R²", "steps", "note"}}
	for _, m := range r.Marginal {
		marginal.Rows = append(marginal.Rows, []string{m.Name, fv(m.USPerMsg, "%.0f"), fv(m.IdleCores, "%.2f"), fv(m.R2, "%.2f"), fmt.Sprint(m.Steps), m.Note})
	}
	return []report.Table{steps, marginal, costs}
}

// WriteHTML writes the self-contained report page: report's header,
// charts (report.Figures) and tables (report.PiecesOf), so that it looks
// as every other page of the lab.
func (r *Result) WriteHTML(w io.Writer) error {
	charts, chartNotes, err := r.charts()
	if err != nil {
		return err
	}
	h := r.header()
	h.Tables = r.tables()
	pieces, err := report.PiecesOf(h)
	if err != nil {
		return fmt.Errorf("capacity: report: %w", err)
	}
	d := struct {
		R           *Result
		Knee        string
		KneeRule    string
		Style       template.CSS
		Pieces      *report.Pieces
		Charts      []template.HTML
		ChartNotes  []string
		Undrawn     string
		NoteAlone   string
		StepsLegend string
	}{StepsLegend: stepsLegend, R: r, Knee: fv(r.Knee, "%.0f"), KneeRule: cmp.Or(r.KneeRule, kneeRule), Style: report.PageStyle(), Pieces: pieces, Charts: charts, ChartNotes: chartNotes, Undrawn: undrawn(r),
		NoteAlone: sentence(r.Machine.Note)}
	if r.Knee == nil {
		d.Knee = ""
	}
	if err := page.Execute(w, d); err != nil {
		return fmt.Errorf("capacity: report: %w", err)
	}
	return nil
}

// sentence is s begun with a capital letter, to stand as a sentence of
// its own after a full stop.
func sentence(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// undrawn names the steps and figures the charts leave out.
func undrawn(r *Result) string {
	var out []string
	for _, st := range r.Steps {
		if st.AckP99Ms == nil {
			why := "no ACK measured"
			switch {
			case st.Limit == LimitCredentials:
				why = "the target refused the lab's credentials"
			case st.StoppedEarly != "":
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

// CostText is CPU-µs per ACKed message by process, "name N, name N" in
// the names' order: how the text output and a run's page say Result.Cost.
func CostText(cost map[string]float64) string {
	names := make([]string, 0, len(cost))
	for n := range cost {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.0f", n, cost[n]))
	}
	return strings.Join(parts, ", ")
}
