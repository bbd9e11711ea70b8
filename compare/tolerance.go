package compare

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrInput marks unusable input: a file that cannot be read, an unknown
// format, runs of different subjects, a bad tolerance.
var ErrInput = errors.New("compare: unusable input")

// Tolerances maps a metric name, or a group prefix (cpu_us_per_msg), to
// the worsening it may show.
type Tolerances map[string]Tolerance

// For returns the tolerance of a metric: its own entry, its group's, or
// the metric's default.
func (ts Tolerances) For(d Def) Tolerance {
	if t, ok := ts[d.Name]; ok {
		return t
	}
	if t, ok := ts[group(d.Name)]; ok {
		return t
	}
	return d.Tol
}

// ParseTolerances reads 'ack_p99:+10%,rate:-5%,lag:+500ms,errors:+0.1%'.
// A percentage is relative to the base centre, except on a ratio metric
// (errors, unknown), where it is percentage points; a plain number is
// absolute in the metric's unit, a duration (500ms) absolute on a ms or
// s metric. The sign, when written, must be the metric's worsening
// direction (+ for latency, - for rate). The empty string is no override.
func ParseTolerances(s string) (Tolerances, error) {
	ts := Tolerances{}
	if strings.TrimSpace(s) == "" {
		return ts, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || name == "" || val == "" {
			return nil, fmt.Errorf("%w: tolerance %q: want metric:+10%%", ErrInput, part)
		}
		d, known := Lookup(name)
		if !known {
			return nil, fmt.Errorf("%w: tolerance %q: unknown metric (known: %s, cpu_us_per_msg[.PROC], %s)",
				ErrInput, name, strings.Join(Names(), ", "), strings.Join(SafetyFindings, ", "))
		}
		if _, dup := ts[name]; dup {
			return nil, fmt.Errorf("%w: tolerance for %s given twice", ErrInput, name)
		}
		t, err := parseTolerance(d, val)
		if err != nil {
			return nil, fmt.Errorf("%w: tolerance %s: %v", ErrInput, name, err)
		}
		ts[name] = t
	}
	return ts, nil
}

func parseTolerance(d Def, v string) (Tolerance, error) {
	if d.Rule == MustHold {
		return Tolerance{}, fmt.Errorf("%s must hold; it takes no tolerance", d.Name)
	}
	switch v[0] {
	case '+':
		if d.Better == Higher {
			return Tolerance{}, fmt.Errorf("%s worsens downward: write -%s", d.Name, v[1:])
		}
		v = v[1:]
	case '-':
		if d.Better == Lower {
			return Tolerance{}, fmt.Errorf("%s worsens upward: write +%s", d.Name, v[1:])
		}
		v = v[1:]
	}
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 {
			return Tolerance{}, fmt.Errorf("%q: want a percentage >= 0", v)
		}
		if d.Unit == "ratio" {
			return Tolerance{Abs: f / 100}, nil
		}
		return Tolerance{Rel: f / 100}, nil
	}
	if d.Unit == "ms" || d.Unit == "s" {
		if dur, err := time.ParseDuration(v); err == nil {
			if dur < 0 {
				return Tolerance{}, fmt.Errorf("%q: want a duration >= 0", v)
			}
			if d.Unit == "ms" {
				return Tolerance{Abs: float64(dur) / float64(time.Millisecond)}, nil
			}
			return Tolerance{Abs: dur.Seconds()}, nil
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return Tolerance{}, fmt.Errorf("%q: want a percentage (10%%), a duration (500ms) or a number >= 0 in %s", v, d.Unit)
	}
	return Tolerance{Abs: f}, nil
}
