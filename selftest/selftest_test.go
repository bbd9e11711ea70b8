package selftest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"imlab/checker"
	"imlab/compare"
	"imlab/report"
	"imlab/report/runpage"
	"imlab/result"
	"imlab/runner"
	"imlab/scenario"
)

// TestMatrixProblems: a defect no scenario caught and a scenario the
// unmodified server failed are problems; error cells catch nothing.
func TestMatrixProblems(t *testing.T) {
	m := &Matrix{Defects: []string{"a", "b"}, Scenarios: []string{"s1", "s2"}, Cells: []Cell{
		{Defect: Unmodified, Scenario: "s1", Outcome: CellPass}, {Defect: Unmodified, Scenario: "s2", Outcome: CellPass},
		{Defect: "a", Scenario: "s1", Outcome: CellMissed}, {Defect: "a", Scenario: "s2", Outcome: CellCaught},
		{Defect: "b", Scenario: "s1", Outcome: CellError}, {Defect: "b", Scenario: "s2", Outcome: CellTiming},
	}}
	probs := m.Problems()
	if len(probs) != 1 || !strings.Contains(probs[0], "defect b was missed") {
		t.Fatalf("problems %v", probs)
	}
	if got := m.CaughtBy("a"); len(got) != 1 || got[0] != "s2" {
		t.Fatalf("caught by %v", got)
	}
	m.Cells[1].Outcome = CellFail
	if probs := m.Problems(); len(probs) != 2 || !strings.Contains(probs[0], "did not pass s2") {
		t.Fatalf("problems %v", probs)
	}
	tab := m.Table()
	for _, want := range []string{"(unmodified)", "caught", "missed", "error", "FAIL"} {
		if !strings.Contains(tab, want) {
			t.Fatalf("table lacks %q:\n%s", want, tab)
		}
	}
	if !onlyTiming([]string{"max_ack_p99", "min_rate_ratio"}) || onlyTiming([]string{"max_ack_p99", "max_lost"}) || onlyTiming(nil) {
		t.Fatal("onlyTiming")
	}
	if _, err := Selftest(context.Background(), SelftestConfig{Defects: []string{"no-such"}}, []*scenario.File{{Name: "x"}}); err == nil {
		t.Fatal("an unknown defect was accepted")
	}
}

// TestSelftestShort is the short form of the shipped matrix: redis-wipe,
// at half its rate, against the unmodified server (it must pass) and three
// shipped defects (each must be caught).
func TestSelftestShort(t *testing.T) {
	t.Parallel()
	f, err := scenario.ReadFile("../scenarios/redis-wipe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Under -race on a shared machine sends time out more often than the
	// file's send-failure bound allows; the matrix here is about the
	// verdict, so that bound is left out.
	f.Expect.MaxSendFailRatio = nil
	// Half the file's rate and a longer drain: the cells judge the server,
	// and under -race on a loaded machine the devices of a 200/s run may
	// not reach the end of their inboxes within the file's 60s.
	f.Load.Rate = "const:100"
	f.Load.Config.DrainTimeout = 2 * time.Minute
	base := e2eConfig(t)
	base.FreshDatabase = true // one database per run, next to the test's
	base.RedisPrefix = ""     // one prefix per run; each run deletes its own
	// The file's own 6s: its wipe at 3s must find keys, and the time base
	// precedes the load by loadgen's set-up, which is slow under -race.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var progress strings.Builder
	m, err := Selftest(ctx, SelftestConfig{Base: base, Defects: []string{"cursor-on-pull", "seq-reuse-after-rollback", "inbox-row-dropped"}, Progress: &progress}, []*scenario.File{f})
	t.Logf("%s\n%s", progress.String(), m.Table())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range m.Cells {
		if len(c.Why) > 0 {
			t.Logf("%s × %s: %v", c.Defect, c.Scenario, c.Why)
		}
	}
	if probs := m.Problems(); len(probs) > 0 {
		t.Fatalf("problems: %v", probs)
	}
	for _, d := range m.Defects {
		if c, _ := m.Cell(d, f.Name); c.Outcome != CellCaught {
			t.Errorf("%s: %s", d, c.Outcome)
		}
	}
	clean, _ := m.Cell(Unmodified, f.Name)
	lossy, _ := m.Cell("inbox-row-dropped", f.Name)
	readersOfRealRuns(t, f, clean.Dir, lossy.Dir)
}

// readersOfRealRuns reads two runs of one scenario as the runner wrote
// them, one clean and one whose server lost messages, with every reader
// of result.json: compare gates the lossy run against the clean one on its
// findings, the baseline gate does the same inside a run, and the review
// page lists the lost msg_ids.
func readersOfRealRuns(t *testing.T, f *scenario.File, cleanDir, lossyDir string) {
	t.Helper()
	lossy, err := result.ReadRun(lossyDir)
	if err != nil {
		t.Fatal(err)
	}
	var bad []result.FindingSummary // the lossy run's deciding findings
	for _, fd := range lossy.Findings {
		if fd.Count > 0 && slices.Contains(checker.Deciding, fd.Name) {
			bad = append(bad, fd)
		}
	}
	if len(bad) == 0 {
		t.Fatalf("the defect's run has no deciding finding: %+v", lossy.Findings)
	}
	base, err := compare.Read(cleanDir)
	if err != nil {
		t.Fatal(err)
	}
	nw, err := compare.Read(lossyDir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := compare.Compare([]*compare.Run{base}, []*compare.Run{nw}, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range bad {
		for _, row := range rep.Rows {
			if row.Metric == fd.Name && (row.Verdict != compare.VRegressed || row.New != float64(fd.Count) || row.Base != 0) {
				t.Errorf("compare: %s row %+v, want 0 -> %d REGRESSED", fd.Name, row, fd.Count)
			}
		}
	}
	// The baseline gate: the lossy run gated on the clean one as stored.
	stored := t.TempDir()
	if err := os.CopyFS(filepath.Join(stored, f.Name), os.DirFS(cleanDir)); err != nil {
		t.Fatal(err)
	}
	lossy.Checks = slices.DeleteFunc(lossy.Checks, func(c result.Check) bool { return c.Name == scenario.BaselineCheck })
	runner.GateBaseline(runner.Config{OutDir: t.TempDir(), BaselineDir: stored}, f, lossy)
	if c := baselineCheck(t, lossy); c.OK || !strings.Contains(c.Got, bad[0].Name+" REGRESSED") {
		t.Errorf("baseline gate: %+v, want %s REGRESSED", c, bad[0].Name)
	}
	// The review page.
	clean, err := result.ReadRun(cleanDir)
	if err != nil {
		t.Fatal(err)
	}
	page, err := runpage.Review([]*result.Result{clean, lossy})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := report.WriteHTML(&b, page); err != nil {
		t.Fatal(err)
	}
	if html := b.String(); !strings.Contains(html, "#2 "+f.Name+": "+bad[0].Name) || !strings.Contains(html, strconv.FormatUint(bad[0].MsgIDs[0], 10)) {
		t.Errorf("the review page does not list the %s msg_ids", bad[0].Name)
	}
}

// baselineCheck is res's baseline check.
func baselineCheck(t *testing.T, res *result.Result) result.Check {
	t.Helper()
	for _, c := range res.Checks {
		if c.Name == scenario.BaselineCheck {
			return c
		}
	}
	t.Fatalf("no baseline check in %+v", res.Checks)
	return result.Check{}
}
