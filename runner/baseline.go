package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"imlab/compare"
	"imlab/expect"
	"imlab/result"
	"imlab/scenario"
)

// baselinePath is where the run's baseline is: the runner's BaselineDir
// (DIR/NAME) when set, else the file's baseline relative to the file.
// optional tells that a missing baseline is not a failure (a directory
// of stored results need not hold every scenario).
func (r *run) baselinePath() (path string, optional bool) {
	if r.cfg.BaselineDir != "" {
		return filepath.Join(r.cfg.BaselineDir, r.f.Name), true
	}
	if r.f.Baseline == nil {
		return "", false
	}
	p := r.f.Baseline.Result
	if !filepath.IsAbs(p) && r.f.Path != "" {
		p = filepath.Join(filepath.Dir(r.f.Path), p)
	}
	return p, false
}

// GateBaseline gates res, the result of running f with cfg, on the
// baseline cfg.BaselineDir or f names: it appends the baseline check to
// res.Checks and sets res.Baseline (what a run does before it writes its
// outputs; a stored result can be gated again with it).
func GateBaseline(cfg Config, f *scenario.File, res *result.Result) {
	(&run{cfg: cfg, f: f, res: res}).gateBaseline()
}

// gateBaseline compares the run's result, as it stands, with the
// baseline and adds the baseline check (and the comparison to the result).
// An unusable baseline fails the check: a gate that cannot compare does
// not pass.
func (r *run) gateBaseline() {
	path, optional := r.baselinePath()
	if path == "" {
		return
	}
	tol := r.cfg.BaselineTolerance
	if r.f.Baseline != nil && r.f.Baseline.Tolerance != "" {
		tol = r.f.Baseline.Tolerance
	}
	want := "no regression against " + path
	if tol != "" {
		want += " (" + tol + ")"
	}
	fail := func(got string) {
		r.res.Checks = append(r.res.Checks, result.Check{Name: scenario.BaselineCheck, Want: want, Got: got})
	}
	if _, err := os.Stat(path); optional && errors.Is(err, os.ErrNotExist) {
		r.res.Errors = append(r.res.Errors, fmt.Sprintf("baseline: no stored result at %s: not gated", path))
		return
	}
	base, err := compare.Read(path)
	if err != nil {
		fail("baseline unusable: " + err.Error())
		return
	}
	ts, err := compare.ParseTolerances(tol)
	if err != nil {
		fail(err.Error())
		return
	}
	provisional := *r.res
	provisional.Passed = !r.res.Incomplete && expect.Passed(r.res.Checks)
	b, err := json.Marshal(&provisional)
	if err != nil {
		fail("this run's result: " + err.Error())
		return
	}
	nw, err := compare.Parse(filepath.Join(r.cfg.OutDir, result.ResultFile), b)
	if err != nil {
		fail("this run's result: " + err.Error())
		return
	}
	rep, err := compare.Compare([]*compare.Run{base}, []*compare.Run{nw}, compare.Options{Tolerances: ts})
	if err != nil {
		fail(err.Error())
		return
	}
	r.res.Baseline = rep
	var bad []string
	for _, row := range rep.Rows {
		if row.Bad() {
			bad = append(bad, fmt.Sprintf("%s %s (%s -> %s)", row.Metric, row.Verdict,
				compare.FormatValue(row.Unit, row.Base), compare.FormatValue(row.Unit, row.New)))
		}
	}
	got := rep.Outcome()
	if len(bad) > 0 {
		got = strings.Join(bad, "; ") + " [" + rep.Outcome() + "]"
	}
	r.res.Checks = append(r.res.Checks, result.Check{Name: scenario.BaselineCheck, Want: want, Got: got, OK: len(bad) == 0})
}
