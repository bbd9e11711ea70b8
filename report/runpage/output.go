package runpage

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"imlab/checker"
	"imlab/faults"
	"imlab/recovery"
	"imlab/report"
	"imlab/result"
)

// HTMLReport builds the report of a result: throughput, ACK latency,
// consumer lag age per group and outbox backlog, with fault markers and
// the scenario's thresholds.
func HTMLReport(res *result.Result) *report.Report {
	rep := &report.Report{
		Title: "imlab scenario " + res.Scenario, Scenario: res.Scenario, Description: res.Description,
		Passed: res.Passed, StartedAt: res.StartedAt, Duration: time.Duration(res.Seconds * float64(time.Second)),
		Backends: res.Backends,
	}
	if res.RateScale != nil {
		rep.Backends += "; " + res.RateScale.Label()
	}
	rep.Settings = pageSettings(res)
	rep.Load = loadVerdict(res)
	rep.Verdict = verdictLine(res)
	rep.Machine = res.BusyNote()
	rep.Latencies = []report.Latency{ackLatency(res, "ACK latency, whole run")}
	for _, f := range res.Findings {
		ex := f.Examples
		if len(ex) > 10 {
			ex = ex[:10]
		}
		if f.NotMade != "" { // a count of 0 that says nothing
			ex = append([]string{"NOT MADE: " + f.NotMade}, ex...)
		}
		rep.Findings = append(rep.Findings, report.Finding{Name: f.Name, Count: f.Count, Counted: f.CountText(), Examples: ex, MsgIDs: f.MsgIDs, Messages: f.Messages, NotMade: f.NotMade != ""})
	}
	for _, c := range res.Checks {
		rep.Checks = append(rep.Checks, report.Check{Name: c.Name, Want: c.Want, Got: c.Got, OK: c.OK})
	}
	var chartNotes []string // why a chart is missing or incomplete: after the run's own notes
	rep.Charts, chartNotes = sendCharts(res)
	lagCharts, lagNotes := lagCharts(res)
	rep.Charts, chartNotes = append(rep.Charts, lagCharts...), append(chartNotes, lagNotes...)
	cpuCharts, cpuNotes := cpuChart(res)
	rep.Charts, chartNotes = append(rep.Charts, cpuCharts...), append(chartNotes, cpuNotes...)
	rep.Markers = eventMarkers(res)
	if b := res.Burst; b != nil {
		rep.Tables = append(rep.Tables, report.Table{Title: fmt.Sprintf("Generator during the burst (t=%.1fs..%.1fs)", b.From, b.To),
			Header: []string{"peak rate", "intended/s", "started/s", "started of intended (±1 s)", "late starts", "start delay p99", "answered in these seconds: ok · fail · unknown", "ACK p99 of those answers (from intended; the ACK latency chart shows the whole run)"},
			Rows: [][]string{{fmt.Sprintf("%.0f/s", b.PeakPerSec), fmt.Sprintf("%.0f", b.IntendedPerSec), fmt.Sprintf("%.0f", b.StartedPerSec),
				fmt.Sprintf("%d of %.0f (%.3f)", b.Started, b.Intended, b.Ratio), fmt.Sprint(b.Late), b.StartDelay(),
				fmt.Sprintf("%d · %d · %d", b.OK, b.Fail, b.Unknown), fmt.Sprintf("%.0f ms", b.AckP99ms)}}})
	}
	if res.Recovery != nil {
		rep.Tables = append(rep.Tables, recoveryTable(res.Recovery))
		// Reference lines, not events: the fault schedule does not list them.
		rep.Markers = append(rep.Markers, report.Marker{T: res.Recovery.From, Label: "recovery counts from the " + res.Recovery.Since, Kind: report.KindAlign})
		if at := res.Recovery.RecoveredAt; at != nil {
			rep.Markers = append(rep.Markers, report.Marker{T: *at, Label: "every group recovered", Kind: report.KindAlign})
		}
	}
	if c := res.Capacity; c != nil { // a search's steps are judged one by one, in its own report
		rep.NoCharts = capacityNoCharts(c)
		rep.Tables = append(rep.Tables, capacityTable(c))
	} else {
		rep.Tables = append(rep.Tables, repairsTable(res))
	}
	if len(res.Processes) > 0 {
		rep.Tables = append(rep.Tables, processTable(res))
	}
	rep.Notes = append(runNotes(res), chartNotes...)
	return rep
}

