package scenarios

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"imlab/compare"
)

// BaselineCheck is the name of the check a baseline adds.
const BaselineCheck = "baseline"

// BaselineSpec names a previous result the run is gated on: every metric
// imlab compare reads from a scenario result (ACKed rate, ACK quantiles,
// errors, lag, recovery, findings, verdict, passed) must not be worse than
// the baseline's beyond its tolerance. Written as a path
// (`baseline: runs/main/smoke/result.json`) or a mapping with tolerances:
//
//	baseline:
//	  result: ../runs/main/smoke     # a result.json or its directory
//	  tolerance: 'ack_p99:+20%,rate:-5%'
//
// A relative path is relative to the scenario file's directory.
type BaselineSpec struct {
	Result    string `yaml:"result" json:"result"`
	Tolerance string `yaml:"tolerance,omitempty" json:"tolerance,omitempty"`
}

// UnmarshalYAML accepts a path or a mapping with result and tolerance.
func (b *BaselineSpec) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		b.Result = n.Value
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if v.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: baseline.%s: want a string", v.Line, k.Value)
			}
			switch k.Value {
			case "result":
				b.Result = v.Value
			case "tolerance":
				b.Tolerance = v.Value
			default:
				return fmt.Errorf("line %d: baseline: unknown field %q (want result, tolerance)", k.Line, k.Value)
			}
		}
		return nil
	default:
		return fmt.Errorf("line %d: baseline: want a path or a mapping with result and tolerance", n.Line)
	}
}

func (b *BaselineSpec) validate() error {
	if b == nil {
		return nil
	}
	if strings.TrimSpace(b.Result) == "" {
		return bad("baseline.result", "empty: want a result.json or its directory")
	}
	if _, err := compare.ParseTolerances(b.Tolerance); err != nil {
		return bad("baseline.tolerance", "%v", err)
	}
	return nil
}

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
		r.res.Checks = append(r.res.Checks, Check{Name: BaselineCheck, Want: want, Got: got})
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
	provisional.Passed = !r.res.Incomplete && Passed(r.res.Checks)
	b, err := json.Marshal(&provisional)
	if err != nil {
		fail("this run's result: " + err.Error())
		return
	}
	nw, err := compare.Parse(filepath.Join(r.cfg.OutDir, ResultFile), b)
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
	r.res.Checks = append(r.res.Checks, Check{Name: BaselineCheck, Want: want, Got: got, OK: len(bad) == 0})
}
