package loadgen

import "fmt"

// OverloadFraction is the stated limit of a clean run: when more than this
// fraction of its sends ended failed or of unknown outcome, or more than
// this fraction needed a second try (a resent timeout, a 429) whatever
// their final outcome, the run is OVERLOADED whatever its safety verdict,
// and its latencies describe a server that was not keeping up.
const OverloadFraction = 0.01

// Outcome is what became of a run's sends, as fractions of the sends
// started (ok + fail + unknown), and whether that makes it OVERLOADED.
type Outcome struct {
	Sends uint64 `json:"sends"`
	// AckedPerSec is ACKed sends per second of the sending phase: the only
	// figure called "achieved".
	AckedPerSec float64 `json:"acked_per_sec"`
	OKFrac      float64 `json:"ok_fraction"`
	FailFrac    float64 `json:"fail_fraction"`
	UnknownFrac float64 `json:"unknown_fraction"`
	// RetriedFrac is the fraction of sends that needed more than one try.
	RetriedFrac float64 `json:"retried_fraction"`
	// Limit is the fraction of failed + unknown sends, and of retried
	// sends, above which the run is Overloaded.
	Limit      float64 `json:"overload_limit"`
	Overloaded bool    `json:"overloaded"`
}

// AddOutcomes adds o's counts of sends (ok, failed, unknown, retried) and
// rate to s, and widens s's windows to o's: the segments of one split run,
// summed for the run's Outcomes.
func (s *Summary) AddOutcomes(o *Summary) {
	s.OK += o.OK
	s.Fail += o.Fail
	s.Unknown += o.Unknown
	s.RetriedSends += o.RetriedSends
	s.AchievedPerSec += o.AchievedPerSec
	s.LoadSeconds = max(s.LoadSeconds, o.LoadSeconds)
	s.AckSeconds = max(s.AckSeconds, o.AckSeconds)
}

// Outcomes computes s's outcome against limit (<= 0: OverloadFraction).
// It needs only the counts, so it also serves summaries written before the
// outcome was recorded.
func (s *Summary) Outcomes(limit float64) Outcome {
	if limit <= 0 {
		limit = OverloadFraction
	}
	o := Outcome{Sends: s.OK + s.Fail + s.Unknown, Limit: limit}
	if o.Sends > 0 {
		n := float64(o.Sends)
		o.OKFrac, o.FailFrac, o.UnknownFrac = float64(s.OK)/n, float64(s.Fail)/n, float64(s.Unknown)/n
		o.RetriedFrac = float64(s.RetriedSends) / n
	}
	switch {
	case s.AckSeconds > 0:
		o.AckedPerSec = float64(s.OK) / s.AckSeconds
	case s.LoadSeconds > 0: // a summary written before AckSeconds
		o.AckedPerSec = float64(s.OK) / s.LoadSeconds
	default:
		o.AckedPerSec = s.AchievedPerSec // an older summary: its own figure
	}
	o.Overloaded = o.FailFrac+o.UnknownFrac > limit || o.RetriedFrac > limit
	return o
}

// Label is "OVERLOADED" or "within load".
func (o Outcome) Label() string {
	if o.Overloaded {
		return "OVERLOADED"
	}
	return "within load"
}

// String is one line for a summary: the achieved (ACKed) rate, the
// fractions beside it, and the label with the limit it was judged by.
func (o Outcome) String() string {
	return fmt.Sprintf("achieved %.0f ACKed sends/s; of %d sends ok %s, unknown %s, failed %s, retried %s: %s (unknown + failed %s %s, retried %s %s)",
		o.AckedPerSec, o.Sends, pct(o.OKFrac), pct(o.UnknownFrac), pct(o.FailFrac), pct(o.RetriedFrac), o.Label(),
		cmpWord(o.FailFrac+o.UnknownFrac > o.Limit), pct(o.Limit), cmpWord(o.RetriedFrac > o.Limit), pct(o.Limit))
}

func cmpWord(above bool) string {
	if above {
		return "above"
	}
	return "within"
}

func pct(f float64) string {
	if f > 0 && f < 0.001 {
		return fmt.Sprintf("%.2f%%", 100*f)
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}
