// Package batch runs a set of scenario files one after another, as imlab
// scenario run and imlab demo do: each run through the runner into a
// directory of its own, each result printed, then the verdict table, the
// recovery figures side by side for a matrix, and one junit.xml for all.
//
// It must not carry a run out itself (the runner does) nor decide a
// process's exit status (a command maps the Outcome to one).
package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"imlab/expect"
	"imlab/loadgen/summary"
	"imlab/result"
	"imlab/runner"
	"imlab/runner/proc"
	"imlab/scenario"
)

// Outcome is the worst of a set of runs.
type Outcome int

// Outcomes of Run, worst last.
const (
	Passed Outcome = iota // every check of every run passed
	Failed                // a check failed
	Broken                // a run could not be carried out, or the outputs not written
)

// Run runs files one after another with base, each into OUT/NAME,
// prints each result (PrintResult) and, at the end, the verdict table
// (for a matrix, the recovery figures side by side too) and writes
// OUT/junit.xml for all of them. A run that could not be carried out is
// said on errw and the next one runs; the error is one of the outputs'.
func Run(ctx context.Context, base runner.Config, files []*scenario.File, out string, matrix bool, w, errw io.Writer) (Outcome, error) {
	var (
		results []*result.Result
		rows    []verdictRow
	)
	worst := Passed
	for _, sf := range files {
		c := base
		c.OutDir = filepath.Join(out, sf.Name)
		fmt.Fprintf(w, "=== scenario %s (%s)\n", sf.Name, sf.Path)
		res, err := runner.Run(ctx, c, sf)
		if res != nil {
			results = append(results, res)
			PrintResult(w, res, c.OutDir)
		}
		rows = append(rows, newVerdictRow(sf, res, err, c.OutDir))
		switch {
		case err != nil:
			fmt.Fprintf(errw, "scenario %s: %v\n", sf.Name, err)
			worst = max(worst, Broken)
		case !res.Passed:
			worst = max(worst, Failed)
		}
		if ctx.Err() != nil {
			break
		}
	}
	printVerdictTable(w, rows)
	if matrix && len(results) > 0 {
		fmt.Fprintf(w, "=== recovery side by side\n%s", result.MatrixTable(results))
	}
	if len(results) == 0 {
		return worst, nil
	}
	if err := writeJUnit(out, results); err != nil {
		return Broken, err
	}
	fmt.Fprintf(w, "junit (all scenarios): %s\n", filepath.Join(out, result.JUnitFile))
	return worst, nil
}

// writeJUnit writes OUT/junit.xml of every result.
func writeJUnit(out string, results []*result.Result) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	fh, err := os.Create(filepath.Join(out, result.JUnitFile))
	if err != nil {
		return err
	}
	return errors.Join(result.WriteJUnit(fh, results...), fh.Close())
}

