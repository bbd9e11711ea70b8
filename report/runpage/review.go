package runpage

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"imlab/report"
	"imlab/result"
	"imlab/scenario"
)

// MaxReviewRuns bounds the runs one review page sets side by side.
const MaxReviewRuns = 12

// family is the scenario a run is of, without a matrix variant's suffix.
func family(r *result.Result) string {
	if i := strings.LastIndex(r.Scenario, ".consumers-"); i > 0 && r.SpecOrEmpty().Variant != "" {
		return r.Scenario[:i]
	}
	if n, ok := strings.CutSuffix(r.Scenario, scenario.ReferenceSuffix); ok && n != "" && r.SpecOrEmpty().Variant != "" {
		return n
	}
	return r.Scenario
}

// alignAt is where a run's curves start on the review's time axis: the
// burst's start, else the first fault's injection, else the time base.
func alignAt(r *result.Result) (float64, string) {
	if r.Burst != nil {
		return r.Burst.From, "burst start"
	}
	for _, e := range r.Events {
		if e.Action == "inject" {
			return e.At, "first fault (" + e.Fault + ")"
		}
	}
	return 0, "time base (no burst, no fault)"
}

// Review builds one page that sets runs side by side for a review: which
// runs (verdicts, checks), the settings that differ, the recovery figures
// and the generator's burst figures in one table each, and the lag,
// throughput and ACK latency curves of every run on one time axis,
// aligned at each run's burst start. Runs of different scenarios are
// allowed; the page says so at the top.
func Review(runs []*result.Result) (*report.Report, error) {
	if len(runs) == 0 || len(runs) > MaxReviewRuns {
		return nil, fmt.Errorf("%w: review of %d runs: want 1..%d", scenario.ErrInvalid, len(runs), MaxReviewRuns)
	}
	labels := make([]string, len(runs))
	fams := []string{}
	for i, r := range runs {
		labels[i] = fmt.Sprintf("#%d %s", i+1, r.Scenario)
		if f := family(r); !slices.Contains(fams, f) {
			fams = append(fams, f)
		}
	}
	rep := &report.Report{Title: fmt.Sprintf("imlab review: %d runs of %s", len(runs), strings.Join(fams, ", ")),
		Scenario: strings.Join(fams, ", "), Passed: true, DurationLabel: "Runs' time, summed"}
	if len(fams) > 1 {
		rep.Description = fmt.Sprintf("These runs are of %d different scenarios (%s): their settings differ by more than one parameter, so compare their figures with care.",
			len(fams), strings.Join(fams, ", "))
	}
	passed, valid := 0, 0
	var invalid []string
	for i, r := range runs {
		if r.Passed {
			passed++
		}
		if r.Verdict != nil && r.Verdict.Valid {
			valid++
		} else {
			invalid = append(invalid, labels[i]+" "+strings.ToUpper(verdictWord(r))+expectedNote(r))
		}
		rep.Findings = append(rep.Findings, reviewFindings(r, labels[i])...)
		rep.Passed = rep.Passed && r.Passed
		if rep.StartedAt.IsZero() || r.StartedAt.Before(rep.StartedAt) {
			rep.StartedAt = r.StartedAt
		}
		rep.Duration += time.Duration(r.Seconds * float64(time.Second))
		ok := 0
		var failed []string
		for _, c := range r.Checks {
			if c.OK {
				ok++
			} else {
				failed = append(failed, c.Name+" ("+c.Got+")")
			}
		}
		got := fmt.Sprintf("%d of %d checks passed; verdict %s", ok, len(r.Checks), verdictWord(r))
		if len(failed) > 0 {
			got += "; failed: " + strings.Join(failed, "; ")
		}
		if r.Incomplete {
			errs := r.Errors[:min(len(r.Errors), 3)]
			got = "the run could not be carried out: " + strings.Join(errs, "; ")
			if len(r.Errors) > len(errs) {
				got += fmt.Sprintf(" (+%d more in its result.json)", len(r.Errors)-len(errs))
			}
		}
		rep.Checks = append(rep.Checks, report.Check{Name: labels[i], Want: "every check passes", Got: got, OK: r.Passed})
		rep.Latencies = append(rep.Latencies, ackLatency(r, "ACK latency, whole run "+labels[i]))
	}
	var backends []string
	for _, r := range runs {
		if r.Backends != "" && !slices.Contains(backends, r.Backends) {
			backends = append(backends, r.Backends)
		}
	}
	rep.Backends = strings.Join(backends, " | ")
	rep.Verdict = fmt.Sprintf("%d of %d verdicts valid; %d of %d runs passed their checks", valid, len(runs), passed, len(runs))
	if valid == len(runs) {
		rep.Verdict = "valid: " + rep.Verdict
	} else {
		rep.Verdict = "invalid: " + rep.Verdict + " (" + strings.Join(invalid, "; ") + ")"
	}
	rep.Load = reviewLoad(runs, labels)
	rep.Machine = reviewBusy(runs, labels)
	rep.TimeAxis = "time since each run's alignment point: its burst start, else its first fault, else its time base"
	rep.Tables = append(rep.Tables, runsTable(runs, labels), settingsDiff(runs, labels), reviewProcesses(runs, labels))
	if slices.ContainsFunc(runs, func(r *result.Result) bool { return r.Recovery != nil }) {
		rep.Tables = append(rep.Tables, reviewRecovery(runs, labels))
	} else {
		rep.Notes = append(rep.Notes, "No recovery table and no lag charts: none of these runs has a queue (Kafka), so there was no consumer lag to poll.")
	}
	if slices.ContainsFunc(runs, func(r *result.Result) bool { return r.Burst != nil }) {
		rep.Tables = append(rep.Tables, reviewBurst(runs, labels))
	}
	rep.Charts = reviewCharts(runs, labels)
	rep.Markers = append([]report.Marker{{T: 0, Label: "alignment point of every run (see the runs table)", Kind: report.KindAlign}},
		reviewFaults(runs, labels)...)
	rep.Notes = append(rep.Notes, "Every curve is drawn on one time axis: t = 0 is each run's own alignment point (its burst start, else its first fault, else its time base), so \"time since start\" on the charts means since that point.",
		"This page was made from the runs' result.json files only: "+strings.Join(files(runs), ", "),
		"Their scenario files: "+strings.Join(scenarioFiles(runs), ", "))
	return rep, nil
}

