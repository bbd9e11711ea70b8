package batch

import (
	"bytes"
	"strings"
	"testing"

	"imlab/checker"
	"imlab/result"
	"imlab/scenario"
)

// TestPrintResultSaysFallbackFirst: a run whose MySQL fell back to the
// embedded one says so, with the cause, right under its status line, not
// after the checks.
func TestPrintResultSaysFallbackFirst(t *testing.T) {
	res := &result.Result{Scenario: "s", Passed: true, Backends: "mysql=embedded go-mysql-server (fallback: no mariadbd or mysqld on PATH)",
		Fallbacks: map[string]string{"mysql": "no mariadbd or mysqld on PATH"},
		Checks:    []result.Check{{Name: "verdict", Want: "VALID", Got: "VALID", OK: true}}}
	var b bytes.Buffer
	PrintResult(&b, res, t.TempDir())
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 2 || lines[1] != "    fallback: mysql runs embedded in place of a local server: no mariadbd or mysqld on PATH" {
		t.Fatalf("the line under the status is not the fallback:\n%s", b.String())
	}
}

// TestVerdictTableSaysOverloaded: a scenario that PASSED with 59% of its
// sends unknown (its file allows up to 0.6) says OVERLOADED, why, and that
// the file allowed it, in the verdict table's load column, not only
// "VALID PASSED"; a run within load says so.
func TestVerdictTableSaysOverloaded(t *testing.T) {
	ratio := 0.6
	f := &scenario.File{Name: "strict-mysql"}
	f.Expect.MaxSendFailRatio = &ratio
	retried := uint64(0)
	over := &result.Result{Scenario: "strict-mysql", Passed: true, Verdict: &checker.Verdict{Valid: true}, RetriedSends: &retried,
		Sends: []result.SendSecond{{T: 0, Started: 100, OK: 41, Unknown: 59}}}
	within := &result.Result{Scenario: "calm", Passed: true, Verdict: &checker.Verdict{Valid: true}, RetriedSends: &retried,
		Sends: []result.SendSecond{{T: 0, Started: 100, OK: 100}}}
	var b bytes.Buffer
	printVerdictTable(&b, []verdictRow{newVerdictRow(f, over, nil, t.TempDir()), newVerdictRow(&scenario.File{Name: "calm"}, within, nil, t.TempDir())})
	out := b.String()
	for _, want := range []string{"load", "OVERLOADED: unknown 59%; passed on its checks: the file's max_send_fail_ratio 0.6 allowed the failed and unknown", "within load"} {
		if !strings.Contains(out, want) {
			t.Errorf("the verdict table does not say %q:\n%s", want, out)
		}
	}
	// Retried sends are limited by no expectation: the line says so, and
	// does not credit the file with allowing them.
	many := uint64(39)
	retry := &result.Result{Scenario: "strict-mysql", Passed: true, Verdict: &checker.Verdict{Valid: true}, RetriedSends: &many,
		Sends: []result.SendSecond{{T: 0, Started: 100, OK: 72, Unknown: 28}}}
	if cell := newVerdictRow(f, retry, nil, t.TempDir()).load; cell != "OVERLOADED: unknown 28%, retried 39%; passed on its checks: the file's max_send_fail_ratio 0.6 allowed the failed and unknown; no expectation limits retried sends" {
		t.Errorf("retried load cell %q", cell)
	}
	// A capacity search: its steps' verdicts and its answer, not dashes.
	held := 160.0
	capRow := newVerdictRow(&scenario.File{Name: "capacity-smoke"}, &result.Result{Scenario: "capacity-smoke", Passed: true,
		Capacity: &result.CapacitySummary{Steps: 5, Checked: 5, Sustainable: &held}}, nil, t.TempDir())
	if capRow.verdict != "VALID in 5 of 5 steps" || capRow.load != "capacity search: 160/s held the SLO" || capRow.lost != "per step, in its report" {
		t.Errorf("capacity row %+v", capRow)
	}
	// No verdict: said, not a dash.
	if r := newVerdictRow(&scenario.File{Name: "calm"}, &result.Result{Scenario: "calm", Passed: true}, nil, t.TempDir()); r.verdict != "not checked" || r.lost != "not checked" {
		t.Errorf("unchecked row %+v", r)
	}
}

// TestVerdictTableCellsSayWhy: no cell of the verdict table is a bare
// "-": a capacity search (the result.json capacity-smoke wrote) is judged
// step by step, a skipped scenario was not checked, a scenario that could
// not be carried out has no result, a run without a page says so.
func TestVerdictTableCellsSayWhy(t *testing.T) {
	capRes, err := result.ReadResult("../../report/runpage/testdata/capacity-smoke.result.json")
	if err != nil {
		t.Fatal(err)
	}
	skipped := &result.Result{Scenario: "skipped", Passed: true, Skipped: "backends.skip_embedded: not for the embedded topology"}
	rows := []verdictRow{
		newVerdictRow(&scenario.File{Name: "capacity-smoke"}, capRes, nil, t.TempDir()),
		newVerdictRow(&scenario.File{Name: "skipped"}, skipped, nil, t.TempDir()),
		newVerdictRow(&scenario.File{Name: "broken"}, nil, nil, t.TempDir()),
	}
	for _, r := range rows {
		for name, cell := range map[string]string{"verdict": r.verdict, "load": r.load, "lost": r.lost, "report": r.report} {
			if strings.TrimSpace(cell) == "-" || cell == "" {
				t.Errorf("%s: %s cell %q says nothing of why", r.name, name, cell)
			}
		}
	}
	if v := rows[0].verdict; !strings.Contains(v, "VALID in 5 of 5 steps") {
		t.Errorf("capacity verdict cell %q: want its steps' verdicts", v)
	}
	var b bytes.Buffer
	printVerdictTable(&b, rows)
	t.Log("\n" + b.String())
}
