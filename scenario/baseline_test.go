package scenario

import (
	"errors"
	"testing"
)

const baselineFile = `
name: gated
load:
  rate: const:100
  duration: 4s
  users: 10
expect:
  verdict: valid
`

func TestParseBaseline(t *testing.T) {
	f, err := Parse("t", []byte(baselineFile+"baseline: ../runs/main/gated/result.json\n"))
	if err != nil || f.Baseline == nil || f.Baseline.Result != "../runs/main/gated/result.json" || f.Baseline.Tolerance != "" {
		t.Fatalf("scalar: %v %+v", err, f)
	}
	f, err = Parse("t", []byte(baselineFile+"baseline:\n  result: base\n  tolerance: 'ack_p99:+20%,rate:-5%'\n"))
	if err != nil || f.Baseline.Result != "base" || f.Baseline.Tolerance != "ack_p99:+20%,rate:-5%" {
		t.Fatalf("mapping: %v %+v", err, f.Baseline)
	}
	for name, tail := range map[string]string{
		"bad tolerance": "baseline:\n  result: base\n  tolerance: 'ack_p99:-20%'\n",
		"unknown field": "baseline:\n  result: base\n  tolerence: 'ack_p99:+20%'\n",
		"empty":         "baseline:\n  tolerance: 'ack_p99:+20%'\n",
		"a list":        "baseline: [a, b]\n",
	} {
		if _, err := Parse("t", []byte(baselineFile+tail)); !errors.Is(err, ErrInvalid) && err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