// PrintResult prints one run's result as imlab scenario run does: its
// status, rate scale, load, fault events, the processes a fault took
// down, repairs, dead letters, findings, checks, errors and the files it
// wrote in dir.
func PrintResult(w io.Writer, r *result.Result, dir string) {
	status := "PASSED"
	if !r.Passed {
		status = "FAILED"
	}
	if r.Incomplete {
		status = "NOT CARRIED OUT"
	}
	if r.Skipped != "" && !r.Incomplete {
		status = "SKIPPED"
	}
	fmt.Fprintf(w, "--- scenario %s: %s in %.1fs (%s)\n", r.Scenario, status, r.Seconds, r.Backends)
	for _, l := range result.FallbackLines(r.Fallbacks) {
		fmt.Fprintf(w, "    %s\n", l)
	}
	if r.Skipped != "" {
		fmt.Fprintf(w, "    skipped on these backends: %s\n", r.Skipped)
	}
	if r.RateScale != nil {
		fmt.Fprintf(w, "    %s\n", r.RateScale.Label())
	}
	if o, _, ok := r.LoadOutcome(); ok {
		line := fmt.Sprintf("    load: %s (achieved %.0f ACKed sends/s; unknown %.1f%%, failed %.1f%%, retried %.1f%%)",
			r.LoadLabel(), o.AckedPerSec, 100*o.UnknownFrac, 100*o.FailFrac, 100*o.RetriedFrac)
		if c := r.LoadCause(); c != "" {
			line += ": " + c
		}
		fmt.Fprintln(w, line)
	}
	for _, e := range r.Events {
		line := fmt.Sprintf("    fault t=%.1fs %s %s", e.At, e.Action, e.Fault)
		if e.Affected > 0 {
			line += fmt.Sprintf(" (%d affected)", e.Affected)
		}
		if e.Err != "" {
			line += ": " + e.Err
		}
		fmt.Fprintln(w, line)
	}
	// Processes a fault took down (or that ended otherwise than by the
	// final stop): every incarnation, with how it ended.
	incarnations := map[string]int{}
	for _, p := range r.Processes {
		incarnations[p.Name]++
	}
	for _, p := range r.Processes {
		if incarnations[p.Name] < 2 && p.End == proc.EndStopped {
			continue
		}
		line := fmt.Sprintf("    process %s", p.Name)
		if p.Exec {
			line += fmt.Sprintf(" pid %d", p.PID)
		}
		line += " " + p.End
		if p.State != "" {
			line += " (" + p.State + ")"
		}
		fmt.Fprintln(w, line)
	}
	if rp := r.Repairs; r.Skipped == "" && r.Capacity == nil && (rp.Rows > 0 || !rp.Known) {
		line := fmt.Sprintf("    repairs: %d inbox rows of %d messages written by forward reconciliation (missing when the reconciler looked)", rp.Rows, len(rp.MsgIDs))
		if !rp.Known {
			line += " (unknown: " + strings.Join(rp.Errors, "; ") + ")"
		}
		if fl := rp.FateLine(); fl != "" {
			line += "; " + fl
		}
		fmt.Fprintln(w, line)
	}
	if d := r.DeadLetters; d != nil && d.Worth() {
		fmt.Fprintln(w, "    dead letters: "+d.AccountLine())
	}
	printFindings(w, r)
	if len(r.Checks) > 0 {
		fmt.Fprint(w, expect.Table(r.Checks))
		if r.RateScale != nil {
			fmt.Fprintf(w, "      checked at %s: rates ×%g for %s\n", r.RateScale.RunRate, r.RateScale.Factor, r.RateScale.For)
		}
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "    %s\n", result.ErrorLine(e))
	}
	for _, n := range []string{result.ResultFile, result.JUnitFile, result.ReportFile, runner.VerdictFile, result.LoadDir} {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); err == nil {
			fmt.Fprintf(w, "    wrote %s\n", p)
		}
	}
}

// verdictRow is one line of the verdict table printed after a set of
// scenarios.
type verdictRow struct {
	name, expect, verdict, load, result, lost, report string
	seconds                                           float64
}

func newVerdictRow(f *scenario.File, res *result.Result, err error, dir string) verdictRow {
	// A cell with no figure says why: never a bare "-".
	r := verdictRow{name: f.Name, expect: f.Expect.VerdictOr(), verdict: "none (no result)", load: "not run", result: "NOT CARRIED OUT",
		lost: "not run", report: "none written"}
	if res == nil {
		return r
	}
	r.seconds = res.Seconds
	if v := res.Verdict; v != nil {
		r.verdict = "INVALID"
		if v.Valid {
			r.verdict = "VALID"
		}
	}
	for _, f := range res.Findings {
		if f.Name == "lost" && res.Verdict != nil {
			r.lost = fmt.Sprint(f.Count)
		}
	}
	switch {
	case err != nil || res.Incomplete:
	case res.Skipped != "":
		r.result = "SKIPPED"
	case res.Passed:
		r.result = "PASSED"
	default:
		r.result = "FAILED"
	}
	r.load = loadCell(f, res)
	if c := res.Capacity; c != nil {
		r.verdict, r.load, r.lost = capacityCells(c)
	} else if res.Verdict == nil {
		r.verdict, r.lost = "not checked", "not checked"
	}
	if p := filepath.Join(dir, result.ReportFile); fileExists(p) {
		r.report = p
	}
	return r
}

// capacityCells are a capacity search's verdict, load and lost cells: its
// steps' verdicts counted, its answer's rate, and where each step's lost
// count is (a search has no whole-run verdict or load of its own).
func capacityCells(c *result.CapacitySummary) (verdict, load, lost string) {
	switch {
	case c.Checked == 0:
		verdict = fmt.Sprintf("no step checked (of %d)", c.Steps)
	case c.Invalid == 0:
		verdict = fmt.Sprintf("VALID in %d of %d steps", c.Checked, c.Steps)
	default:
		verdict = fmt.Sprintf("INVALID in %d of %d checked steps", c.Invalid, c.Checked)
	}
	load = "capacity search: no sustainable rate (its answer says why)"
	if c.Sustainable != nil {
		load = fmt.Sprintf("capacity search: %g/s held the SLO", *c.Sustainable)
	}
	return verdict, load, "per step, in its report"
}