// pageSettings are the run's settings for the page: the machine's load
// average and the generator's CPU first, the backends left to the header.
func pageSettings(res *result.Result) [][2]string {
	var out [][2]string
	for _, s := range res.Settings {
		if s.Name == "backends" && s.Value == res.Backends {
			continue // in the page's header already
		}
		out = append(out, [2]string{s.Name, s.Value})
	}
	if la := res.LoadAverage; la != nil {
		out = append([][2]string{{"machine_load_average", la.String()}}, out...)
	}
	if line := res.OthersLine(); line != "" {
		out = append([][2]string{{"machine_others_cpu", line}}, out...)
	}
	if res.Verdict != nil || res.LabCPU != nil { // a run that sent: say how much of the machine the lab took
		out = append([][2]string{{"generator_cpu", res.LabCPU.String()}}, out...)
	}
	return out
}

// verdictLine is the page's verdict: the checker's, the repaired
// messages' fate, the dead letters, and the scenario's pass or fail.
func verdictLine(res *result.Result) string {
	var v string
	switch {
	case res.Incomplete:
		v = "the run could not be carried out"
	case res.Skipped != "":
		v = "skipped on these backends: " + res.Skipped
	case res.Verdict == nil && res.Capacity != nil:
		v = fmt.Sprintf("each step's ledger checked on its own: %d of %d checked steps invalid (a step with an invalid verdict holds nothing)", res.Capacity.Invalid, res.Capacity.Checked)
	case res.Verdict == nil:
		v = "not checked"
	case res.Verdict.Valid:
		v = "valid: no message lost, no cursor skipped, nothing unexpected"
	default:
		v = "invalid: see the findings"
	}
	if res.Verdict != nil {
		if p := res.Verdict.Partly(); len(p) > 0 {
			v += "; judged on partial evidence: " + strings.Join(p, "; ")
		}
	}
	if line := res.Repairs.FateLine(); line != "" && res.Verdict != nil {
		v += "; " + line
	}
	if d := res.DeadLetters; d != nil && d.Worth() {
		v += "; dead letters: " + d.AccountLine()
	}
	if res.Passed {
		if o, _, ok := res.LoadOutcome(); ok && o.Overloaded && res.Skipped == "" {
			// PASSED is the file's expect, not the server keeping up.
			return v + " (scenario PASSED on its checks, though its load was OVERLOADED: see Load for what no expectation limits)"
		}
		return v + " (scenario PASSED)"
	}
	return v + " (scenario FAILED)"
}

// ackChartTitle is the ACK latency chart's title. Its points are by the
// second each ACK came (the result has no latency by intended second), so
// when the throughput chart counts by intended second the title says the
// two differ: a "no ACK" gap can sit under sends ACKed later.
func ackChartTitle(byIntended bool) string {
	by := "by the second each ACK came"
	if byIntended {
		by += ", not by the intended second the throughput chart counts: a second without an ACK (a shaded gap) may hold sends ACKed later, drawn where their ACK came"
	} else {
		by += ", a second without an ACK is a shaded gap"
	}
	return "ACK latency per second (" + by + "; intended send to ACK, the second's ACKed sends, each second drawn at its middle; the whole run's percentiles are in the header)"
}

// FewACKs: a second with fewer ACKed sends than this has its ACK
// percentiles drawn as open points: a p99 of a dozen sends is their
// slowest, and a second cut short by a fault holds only the sends ACKed
// before it.
const FewACKs = 20

