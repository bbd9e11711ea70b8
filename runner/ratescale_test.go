package runner

import (
	"strings"
	"testing"

	"imlab/compose"
	"imlab/loadgen/schedule"
	"imlab/report/runpage"
	"imlab/result"
	"imlab/scenario"
)

// TestRateScale: the embedded MySQL scales the file's rate by
// load.embedded_rate_scale (default ×0.1), the runner's RateScale by its
// own factor on any topology, and a real MySQL not at all; the label names
// the factor, why, and both rates.
func TestRateScale(t *testing.T) {
	half := 0.5
	one := 1.0
	sh := schedule.Constant{PerSec: 200}
	cases := []struct {
		name     string
		embedded []string
		cfg      float64
		file     *float64
		want     float64 // 0: not scaled
		why      string
	}{
		{"real mysql", []string{compose.PartRedis}, 0, nil, 0, ""},
		{"embedded default", []string{compose.PartMySQL, compose.PartRedis}, 0, nil, scenario.DefaultEmbeddedRateScale, result.RateScaleEmbedded},
		{"embedded file", []string{compose.PartMySQL}, 0, &half, 0.5, result.RateScaleEmbedded},
		{"embedded file 1", []string{compose.PartMySQL}, 0, &one, 0, ""},
		{"config on real", nil, 0.25, nil, 0.25, result.RateScaleByConfig},
		{"config wins", []string{compose.PartMySQL}, 0.25, &half, 0.25, result.RateScaleByConfig},
		{"config 1", []string{compose.PartMySQL}, 1, nil, 0, ""},
	}
	for _, c := range cases {
		f := &scenario.File{Load: scenario.LoadSpec{Rate: "const:200", EmbeddedRateScale: c.file}}
		r := &run{cfg: Config{RateScale: c.cfg}, f: f, cb: &compose.Backends{Embedded: c.embedded}}
		rs := r.rateScale(sh)
		if c.want == 0 {
			if rs != nil {
				t.Errorf("%s: scaled %+v, want the file's rate", c.name, rs)
			}
			continue
		}
		if rs == nil || rs.Factor != c.want || rs.For != c.why || rs.FileRate != "const:200" {
			t.Errorf("%s: %+v, want ×%g for %s", c.name, rs, c.want, c.why)
		}
	}
	rs := result.RateScale{Factor: 0.1, For: result.RateScaleEmbedded, FileRate: "const:200", RunRate: "const:20"}
	if got, want := rs.Label(), "rates scaled ×0.1 for the embedded topology (file const:200, run const:20)"; got != want {
		t.Fatalf("label %q, want %q", got, want)
	}
	rep := runpage.HTMLReport(&result.Result{Scenario: "s", RateScale: &rs, Backends: "mysql=embedded"})
	if !strings.Contains(rep.Backends, rs.Label()) || len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], rs.Label()) {
		t.Fatalf("report does not carry the scale: %q %q", rep.Backends, rep.Notes)
	}
}
