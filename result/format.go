package result

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"imlab/scenario"
)

func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("scenarios: json: %w", err)
	}
	return nil
}

// Mid is where a chart draws the second: its middle. T is the second's
// end (its figures count [T-1, T)), and a point drawn at T would sit a
// second after what it counts, beside the next second's faults.
func (s SendSecond) Mid() float64 { return s.T - 0.5 }

// AckMs is the second's ACK p50 and p99 (ms), and whether they were
// measured: a second without an ACK has none.
func (s SendSecond) AckMs() (p50, p99 float64, ok bool) {
	if s.OK == 0 || s.AckP50 == nil || s.AckP99 == nil {
		return 0, 0, false
	}
	return *s.AckP50, *s.AckP99, true
}

// spec is the scenario of a result (an empty one when it is missing).
func (r *Result) SpecOrEmpty() *scenario.File {
	if r.Spec == nil {
		return &scenario.File{}
	}
	return r.Spec
}

func OptRate(v *float64) string {
	if v == nil {
		return "unknown"
	}
	return strconv.FormatFloat(*v, 'f', 0, 64)
}

// sendingSeconds is how long the run's sends took: from the load's start
// to the end of the last second in which a send ended (a slow server
// answers a burst long after the schedule's duration), and at least the
// file's load duration. The achieved rate is counted over it, as loadgen's
// own summary counts it.
func SendingSeconds(res *Result) float64 {
	end := res.SpecOrEmpty().Load.Config.Duration.Seconds()
	for _, s := range res.Sends {
		if s.OK+s.Fail+s.Unknown > 0 {
			end = max(end, s.T-res.LoadOffset)
		}
	}
	return end
}