// sendCharts are the throughput and ACK latency charts of the run's
// sends, or the notes that say why there are none.
func sendCharts(res *result.Result) ([]report.Chart, []string) {
	var ok, fail, p50, p99 report.Series
	sending := result.SendingSeconds(res)
	ok.Name, fail.Name, p50.Name, p99.Name = "sends ok/s", "sends failed or unknown/s", "ACK p50 of each second", "ACK p99 of each second"
	// By the second each send was intended (what the offered rate counts)
	// when the run recorded it; older results count by the second the
	// outcome came, which can peak above the offered rate after a stall.
	byIntended := len(res.Sends) > 0
	for _, s := range res.Sends {
		byIntended = byIntended && s.IntendedOK != nil && s.IntendedFailed != nil
	}
	throughput := "Throughput (by the second each send's outcome came: ACKed, or failed or unknown; each second drawn at its middle)"
	if byIntended {
		throughput = "Throughput (by the second each send was intended, as the offered rate counts: ACKed, or failed or unknown, whenever the answer came; each second drawn at its middle)"
	}
	lastIntended := math.Inf(-1) // the last second any send was intended in
	for _, s := range res.Sends {
		if byIntended && *s.IntendedOK+*s.IntendedFailed > 0 {
			lastIntended = s.T
		}
	}
	for _, s := range res.Sends {
		okN, failN := s.OK, s.Fail+s.Unknown
		if byIntended {
			okN, failN = *s.IntendedOK, *s.IntendedFailed
		}
		// By intended second nothing is intended after the sending phase:
		// its zeros would draw the end of the load as a collapse (and make
		// the legend's last value 0).
		if !byIntended || s.T <= lastIntended {
			ok.Points = append(ok.Points, report.Point{T: s.Mid(), V: float64(okN)})
			fail.Points = append(fail.Points, report.Point{T: s.Mid(), V: float64(failN)})
		}
		if v50, v99, measured := s.AckMs(); measured {
			few := s.OK < FewACKs
			p50.Points = append(p50.Points, report.Point{T: s.Mid(), V: v50, Hollow: few})
			p99.Points = append(p99.Points, report.Point{T: s.Mid(), V: v99, Hollow: few})
		} else if s.T-res.LoadOffset <= sending {
			// A second of the sending phase without an ACK has no ACK
			// latency: a gap, not a line drawn through it.
			p50.Gaps, p99.Gaps = append(p50.Gaps, s.Mid()), append(p99.Gaps, s.Mid())
		}
	}
	switch {
	case len(res.Sends) > 0:
		lat := report.Chart{Title: ackChartTitle(byIntended), Unit: "ms", Series: []report.Series{p50, p99},
			Hollow: fmt.Sprintf("a second with fewer than %d ACKs: its percentiles rest on those few sends", FewACKs)}
		if e := res.SpecOrEmpty().Expect.MaxAckP99; e != nil {
			lat.Threshold, lat.ThresholdLabel = float64(e.D())/float64(time.Millisecond), "max ACK p99"
		}
		return []report.Chart{{Title: throughput, Unit: "msg/s", Series: []report.Series{ok, fail}}, lat}, nil
	case res.Capacity != nil:
		// Nothing to draw here: no empty charts at the top of the page;
		// the Charts section says why (capacityNoCharts).
		return nil, nil
	}
	return nil, []string{"No throughput or ACK latency chart: the load did not run."}
}