// expectedNote says when an invalid verdict is what the scenario expects
// (a negative control).
func expectedNote(r *result.Result) string {
	if r.Spec != nil && r.Spec.Expect.VerdictOr() == "invalid" && r.Verdict != nil && !r.Verdict.Valid {
		return ", as its scenario expects: a negative control"
	}
	return ""
}

// reviewFindings are a run's non-zero findings, and those the checker
// could not judge, named after the run, with their examples and msg_ids.
func reviewFindings(r *result.Result, label string) []report.Finding {
	var out []report.Finding
	for _, f := range r.Findings {
		if f.Count == 0 && f.NotMade == "" {
			continue
		}
		ex := f.Examples
		if len(ex) > 10 {
			ex = ex[:10]
		}
		if f.NotMade != "" { // a count of 0 that says nothing
			ex = append([]string{"NOT MADE: " + f.NotMade}, ex...)
		}
		out = append(out, report.Finding{Name: label + ": " + f.Name, Count: f.Count, Counted: f.CountText(), Examples: ex, MsgIDs: f.MsgIDs, Messages: f.Messages, NotMade: f.NotMade != ""})
	}
	return out
}

// reviewLoad is the page's load verdict: every run's, OVERLOADED when one
// was.
func reviewLoad(runs []*result.Result, labels []string) *report.LoadVerdict {
	lv := &report.LoadVerdict{}
	var parts, causes, over []string
	for i, r := range runs {
		o, _, ok := r.LoadOutcome()
		if !ok {
			parts = append(parts, labels[i]+": the load did not run")
			continue
		}
		late := "started late: not recorded in this result, unknown"
		if r.LateSends != nil {
			late = fmt.Sprintf("started late %.1f%%", 100*o.LateFrac)
		}
		parts = append(parts, fmt.Sprintf("%s: %s (achieved %.0f ACKed sends/s; unknown %.1f%%, failed %.1f%%, retried %.1f%%, %s)",
			labels[i], r.LoadLabel(), o.AckedPerSec, 100*o.UnknownFrac, 100*o.FailFrac, 100*o.RetriedFrac, late))
		if o.Overloaded {
			over = append(over, labels[i])
			causes = append(causes, labels[i]+" "+r.LoadCause())
		}
	}
	lv.Detail = strings.Join(parts, "; ")
	lv.Cause = strings.Join(causes, "; ")
	if lv.Overloaded = len(over) > 0; lv.Overloaded {
		lv.Label = "OVERLOADED: " + strings.Join(over, ", ")
	} else {
		lv.Label = "every run within load"
	}
	return lv
}