// loadCell is the verdict table's load column: "within load", or
// OVERLOADED with the limits the run went above in short ("unknown 59%",
// "late 68%", "retried 98%"), and, when the scenario passed all the same,
// what its file allowed of it and what no expectation limits: a PASSED
// beside it does not say the server kept up. "no sends recorded" when the
// result has no load.
func loadCell(f *scenario.File, res *result.Result) string {
	o, _, ok := res.LoadOutcome()
	switch {
	case !ok:
		return "no sends recorded"
	case !o.Overloaded:
		return "within load"
	}
	var why []string
	if o.LateOver() {
		why = append(why, fmt.Sprintf("late %.0f%%", 100*o.LateFrac))
	}
	if o.FailFrac+o.UnknownFrac > o.Limit {
		if o.UnknownFrac > 0 {
			why = append(why, fmt.Sprintf("unknown %.0f%%", 100*o.UnknownFrac))
		}
		if o.FailFrac > 0 {
			why = append(why, fmt.Sprintf("failed %.0f%%", 100*o.FailFrac))
		}
	}
	if o.RetriedFrac > o.Limit {
		why = append(why, fmt.Sprintf("retried %.0f%%", 100*o.RetriedFrac))
	}
	cell := "OVERLOADED: " + strings.Join(why, ", ")
	if label := res.LoadLabel(); strings.HasPrefix(label, "OVERLOADED by ") {
		cell += " (" + strings.TrimPrefix(label, "OVERLOADED ") + ")"
	}
	if res.Passed && res.Skipped == "" && !res.Incomplete {
		cell += "; " + passedAnyway(f, o)
	}
	return cell
}

// passedAnyway says, for a run that PASSED though OVERLOADED, which of
// its overload the file's expect allowed and which no expectation limits:
// a max_send_fail_ratio bounds failed and unknown sends, nothing bounds
// late or retried ones.
func passedAnyway(f *scenario.File, o summary.Outcome) string {
	var said []string
	if o.FailFrac+o.UnknownFrac > o.Limit {
		if m := f.Expect.MaxSendFailRatio; m != nil {
			said = append(said, fmt.Sprintf("the file's max_send_fail_ratio %g allowed the failed and unknown", *m))
		} else {
			said = append(said, "no expectation of the file limits failed or unknown sends")
		}
	}
	var free []string
	if o.LateOver() {
		free = append(free, "late")
	}
	if o.RetriedFrac > o.Limit {
		free = append(free, "retried")
	}
	if len(free) > 0 {
		said = append(said, "no expectation limits "+strings.Join(free, " or ")+" sends")
	}
	return "passed on its checks: " + strings.Join(said, "; ")
}

// printVerdictTable prints one line per scenario: what the checker found
// against what the scenario expects, and where its report is.
func printVerdictTable(w io.Writer, rows []verdictRow) {
	fmt.Fprintln(w, "\nverdicts (a scenario passes when the checker's verdict and every expectation match the file; expect invalid: a negative control;"+
		" load: whether the target kept up with the offered rate, within load or OVERLOADED, which a PASSED does not say)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\texpect\tverdict\tload\tlost\tresult\ttime\treport")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.0fs\t%s\n", r.name, r.expect, r.verdict, r.load, r.lost, r.result, r.seconds, r.report)
	}
	tw.Flush()
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// printFindings prints each non-zero finding with what its count counts
// and a few examples (or msg_ids).
func printFindings(w io.Writer, r *result.Result) {
	for _, f := range r.Findings {
		if f.Count > 0 {
			ex := f.Examples[:min(3, len(f.Examples))]
			if len(ex) == 0 {
				for _, id := range f.MsgIDs[:min(5, len(f.MsgIDs))] {
					ex = append(ex, fmt.Sprint(id))
				}
				if len(ex) > 0 {
					ex[0] = "msg_ids " + ex[0]
				}
			}
			eg := ""
			if len(ex) > 0 {
				eg = ", e.g. " + strings.Join(ex, "; ")
			}
			fmt.Fprintf(w, "    %s: %s%s\n", f.Name, f.CountText(), eg)
		}
	}
}