// lagCharts are the consumer lag and outbox charts of the run's lag
// polls, and the notes on what is missing from them.
func lagCharts(res *result.Result) ([]report.Chart, []string) {
	spec := res.SpecOrEmpty()
	if len(res.Lag) == 0 {
		if !spec.UsesKafka() {
			return nil, []string{fmt.Sprintf("No consumer lag or outbox chart: with policy %s and the history tier off nothing goes through a queue, so there is no lag to poll.", spec.Server.PolicyOr())}
		}
		return nil, nil
	}
	var charts []report.Chart
	var notes []string
	groups := map[string]*report.Series{}
	var backlog, oldest report.Series
	backlog.Name, oldest.Name = "outbox backlog", "outbox oldest age"
	// Each part is drawn where it was measured, as recovery judges it
	// (expect.RecoverySamples): the consumer lag where the sample's lag is
	// known, the outbox where its outbox was measured too.
	var unknown []float64    // polls that did not measure the consumer lag: gaps in every line
	var outboxGaps []float64 // those and the polls that did not measure the outbox
	for _, s := range res.Lag {
		if !s.LagKnown() {
			unknown, outboxGaps = append(unknown, s.T), append(outboxGaps, s.T)
			continue
		}
		for g, a := range s.MaxAge {
			if groups[g] == nil {
				groups[g] = &report.Series{Name: g}
			}
			groups[g].Points = append(groups[g].Points, report.Point{T: s.T, V: a})
		}
		if n, age, ok := s.Outbox(); ok {
			backlog.Points = append(backlog.Points, report.Point{T: s.T, V: float64(n)})
			oldest.Points = append(oldest.Points, report.Point{T: s.T, V: age})
		} else {
			outboxGaps = append(outboxGaps, s.T)
		}
	}
	backlog.Gaps = outboxGaps
	names := make([]string, 0, len(groups))
	for g := range groups {
		groups[g].Gaps = unknown
		names = append(names, g)
	}
	sort.Strings(names)
	lagChart := report.Chart{Title: "Consumer lag (age of the oldest unprocessed message, max over partitions)", Unit: "s"}
	for _, g := range names {
		lagChart.Series = append(lagChart.Series, *groups[g])
	}
	if e := spec.Expect.MaxLagAge; e != nil {
		lagChart.Threshold, lagChart.ThresholdLabel = e.D().Seconds(), "max lag age"
	} else if res.Recovery != nil {
		lagChart.Threshold, lagChart.ThresholdLabel = res.Recovery.Bound, "recovery bound"
	}
	if len(lagChart.Series) > 0 {
		charts = append(charts, lagChart)
	}
	if failed := len(unknown); failed > 0 {
		notes = append(notes, fmt.Sprintf("%d of %d lag polls failed: those seconds are unknown, shaded gaps in the lag and outbox charts (result.json has each error).", failed, len(res.Lag)))
	}
	if blind := len(res.Lag) - len(unknown) - len(backlog.Points); blind > 0 && spec.Server.PolicyOr() == "outbox" {
		notes = append(notes, fmt.Sprintf("%d lag polls measured the consumer lag but not the outbox (its query failed): their consumer lag is drawn and counts for the groups' recovery; the outbox is unknown there, shaded gaps in the outbox chart, as for the outbox's drain in the recovery table.", blind))
	}
	if spec.Server.PolicyOr() == "outbox" || anyAbove(backlog.Points, 0) {
		charts = append(charts, report.Chart{Title: "Outbox backlog", Unit: "records", Series: []report.Series{backlog}})
	} else {
		notes = append(notes, fmt.Sprintf("No outbox chart: policy %s writes no outbox (every poll read a backlog of 0).", spec.Server.PolicyOr()))
	}
	return charts, notes
}

// eventMarkers are the fault schedule's events as chart markers, each
// with what it affected in its kind's unit.
func eventMarkers(res *result.Result) []report.Marker {
	var out []report.Marker
	for _, e := range res.Events {
		kind := e.Action
		label := e.Action + " " + e.Fault
		if e.Affected > 0 {
			label += fmt.Sprintf(" (%d %s)", e.Affected, faults.Unit(e.Kind))
		}
		if e.Err != "" {
			kind, label = "error", label+": "+e.Err
		}
		out = append(out, report.Marker{T: e.At, Label: label, Kind: kind, Fault: e.Fault})
	}
	return out
}

// runNotes are the page's notes on the run: the rate scale, where the
// load started on the time base, the ledger's directory, the errors.
func runNotes(res *result.Result) []string {
	var notes []string
	if res.RateScale != nil {
		notes = append(notes, res.RateScale.Label()+": faults, population and expectations are the file's; the figures are not the file's rate")
	}
	if res.LoadOffset > 0 {
		notes = append(notes, fmt.Sprintf("The load started %.2fs after the run's time base (loadgen's set-up); charts and markers share the run's base.", res.LoadOffset))
	}
	if res.RunDir != "" {
		notes = append(notes, "Ledger and load summary: "+res.RunDir)
	}
	for _, e := range res.Errors {
		notes = append(notes, result.ErrorLine(strings.TrimSpace(e)))
	}
	return notes
}

// loadVerdict is the page's load verdict: the achieved rate and fractions,
// OVERLOADED or not, and the cause the run knows (nil: the load did not
// run).
func loadVerdict(res *result.Result) *report.LoadVerdict {
	o, over, ok := res.LoadOutcome()
	if !ok {
		return nil
	}
	return &report.LoadVerdict{Label: res.LoadLabel(), Overloaded: o.Overloaded, Detail: o.Figures() + " (" + over + ")", Cause: res.LoadCause()}
}

