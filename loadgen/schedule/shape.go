// Package schedule owns the open-loop arrival model of the load generator:
// rate shapes (constant, steps, bursts over a base, sine), the iterator that
// turns a shape into intended send times, and the pacer that hands each
// intended send to a worker at that time, growing the worker pool when all
// workers are busy.
//
// Intended times come from the shape alone, never from how fast the target
// answers (open model, no coordinated omission). A send that starts later
// than intended is still sent and counted as late; a send that cannot start
// before the run's hard deadline is counted as missed. Nothing is dropped
// without being counted.
//
// It must not know what a send is: the caller's handler does the work. It does
// no I/O.
package schedule

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid marks a bad shape specification or configuration.
var ErrInvalid = errors.New("schedule: invalid")

// MaxRate bounds any shape's rate (sends per second).
const MaxRate = 10_000_000

// Shape gives the intended send rate (per second) at offset t from the start
// of the run. Rates are never negative.
type Shape interface {
	Rate(t time.Duration) float64
	String() string
}

// Constant is a fixed rate.
type Constant struct{ PerSec float64 }

// Rate implements Shape.
func (c Constant) Rate(time.Duration) float64 { return c.PerSec }

func (c Constant) String() string { return fmt.Sprintf("const:%g", c.PerSec) }

// Step is one segment of a Steps shape.
type Step struct {
	Dur    time.Duration
	PerSec float64
}

// Steps is a sequence of constant segments; the last one lasts forever.
type Steps struct{ Steps []Step }

// Rate implements Shape.
func (s Steps) Rate(t time.Duration) float64 {
	for _, st := range s.Steps {
		if t < st.Dur {
			return st.PerSec
		}
		t -= st.Dur
	}
	if len(s.Steps) == 0 {
		return 0
	}
	return s.Steps[len(s.Steps)-1].PerSec
}

func (s Steps) String() string {
	parts := make([]string, len(s.Steps))
	for i, st := range s.Steps {
		parts[i] = fmt.Sprintf("%g@%s", st.PerSec, st.Dur)
	}
	return "steps:" + strings.Join(parts, ",")
}

// Burst is a base rate with bursts of Peak lasting Len starting at At and,
// if Every > 0, repeating every Every.
type Burst struct {
	Base, Peak float64
	At, Len    time.Duration
	Every      time.Duration
}

// Rate implements Shape.
func (b Burst) Rate(t time.Duration) float64 {
	if t < b.At {
		return b.Base
	}
	off := t - b.At
	if b.Every > 0 {
		off %= b.Every
	}
	if off < b.Len {
		return b.Peak
	}
	return b.Base
}

func (b Burst) String() string {
	s := fmt.Sprintf("burst:base=%g,peak=%g,at=%s,len=%s", b.Base, b.Peak, b.At, b.Len)
	if b.Every > 0 {
		s += ",every=" + b.Every.String()
	}
	return s
}

// Sine oscillates around Mean with amplitude Amp and period Period.
// The rate is clamped at zero.
type Sine struct {
	Mean, Amp float64
	Period    time.Duration
}

// Rate implements Shape.
func (s Sine) Rate(t time.Duration) float64 {
	r := s.Mean + s.Amp*math.Sin(2*math.Pi*float64(t)/float64(s.Period))
	if r < 0 {
		return 0
	}
	return r
}

func (s Sine) String() string {
	return fmt.Sprintf("sine:mean=%g,amp=%g,period=%s", s.Mean, s.Amp, s.Period)
}

// shapeKinds lists the kinds Parse knows, with an example of each.
const shapeKinds = "KIND one of const (const:1000), steps (steps:1000@10s,5000@20s), " +
	"burst (burst:base=500,peak=5000,at=5s,len=5s[,every=60s]) or sine (sine:mean=5000,amp=2000,period=30s)"