// reviewBusy is the page's warning on the machine: the runs that began on
// a busy machine ("" when none did).
func reviewBusy(runs []*result.Result, labels []string) string {
	var busy []string
	for i, r := range runs {
		if b, _ := r.Busy(); b {
			busy = append(busy, fmt.Sprintf("%s (%s)", labels[i], r.BusyWhy()))
		}
	}
	if len(busy) == 0 {
		return ""
	}
	return fmt.Sprintf("BUSY: %d of %d runs shared the machine with other work: %s; their latency and rate figures describe a shared machine, and set beside the others they do not compare like for like",
		len(busy), len(runs), strings.Join(busy, ", "))
}

// reviewFaults are every run's fault injections and heals, each shifted to
// its run's alignment point and named after its run, at most MaxMarkers-1
// in all (the alignment line takes one).
func reviewFaults(runs []*result.Result, labels []string) []report.Marker {
	var out []report.Marker
	for i, r := range runs {
		at, _ := alignAt(r)
		for _, e := range r.Events {
			if len(out) == report.MaxMarkers-1 {
				return out
			}
			kind, label := e.Action, labels[i]+": "+e.Action+" "+e.Fault
			if e.Err != "" {
				kind, label = report.KindError, label+": "+e.Err
			}
			out = append(out, report.Marker{T: e.At - at, Label: label, Kind: kind, Fault: labels[i] + ": " + e.Fault})
		}
	}
	return out
}

func files(runs []*result.Result) []string {
	var out []string
	for _, r := range runs {
		out = append(out, cmp.Or(r.Path, "(not read from a file)"))
	}
	return out
}

func scenarioFiles(runs []*result.Result) []string {
	var out []string
	for _, r := range runs {
		out = append(out, cmp.Or(r.File, "(unknown)"))
	}
	return out
}

func verdictWord(r *result.Result) string {
	switch {
	case r.Verdict == nil:
		return "not checked"
	case r.Verdict.Valid:
		return "valid"
	default:
		return "invalid"
	}
}