// ackLatency is a run's whole ACK latency for a page's header, from the
// checker's response histogram: every ACKed send of the ledger, from its
// intended send time to its ACK. Without a verdict, or without an ACK,
// it is unknown, never 0.
func ackLatency(res *result.Result, name string) report.Latency {
	l := report.Latency{Name: name, Of: "ACKed sends only",
		Means: "from the intended send time to the ACK; failed and unknown sends have no ACK and are not counted"}
	var resp checker.Latency
	switch {
	case res.Incomplete && res.Verdict == nil:
		l.Unknown = "the run could not be carried out"
		return l
	case res.Verdict == nil && res.Capacity != nil:
		l.Of, l.Unknown = "", "a capacity search has no whole-run figure: each step's ACK latency is in its own report"
		return l
	case res.Verdict == nil:
		l.Unknown = "the ledger was not checked"
		return l
	default:
		resp = res.Verdict.Latency[ackLatencyHist]
	}
	if resp.Count <= 0 {
		l.Unknown = "no send was ACKed"
		return l
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	l.Count = uint64(resp.Count)
	l.Quantiles = []report.Quantile{{Name: "p50", Value: us(resp.P50)}, {Name: "p90", Value: us(resp.P90)},
		{Name: "p99", Value: us(resp.P99)}, {Name: "p99.9", Value: us(resp.P999)}, {Name: "max", Value: us(resp.Max)}}
	return l
}

// ackLatencyHist is the checker's histogram of ACK latency (intended send
// to ACK, ACKed sends only).
const ackLatencyHist = "response"

// anyAbove says whether some point is above v.
func anyAbove(pts []report.Point, v float64) bool {
	for _, p := range pts {
		if p.V > v {
			return true
		}
	}
	return false
}

// repairsTable is the pipeline's repairs beside the verdict: how many
// inbox rows forward reconciliation wrote (rows missing when it looked:
// lost by the pipeline, or not yet written when the grace was shorter than
// the consumers' lag), which messages, and what the checker's ledger says
// became of them: delivered in the end (late), or still lost.
func repairsTable(res *result.Result) report.Table {
	t := report.Table{Title: "Repairs by forward reconciliation (inbox rows missing when the reconciler looked: lost by the pipeline, or not yet written when reconcile_grace was shorter than the consumers' lag), and what became of the repaired messages",
		Header: []string{"rows repaired", "messages", "delivered late: every recipient device stored them in the end", "still lost: some recipient device never stored them", "msg_ids (first 20)", "note"}}
	r := res.Repairs
	note := "read from every reconciler process"
	if !r.Known {
		note = "unknown: " + strings.Join(r.Errors, "; ")
	}
	n := strconv.Itoa(len(r.MsgIDs))
	if r.Truncated {
		n += "+"
	}
	delivered, lost := "unknown (the ledger was not checked)", "unknown (the ledger was not checked)"
	switch f := r.Fate; {
	case f != nil:
		delivered = fmt.Sprintf("%d of %d", f.Delivered, f.Messages)
		if r.Truncated {
			delivered += " listed"
		}
		if l := f.LastCopy; l.Count > 0 {
			delivered += fmt.Sprintf("; the last recipient device's first copy %s (p50), %s (max) after the intended send",
				checker.Dur(l.P50), checker.Dur(l.Max))
		}
		lost = strconv.Itoa(len(f.Lost))
		if len(f.Lost) > 0 {
			lost += ": msg_ids " + joinIDs(f.Lost, 20)
		}
		if len(f.Unexplained) > 0 {
			note += fmt.Sprintf("; %d repaired messages are not in the ledger (no ACK, no send of unknown outcome): %s", len(f.Unexplained), joinIDs(f.Unexplained, 20))
		}
	case len(r.MsgIDs) == 0 && r.Known:
		delivered, lost = "0 (none repaired)", "0 (none repaired; the verdict's lost counts every message)"
	}
	note += "; the verdict's \"recovered\" is not these: it counts sends of unknown outcome whose message was stored anyway"
	t.Rows = append(t.Rows, []string{strconv.FormatUint(r.Rows, 10), n, delivered, lost, strings.Join(firstIDs(r.MsgIDs, 20), " "), note})
	return t
}

// joinIDs lists the first n msg_ids, "+K more" after them.
func joinIDs(ids []uint64, n int) string {
	out := firstIDs(ids, n)
	if len(ids) > n {
		out = append(out, fmt.Sprintf("+%d more", len(ids)-n))
	}
	return strings.Join(out, " ")
}

// firstIDs is the first n msg_ids in decimal.
func firstIDs(ids []uint64, n int) []string {
	out := make([]string, 0, min(n, len(ids))+1)
	for _, id := range ids[:min(n, len(ids))] {
		out = append(out, strconv.FormatUint(id, 10))
	}
	return out
}

// processTable lists every incarnation of the server processes: where it
// ran, when it started and ended (seconds from the time base; negative:
// before the load started) and how it ended.
func processTable(res *result.Result) report.Table {
	t := report.Table{Title: "Server processes", Header: []string{"process", "pid", "started (s)", "ended (s)", "end", "OS state", "log"}}
	at := func(ts time.Time) string {
		if ts.IsZero() || res.TimeBase.IsZero() {
			return ""
		}
		v := ts.Sub(res.TimeBase).Seconds()
		if v > -0.005 && v < 0.005 {
			v = 0 // not "-0.00"
		}
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	for _, p := range res.Processes {
		pid, state := "in the runner", p.State
		if p.Exec {
			pid = strconv.Itoa(p.PID)
		}
		switch {
		case state != "":
		case !p.Exec:
			state = "none: runs inside the runner's process"
		case p.EndedAt.IsZero():
			state = "still running"
		default:
			state = "not reported"
		}
		t.Rows = append(t.Rows, []string{p.Name, pid, at(p.StartedAt), at(p.EndedAt), p.End, state, p.Log})
	}
	return t
}

// recoveryTable shows the recovery figures: one row per consumer group,
// then the run's overall figures, inbox rows/s and the outbox. A figure
// that could not be computed says why instead of showing 0.
func recoveryTable(f *recovery.Figures) report.Table {
	t := report.Table{Title: fmt.Sprintf("Recovery (from t=%.1fs, the %s; bound: lag age <= %gs held %gs; deadline t=%.1fs)", f.From, f.Since, f.Bound, f.Hold, f.Deadline),
		Header: []string{"what", "status", "recovery", "peak lag age", "peak records behind", "drain records/s (mean, peak)", "note"}}
	for _, g := range f.Groups {
		t.Rows = append(t.Rows, []string{"group " + g.Name, g.Status, recoveryCell(g.Status, g.RecoverySeconds),
			fmt.Sprintf("%.2fs at t=%.1fs", g.PeakAge, g.PeakAgeT), fmt.Sprintf("%d at t=%.1fs", g.PeakRecords, g.PeakRecordsT),
			result.OptRate(g.DrainRecordsPerSec) + ", " + result.OptRate(g.PeakDrainRecordsPerSec), strings.TrimSpace(g.Reason + " " + g.DrainNote)})
	}
	t.Rows = append(t.Rows, []string{"all groups", f.Status, recoveryCell(f.Status, f.RecoverySeconds), "", fmt.Sprintf("backlog peak %d at t=%.1fs", f.BacklogPeak, f.BacklogPeakT),
		"inbox rows/s " + result.OptRate(f.DrainRowsPerSec), strings.TrimSpace(f.Reason + " " + f.DrainRowsNote)})
	if o := f.Outbox; o != nil {
		t.Rows = append(t.Rows, []string{"outbox", o.Status, recoveryCell(o.Status, o.DrainSeconds), fmt.Sprintf("oldest row %.2fs", o.PeakAge),
			fmt.Sprintf("%d rows at t=%.1fs", o.PeakBacklog, o.PeakT), "", o.Reason})
	}
	t.Rows = append(t.Rows, []string{"samples", fmt.Sprintf("%d (%d unknown)", f.Samples, f.UnknownSamples), "", "", "", "", "one lag poll a second: figures are as fine as that"})
	return t
}

// recoveryCell is a recovery time, or why there is none.
func recoveryCell(status string, v *float64) string {
	switch {
	case v != nil:
		return result.Secs(*v)
	case status == recovery.NotRecovered:
		return "none (not recovered)"
	default:
		return "unknown"
	}
}

func optSecs(v *float64) string {
	if v == nil {
		return "unknown"
	}
	return result.Secs(*v)
}