// Parse reads a shape specification:
//
//	const:5000
//	steps:1000@10s,5000@20s
//	burst:base=5000,peak=50000,at=5s,len=10s[,every=60s]
//	sine:mean=5000,amp=2000,period=30s
func Parse(spec string) (Shape, error) {
	kind, args, ok := strings.Cut(strings.TrimSpace(spec), ":")
	if !ok {
		return nil, fmt.Errorf("%w: shape %q: want KIND:ARGS, %s", ErrInvalid, spec, shapeKinds)
	}
	var sh Shape
	switch kind {
	case "const", "constant":
		r, err := parseRate(args)
		if err != nil {
			return nil, err
		}
		sh = Constant{PerSec: r}
	case "steps":
		var st Steps
		for _, p := range strings.Split(args, ",") {
			rs, ds, ok := strings.Cut(p, "@")
			if !ok {
				return nil, fmt.Errorf("%w: step %q: want rate@duration", ErrInvalid, p)
			}
			r, err := parseRate(rs)
			if err != nil {
				return nil, err
			}
			d, err := time.ParseDuration(ds)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%w: step %q: bad duration", ErrInvalid, p)
			}
			st.Steps = append(st.Steps, Step{Dur: d, PerSec: r})
		}
		sh = st
	case "burst":
		kv, err := parseKV(args, "base", "peak", "at", "len", "every")
		if err != nil {
			return nil, err
		}
		var b Burst
		if b.Base, err = parseRate(kv["base"]); err != nil {
			return nil, err
		}
		if b.Peak, err = parseRate(kv["peak"]); err != nil {
			return nil, err
		}
		if b.At, err = parseDur(kv, "at", 0); err != nil {
			return nil, err
		}
		if b.Len, err = parseDur(kv, "len", -1); err != nil {
			return nil, err
		}
		if b.Every, err = parseDur(kv, "every", 0); err != nil {
			return nil, err
		}
		if b.Every > 0 && b.Every < b.Len {
			return nil, fmt.Errorf("%w: burst every=%s shorter than len=%s", ErrInvalid, b.Every, b.Len)
		}
		sh = b
	case "sine":
		kv, err := parseKV(args, "mean", "amp", "period")
		if err != nil {
			return nil, err
		}
		var s Sine
		if s.Mean, err = parseRate(kv["mean"]); err != nil {
			return nil, err
		}
		if s.Amp, err = parseRate(kv["amp"]); err != nil {
			return nil, err
		}
		if s.Period, err = parseDur(kv, "period", -1); err != nil {
			return nil, err
		}
		sh = s
	default:
		return nil, fmt.Errorf("%w: shape %q: unknown kind %q; want KIND:ARGS, %s", ErrInvalid, spec, kind, shapeKinds)
	}
	return sh, nil
}

func parseRate(s string) (float64, error) {
	r, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || r < 0 || r > MaxRate || math.IsNaN(r) {
		return 0, fmt.Errorf("%w: rate %q must be a number in 0..%d", ErrInvalid, s, MaxRate)
	}
	return r, nil
}

func parseKV(args string, keys ...string) (map[string]string, error) {
	allowed := make(map[string]bool, len(keys))
	for _, k := range keys {
		allowed[k] = true
	}
	kv := map[string]string{}
	for _, p := range strings.Split(args, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !allowed[k] {
			return nil, fmt.Errorf("%w: argument %q (allowed: %s)", ErrInvalid, p, strings.Join(keys, ", "))
		}
		kv[k] = v
	}
	return kv, nil
}

// parseDur reads kv[key]; def < 0 means the key is required and must be > 0.
func parseDur(kv map[string]string, key string, def time.Duration) (time.Duration, error) {
	v, ok := kv[key]
	if !ok {
		if def < 0 {
			return 0, fmt.Errorf("%w: %s= is required", ErrInvalid, key)
		}
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || (def < 0 && d == 0) {
		return 0, fmt.Errorf("%w: %s=%q: bad duration", ErrInvalid, key, v)
	}
	return d, nil
}

// Scale returns a shape of the same kind as s with every rate multiplied by
// f, in (0, 1], and rounded to 9 significant digits (150 × 0.1 is 15, not
// 15.000000000000002); times (steps, bursts, periods) are unchanged. The
// result's String parses back to it. A shape kind Scale does not know is
// refused.
func Scale(s Shape, f float64) (Shape, error) {
	if !(f > 0 && f <= 1) {
		return nil, fmt.Errorf("%w: rate scale %g: want (0, 1]", ErrInvalid, f)
	}
	mul := func(r float64) float64 {
		v, _ := strconv.ParseFloat(strconv.FormatFloat(r*f, 'g', 9, 64), 64)
		return v
	}
	switch v := s.(type) {
	case Constant:
		return Constant{PerSec: mul(v.PerSec)}, nil
	case Steps:
		st := Steps{Steps: make([]Step, len(v.Steps))}
		for i, x := range v.Steps {
			st.Steps[i] = Step{Dur: x.Dur, PerSec: mul(x.PerSec)}
		}
		return st, nil
	case Burst:
		v.Base, v.Peak = mul(v.Base), mul(v.Peak)
		return v, nil
	case Sine:
		v.Mean, v.Amp = mul(v.Mean), mul(v.Amp)
		return v, nil
	}
	return nil, fmt.Errorf("%w: rate scale: shape %T cannot be scaled", ErrInvalid, s)
}