func runsTable(runs []*result.Result, labels []string) report.Table {
	variants := slices.ContainsFunc(runs, func(r *result.Result) bool { return r.SpecOrEmpty().Variant != "" })
	t := report.Table{Title: "Runs (their scenario files and result.json files are listed in the notes)",
		Header: []string{"run", "scenario", "started", "seconds", "machine load (1 min) start → end", "passed", "verdict", "load", "aligned at"}}
	if variants {
		t.Header = slices.Insert(t.Header, 2, "variant")
	}
	for i, r := range runs {
		at, what := alignAt(r)
		load := "unknown"
		if la := r.LoadAverage; la != nil {
			load = fmt.Sprintf("%.2f → %.2f", la.Start[0], la.End[0])
		}
		row := []string{labels[i], family(r), r.StartedAt.UTC().Format("2006-01-02 15:04:05"),
			fmt.Sprintf("%.1f", r.Seconds), load, fmt.Sprint(r.Passed), verdictWord(r), cmp.Or(r.LoadLabel(), "did not run"), fmt.Sprintf("t=%.1fs (%s)", at, what)}
		if variants {
			row = slices.Insert(row, 2, r.SpecOrEmpty().Variant)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// logPathRE matches an exec process's log path in the processes setting.
var logPathRE = regexp.MustCompile(`\(exec, log [^)]*\)`)

// settingsDiff lists the settings whose values differ between the runs
// (a setting missing from a run shows as "(none)"); identical ones are
// counted in the title.
func settingsDiff(runs []*result.Result, labels []string) report.Table {
	var names []string
	vals := make([]map[string]string, len(runs))
	for i, r := range runs {
		vals[i] = map[string]string{}
		for _, s := range r.Settings {
			if s.Name == "redis_prefix" || s.Name == "proxies" || s.Name == "kafka" {
				continue // differ in every run by construction
			}
			vals[i][s.Name] = logPathRE.ReplaceAllString(s.Value, "(exec)") // log paths differ in every run
			if !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	t := report.Table{Header: append([]string{"setting"}, labels...)}
	same := 0
	for _, n := range names {
		row := []string{n}
		differ := false
		for i := range runs {
			v, ok := vals[i][n]
			if !ok {
				v = "(none)"
			}
			row = append(row, v)
			differ = differ || v != row[1]
		}
		if differ {
			t.Rows = append(t.Rows, row)
		} else {
			same++
		}
	}
	t.Title = fmt.Sprintf("Settings that differ (%d differ, %d the same in every run; run-specific names such as the Redis prefix left out)", len(t.Rows), same)
	if len(runs) == 1 {
		t.Title = "Settings (one run: nothing to compare)"
	}
	return t
}

func reviewRecovery(runs []*result.Result, labels []string) report.Table {
	t := report.Table{Title: "Recovery (from the end of the burst or the heal of the last fault; see each run's report for the per-group rows)",
		Header: []string{"run", "status", "recovery", "since", "bound", "peak lag age", "peak records behind", "backlog peak", "drain records/s (slowest group)", "peak drain records/s", "inbox rows/s", "outbox peak", "outbox drain"}}
	for i, r := range runs {
		f := r.Recovery
		if f == nil {
			t.Rows = append(t.Rows, []string{labels[i], "not computed (no Kafka in this run)", "", "", "", "", "", "", "", "", "", "", ""})
			continue
		}
		var age float64
		var recs int64
		peakDrain := (*float64)(nil)
		for _, g := range f.Groups {
			age, recs = math.Max(age, g.PeakAge), max(recs, g.PeakRecords)
			if g.PeakDrainRecordsPerSec != nil && (peakDrain == nil || *g.PeakDrainRecordsPerSec > *peakDrain) {
				peakDrain = g.PeakDrainRecordsPerSec
			}
		}
		status := f.Status
		if f.Reason != "" {
			status += ": " + f.Reason
		}
		drain, _ := f.MinDrainRecordsPerSec()
		ob, od := "", ""
		if o := f.Outbox; o != nil {
			ob, od = fmt.Sprint(o.PeakBacklog), recoveryCell(o.Status, o.DrainSeconds)
		}
		t.Rows = append(t.Rows, []string{labels[i], status, recoveryCell(f.Status, f.RecoverySeconds), f.Since, fmt.Sprintf("%gs for %gs", f.Bound, f.Hold),
			fmt.Sprintf("%.2fs", age), fmt.Sprint(recs), fmt.Sprint(f.BacklogPeak), result.OptRate(drain), result.OptRate(peakDrain), result.OptRate(f.DrainRowsPerSec), ob, od})
	}
	if !slices.ContainsFunc(runs, func(r *result.Result) bool { return r.Recovery != nil && r.Recovery.Outbox != nil }) {
		// No run has an outbox: its two columns would stay empty.
		t.Header = t.Header[:len(t.Header)-2]
		for i := range t.Rows {
			t.Rows[i] = t.Rows[i][:len(t.Rows[i])-2]
		}
	}
	return t
}

func reviewBurst(runs []*result.Result, labels []string) report.Table {
	t := report.Table{Title: "Generator during the burst (intended vs started; ACK latency from the intended time)",
		Header: []string{"run", "peak rate", "intended/s", "started/s", "started of intended (±1 s)", "start delay p99", "answered in the burst's seconds: ok · fail · unknown", "ACK p99 of those answers"}}
	for i, r := range runs {
		b := r.Burst
		if b == nil {
			t.Rows = append(t.Rows, []string{labels[i], "no burst", "", "", "", "", "", ""})
			continue
		}
		t.Rows = append(t.Rows, []string{labels[i], fmt.Sprintf("%.0f/s", b.PeakPerSec), fmt.Sprintf("%.0f", b.IntendedPerSec), fmt.Sprintf("%.0f", b.StartedPerSec),
			fmt.Sprintf("%d of %.0f (%.3f)", b.Started, b.Intended, b.Ratio), b.StartDelay(),
			fmt.Sprintf("%d · %d · %d", b.OK, b.Fail, b.Unknown), fmt.Sprintf("%.0f ms", b.AckP99ms)})
	}
	return t
}

// reviewCharts overlays every run's lag age (max over groups), records
// behind, throughput, failed and unknown sends and ACK p99, each shifted
// to its alignment point. A second without a measurement (a lag poll that
// failed, a second without an ACK) is a gap in its run's line. The lag
// charts are left out when no run has a queue.
func reviewCharts(runs []*result.Result, labels []string) []report.Chart {
	lag := report.Chart{Title: "Consumer lag age (max over groups and partitions)", Unit: "s"}
	behind := report.Chart{Title: "Records behind (sum over groups)", Unit: "records"}
	tput := report.Chart{Title: "Throughput (sends ACKed per second, each second drawn at its middle)", Unit: "msg/s"}
	failed := report.Chart{Title: "Sends failed or of unknown outcome per second (by the second the outcome came)", Unit: "msg/s"}
	ack := report.Chart{Title: "ACK latency p99 (by the second each ACK came, from the intended send time; a second without an ACK is a gap)", Unit: "ms",
		Hollow: fmt.Sprintf("a second with fewer than %d ACKs: its p99 rests on those few sends", FewACKs)}
	lagged := false
	for i, r := range runs {
		at, _ := alignAt(r)
		ls, bs := report.Series{Name: labels[i]}, report.Series{Name: labels[i]}
		for _, s := range r.Lag {
			if !s.LagKnown() {
				ls.Gaps, bs.Gaps = append(ls.Gaps, s.T-at), append(bs.Gaps, s.T-at) // unknown: a gap, never a 0
				continue
			}
			a, n := 0.0, int64(0)
			for g, v := range s.MaxAge {
				a, n = math.Max(a, v), n+s.Records[g]
			}
			ls.Points = append(ls.Points, report.Point{T: s.T - at, V: a})
			bs.Points = append(bs.Points, report.Point{T: s.T - at, V: float64(n)})
		}
		lagged = lagged || len(r.Lag) > 0
		if len(r.Lag) == 0 {
			ls.Name, bs.Name = labels[i]+" (no queue: nothing to poll)", labels[i]+" (no queue: nothing to poll)"
		}
		ts, fs, ps := report.Series{Name: labels[i]}, report.Series{Name: labels[i]}, report.Series{Name: labels[i]}
		sending := result.SendingSeconds(r)
		for _, s := range r.Sends {
			ts.Points = append(ts.Points, report.Point{T: s.Mid() - at, V: float64(s.OK)})
			fs.Points = append(fs.Points, report.Point{T: s.Mid() - at, V: float64(s.Fail + s.Unknown)})
			if s.OK > 0 && s.AckP99 != nil {
				ps.Points = append(ps.Points, report.Point{T: s.Mid() - at, V: *s.AckP99, Hollow: s.OK < FewACKs})
			} else if s.T-r.LoadOffset <= sending {
				ps.Gaps = append(ps.Gaps, s.Mid()-at)
			}
		}
		lag.Series, behind.Series = append(lag.Series, ls), append(behind.Series, bs)
		tput.Series, failed.Series, ack.Series = append(tput.Series, ts), append(failed.Series, fs), append(ack.Series, ps)
	}
	if len(runs) > 0 && runs[0].Recovery != nil {
		lag.Threshold, lag.ThresholdLabel = runs[0].Recovery.Bound, "recovery bound of "+labels[0]
	}
	if !lagged {
		return []report.Chart{tput, failed, ack}
	}
	return []report.Chart{lag, behind, tput, failed, ack}
}
