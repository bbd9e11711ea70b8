package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"imlab/checker"
	"imlab/expect"
	"imlab/result"
	"imlab/scenario"
)

// loadOf is a load section of duration d, the rest the defaults.
func loadOf(d time.Duration) scenario.LoadSpec {
	l := scenario.LoadSpec{Config: scenario.LoadDefaults()}
	l.Config.Duration = d
	return l
}

// gatedResult is a complete, passing run of the scenario "gated" with the
// given ACK p99 (ms).
func gatedResult(p99ms int64) *result.Result {
	return &result.Result{Format: result.ResultFormat, Scenario: "gated", Spec: &scenario.File{Name: "gated", Load: loadOf(4 * time.Second)},
		Verdict: &checker.Verdict{Valid: true, Attempts: map[string]int{"ok": 400, "fail": 0, "unknown": 0},
			Latency: map[string]checker.Latency{"response": {Count: 400, P50: 1000, P99: p99ms * 1000, P999: p99ms * 1000}}},
		Checks: []result.Check{{Name: "verdict", Want: scenario.VerdictValid, Got: scenario.VerdictValid, OK: true}}, Passed: true}
}

func gatedRun(t *testing.T, baseline *scenario.BaselineSpec, baselineDir string, p99ms int64) *run {
	t.Helper()
	dir := t.TempDir()
	f := &scenario.File{Name: "gated", Path: filepath.Join(dir, "gated.yaml"), Baseline: baseline}
	return &run{cfg: Config{OutDir: filepath.Join(dir, "out"), BaselineDir: baselineDir}, f: f, res: gatedResult(p99ms)}
}

func storeBaseline(t *testing.T, dir string, p99ms int64) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, result.ResultFile)
	if err := result.WriteFile(p, gatedResult(p99ms).WriteJSON); err != nil {
		t.Fatal(err)
	}
	return p
}

func baselineCheck(t *testing.T, r *run) result.Check {
	t.Helper()
	for _, c := range r.res.Checks {
		if c.Name == scenario.BaselineCheck {
			return c
		}
	}
	t.Fatalf("no baseline check in %+v", r.res.Checks)
	return result.Check{}
}

func TestGateBaseline(t *testing.T) {
	base := storeBaseline(t, t.TempDir(), 100)

	r := gatedRun(t, &scenario.BaselineSpec{Result: base}, "", 104)
	r.gateBaseline()
	if c := baselineCheck(t, r); !c.OK || !strings.Contains(c.Got, "no regression") || !strings.Contains(c.Got, "tolerance alone") {
		t.Fatalf("within tolerance: %+v", c)
	}
	if r.res.Baseline == nil || len(r.res.Baseline.Rows) == 0 {
		t.Fatal("the comparison is not in the result")
	}

	r = gatedRun(t, &scenario.BaselineSpec{Result: base}, "", 150)
	r.gateBaseline()
	if c := baselineCheck(t, r); c.OK || !strings.Contains(c.Got, "ack_p99 REGRESSED") {
		t.Fatalf("regression: %+v", c)
	}
	if expect.Passed(r.res.Checks) {
		t.Fatal("a regression must fail the run")
	}

	r = gatedRun(t, &scenario.BaselineSpec{Result: base, Tolerance: "ack_p99:+60%,ack_p999:+60%"}, "", 150)
	r.gateBaseline()
	if c := baselineCheck(t, r); !c.OK {
		t.Fatalf("file tolerance: %+v", c)
	}

	// A relative path is relative to the scenario file.
	r = gatedRun(t, &scenario.BaselineSpec{Result: "stored"}, "", 100)
	storeBaseline(t, filepath.Join(filepath.Dir(r.f.Path), "stored"), 100)
	r.gateBaseline()
	if c := baselineCheck(t, r); !c.OK {
		t.Fatalf("relative: %+v", c)
	}

	// A named baseline that is missing fails: the gate could not compare.
	r = gatedRun(t, &scenario.BaselineSpec{Result: "absent.json"}, "", 100)
	r.gateBaseline()
	if c := baselineCheck(t, r); c.OK || !strings.Contains(c.Got, "unusable") {
		t.Fatalf("missing: %+v", c)
	}

	// A baseline of another scenario is unusable.
	other := gatedResult(100)
	other.Scenario = "other"
	od := t.TempDir()
	if err := result.WriteFile(filepath.Join(od, result.ResultFile), other.WriteJSON); err != nil {
		t.Fatal(err)
	}
	r = gatedRun(t, &scenario.BaselineSpec{Result: od}, "", 100)
	r.gateBaseline()
	if c := baselineCheck(t, r); c.OK {
		t.Fatalf("other scenario: %+v", c)
	}
}

func TestGateBaselineDir(t *testing.T) {
	stored := t.TempDir()
	storeBaseline(t, filepath.Join(stored, "gated"), 100)
	r := gatedRun(t, &scenario.BaselineSpec{Result: "ignored-by-the-dir", Tolerance: "ack_p99:+5%,ack_p999:+5%"}, stored, 110)
	r.gateBaseline()
	if c := baselineCheck(t, r); c.OK {
		t.Fatalf("dir with the file's tolerance: %+v", c)
	}
	// The runner's tolerance applies when the file has none.
	r = gatedRun(t, nil, stored, 110)
	r.cfg.BaselineTolerance = "ack_p99:+50%,ack_p999:+50%"
	r.gateBaseline()
	if c := baselineCheck(t, r); !c.OK || !strings.Contains(c.Want, "+50%") {
		t.Fatalf("runner tolerance: %+v", c)
	}
	// No stored result for this scenario: noted, not gated.
	r = gatedRun(t, nil, t.TempDir(), 100)
	r.gateBaseline()
	for _, c := range r.res.Checks {
		if c.Name == scenario.BaselineCheck {
			t.Fatalf("not stored, yet gated: %+v", c)
		}
	}
	if len(r.res.Errors) != 1 || !strings.Contains(r.res.Errors[0], "not gated") {
		t.Fatalf("errors: %v", r.res.Errors)
	}
	// No baseline at all: nothing happens.
	r = gatedRun(t, nil, "", 100)
	r.gateBaseline()
	if len(r.res.Checks) != 1 || len(r.res.Errors) != 0 {
		t.Fatalf("ungated run changed: %+v", r.res)
	}
}
