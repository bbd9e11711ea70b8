package capacity

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid marks a bad configuration or SLO.
var ErrInvalid = errors.New("capacity: invalid")

// SLO is what a step must hold; a nil term is not part of the SLO.
type SLO struct {
	AckP50 *time.Duration `json:"ack_p50,omitempty"`
	AckP99 *time.Duration `json:"ack_p99,omitempty"`
	// Lag is the largest consumer lag age (GET /v1/lab/lag) in the window.
	Lag *time.Duration `json:"lag,omitempty"`
	// Errors is the largest fraction of failed + unknown sends.
	Errors *float64 `json:"errors,omitempty"`
}

// DefaultSLO is the SLO when none is given.
const DefaultSLO = "ack_p99<=200ms,errors<=0.1%"

// ParseSLO reads 'ack_p99<=200ms,lag<=2s,errors<=0.1%' (terms ack_p50,
// ack_p99, lag as durations; errors as a percentage or a fraction).
func ParseSLO(s string) (SLO, error) {
	var o SLO
	if strings.TrimSpace(s) == "" {
		return o, fmt.Errorf("%w: empty SLO", ErrInvalid)
	}
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "<=")
		if !ok || name == "" || val == "" {
			return SLO{}, fmt.Errorf("%w: SLO term %q: want name<=limit", ErrInvalid, part)
		}
		if seen[name] {
			return SLO{}, fmt.Errorf("%w: SLO term %s given twice", ErrInvalid, name)
		}
		seen[name] = true
		switch name {
		case "ack_p50", "ack_p99", "lag":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return SLO{}, fmt.Errorf("%w: SLO %s: %q: want a duration > 0", ErrInvalid, name, val)
			}
			switch name {
			case "ack_p50":
				o.AckP50 = &d
			case "ack_p99":
				o.AckP99 = &d
			default:
				o.Lag = &d
			}
		case "errors":
			f, err := parseFraction(val)
			if err != nil {
				return SLO{}, fmt.Errorf("%w: SLO errors: %v", ErrInvalid, err)
			}
			o.Errors = &f
		default:
			return SLO{}, fmt.Errorf("%w: SLO term %q: want ack_p50, ack_p99, lag or errors", ErrInvalid, name)
		}
	}
	return o, nil
}

func parseFraction(v string) (float64, error) {
	p, pct := strings.CutSuffix(v, "%")
	f, err := strconv.ParseFloat(p, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: want a percentage (0.1%%) or a fraction", v)
	}
	if pct {
		f /= 100
	}
	if f < 0 || f > 1 {
		return 0, fmt.Errorf("%q: want 0..100%%", v)
	}
	return f, nil
}

// String writes the SLO back in the form ParseSLO reads.
func (o SLO) String() string {
	var p []string
	if o.AckP50 != nil {
		p = append(p, "ack_p50<="+o.AckP50.String())
	}
	if o.AckP99 != nil {
		p = append(p, "ack_p99<="+o.AckP99.String())
	}
	if o.Lag != nil {
		p = append(p, "lag<="+o.Lag.String())
	}
	if o.Errors != nil {
		p = append(p, "errors<="+strconv.FormatFloat(*o.Errors*100, 'g', -1, 64)+"%")
	}
	return strings.Join(p, ",")
}

// ackLimit is the tightest latency term (for early stops and the
// generator-limit diagnosis): ack_p99, else ack_p50, else 0.
func (o SLO) ackLimit() time.Duration {
	switch {
	case o.AckP99 != nil:
		return *o.AckP99
	case o.AckP50 != nil:
		return *o.AckP50
	}
	return 0
}

// judge lists the terms a step broke or could not show it held.
func (o SLO) judge(s *Step) []string {
	var why []string
	lat := func(name string, lim *time.Duration, got *float64) {
		if lim == nil {
			return
		}
		switch {
		case got == nil:
			why = append(why, name+" not measured")
		case *got > float64(*lim)/float64(time.Millisecond):
			why = append(why, fmt.Sprintf("%s %.1fms > %s", name, *got, lim))
		}
	}
	lat("ack_p50", o.AckP50, s.AckP50Ms)
	lat("ack_p99", o.AckP99, s.AckP99Ms)
	if o.Lag != nil {
		switch {
		case s.LagS == nil:
			why = append(why, "lag not measured")
		case *s.LagS > o.Lag.Seconds():
			why = append(why, fmt.Sprintf("lag %.2fs > %s", *s.LagS, o.Lag))
		}
	}
	if o.Errors != nil {
		switch {
		case s.ErrorRate == nil:
			why = append(why, "errors not measured (no send in the window)")
		case *s.ErrorRate > *o.Errors:
			why = append(why, fmt.Sprintf("errors %.3f%% > %g%%", *s.ErrorRate*100, *o.Errors*100))
		}
	}
	return why
}
