package schedule

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
)

// TestScale: every kind keeps its times, multiplies its rates, and prints a
// spec that parses back to the scaled shape; a factor outside (0, 1] is
// refused.
func TestScale(t *testing.T) {
	for spec, want := range map[string]string{
		"const:200":                                    "const:20",
		"steps:100@2s,50@3s":                           "steps:10@2s,5@3s",
		"burst:base=80,peak=800,at=2s,len=2s":          "burst:base=8,peak=80,at=2s,len=2s",
		"burst:base=80,peak=800,at=2s,len=2s,every=5s": "burst:base=8,peak=80,at=2s,len=2s,every=5s",
		"sine:mean=100,amp=50,period=4s":               "sine:mean=10,amp=5,period=4s",
	} {
		sh, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Scale(sh, 0.1)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if got.String() != want {
			t.Errorf("%s ×0.1 = %s, want %s", spec, got, want)
		}
		back, err := Parse(got.String())
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("%s: %s does not parse back (%v, %#v)", spec, got, err, back)
		}
		for _, at := range []time.Duration{0, 2500 * time.Millisecond, 5 * time.Second} {
			if r, w := got.Rate(at), sh.Rate(at)*0.1; math.Abs(r-w) > 1e-9*w {
				t.Errorf("%s ×0.1 at %s: %g, want %g", spec, at, r, w)
			}
		}
	}
	one, err := Scale(Constant{PerSec: 7}, 1)
	if err != nil || one != (Constant{PerSec: 7}) {
		t.Fatalf("×1: %v %v", one, err)
	}
	for _, f := range []float64{0, -1, 1.5} {
		if _, err := Scale(Constant{PerSec: 7}, f); !errors.Is(err, ErrInvalid) {
			t.Errorf("factor %g: %v, want ErrInvalid", f, err)
		}
	}
}
