package summary

import (
	"fmt"
	"strings"
	"time"
)

// OverloadFraction is the stated limit of a clean run: when more than this
// fraction of its sends ended failed or of unknown outcome, or more than
// this fraction needed a second try (a resent timeout, a 429) whatever
// their final outcome, the run is OVERLOADED whatever its safety verdict,
// and its latencies describe a server that was not keeping up.
const OverloadFraction = 0.01

// LateFraction and LateDelay are the stated limit on late sends: when more
// than LateFraction of the sends started more than the pacer's LateAfter
// after their intended time (each waited for the pacer or for a free
// sender because the target had not answered the sends before it) and
// the start delay's p99 is above LateDelay (so the lateness is a queue,
// not the timer jitter of a busy machine, a millisecond or a few), the run
// is OVERLOADED whatever became of those sends: the offered rate was not
// the rate the target was given, and its latencies describe a queue.
const (
	LateFraction = 0.05
	LateDelay    = 100 * time.Millisecond
)

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
	// Late is how many sends started more than the pacer's LateAfter after
	// their intended time, LateFrac that count over the sends the pacer
	// started (0 when none started).
	Late     uint64  `json:"late"`
	LateFrac float64 `json:"late_fraction"`
	// StartDelayP99Ms is the p99 of start - intended time over the sends
	// (nil: not measured, then the late fraction alone decides).
	StartDelayP99Ms *float64 `json:"start_delay_p99_ms"`
	// Limit is the fraction of failed + unknown sends, and of retried
	// sends, above which the run is Overloaded; LateLimit the fraction of
	// late sends (LateFraction) and LateDelayMs the start delay p99
	// (LateDelay) above both of which it is.
	Limit       float64 `json:"overload_limit"`
	LateLimit   float64 `json:"late_limit"`
	LateDelayMs float64 `json:"late_delay_ms"`
	Overloaded  bool    `json:"overloaded"`
	// Because names each limit the run went above ("" within load), e.g.
	// "25.0% of sends started late (the target did not keep up with the
	// offered rate)".
	Because string `json:"overloaded_because,omitempty"`
}

// AddOutcomes adds o's counts of sends (ok, failed, unknown, retried,
// started and late) and rate to s, and widens s's windows to o's: the
// segments of one split run, summed for the run's Outcomes.
func (s *Summary) AddOutcomes(o *Summary) {
	s.Pacer.Started += o.Pacer.Started
	s.Pacer.Late += o.Pacer.Late
	// The segments' start delays are not merged here: the largest p99,
	// an upper bound of the run's.
	if d := o.Latency[startDelay]; d.Count > 0 {
		if s.Latency == nil {
			s.Latency = map[string]Quantiles{}
		}
		cur := s.Latency[startDelay]
		cur.Count, cur.P99 = cur.Count+d.Count, max(cur.P99, d.P99)
		s.Latency[startDelay] = cur
	}
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
	o := Outcome{Sends: s.OK + s.Fail + s.Unknown, Limit: limit, LateLimit: LateFraction, Late: s.Pacer.Late,
		LateDelayMs: float64(LateDelay) / float64(time.Millisecond)}
	if d := s.Latency[startDelay]; d.Count > 0 {
		ms := float64(d.P99) / 1000
		o.StartDelayP99Ms = &ms
	}
	if o.Sends > 0 {
		n := float64(o.Sends)
		o.OKFrac, o.FailFrac, o.UnknownFrac = float64(s.OK)/n, float64(s.Fail)/n, float64(s.Unknown)/n
		o.RetriedFrac = float64(s.RetriedSends) / n
	}
	if s.Pacer.Started > 0 {
		o.LateFrac = float64(s.Pacer.Late) / float64(s.Pacer.Started)
	}
	switch {
	case s.AckSeconds > 0:
		o.AckedPerSec = float64(s.OK) / s.AckSeconds
	case s.LoadSeconds > 0: // a summary written before AckSeconds
		o.AckedPerSec = float64(s.OK) / s.LoadSeconds
	default:
		o.AckedPerSec = s.AchievedPerSec // an older summary: its own figure
	}
	o.Because = o.because()
	o.Overloaded = o.Because != ""
	return o
}

// because names each limit o went above, "" when none.
func (o Outcome) because() string {
	var why []string
	if o.LateOver() {
		why = append(why, LateReason(o.LateFrac, o.StartDelayP99Ms))
	}
	if f := o.FailFrac + o.UnknownFrac; f > o.Limit {
		why = append(why, pct(f)+" of sends failed or of unknown outcome")
	}
	if o.RetriedFrac > o.Limit {
		why = append(why, pct(o.RetriedFrac)+" of sends needed a second try")
	}
	return strings.Join(why, "; ")
}

// startDelay names the histogram of start - intended time.
const startDelay = "send_delay"

// LateOver tells whether o's late sends are above the limit: more than
// LateLimit of them, and a start delay p99 above LateDelayMs (or not
// measured).
func (o Outcome) LateOver() bool {
	return o.LateFrac > o.LateLimit && (o.StartDelayP99Ms == nil || *o.StartDelayP99Ms > o.LateDelayMs)
}

// LateReason is why a run whose fraction f of sends started late, with
// this start delay p99 (nil: not measured), is OVERLOADED.
func LateReason(f float64, p99ms *float64) string {
	d := ""
	if p99ms != nil {
		d = fmt.Sprintf(", start delay p99 %s", time.Duration(*p99ms*float64(time.Millisecond)).Round(time.Millisecond))
	}
	return pct(f) + " of sends started late" + d + " (the target did not keep up with the offered rate)"
}

// Label is "OVERLOADED: " and why, or "within load".
func (o Outcome) Label() string {
	if o.Overloaded {
		return "OVERLOADED: " + o.Because
	}
	return "within load"
}

// String is one line for a summary: the achieved (ACKed) rate, the
// fractions beside it, and the label with the limits it was judged by.
func (o Outcome) String() string {
	return o.line(": " + o.Label() + " (")
}

// Figures is String without the label, for a page that shows the label
// (and why) beside it already.
func (o Outcome) Figures() string {
	return o.line("; ")
}

// line is the achieved rate and fractions, then sep, then the limits they
// were judged by (closed by ")" when sep opened one).
func (o Outcome) line(sep string) string {
	delay := "unknown"
	if o.StartDelayP99Ms != nil {
		delay = fmt.Sprintf("%.1f ms", *o.StartDelayP99Ms)
	}
	closing := ""
	if strings.HasSuffix(sep, "(") {
		closing = ")"
	}
	return fmt.Sprintf("achieved %.0f ACKed sends/s; of %d sends ok %s, unknown %s, failed %s, retried %s, started late %s (start delay p99 %s)%sunknown + failed %s %s, retried %s %s, late starts %s their bound: more than %s of sends late with a start delay p99 above %g ms%s",
		o.AckedPerSec, o.Sends, pct(o.OKFrac), pct(o.UnknownFrac), pct(o.FailFrac), pct(o.RetriedFrac), pct(o.LateFrac), delay, sep,
		cmpWord(o.FailFrac+o.UnknownFrac > o.Limit), pct(o.Limit), cmpWord(o.RetriedFrac > o.Limit), pct(o.Limit),
		cmpWord(o.LateOver()), pct(o.LateLimit), o.LateDelayMs, closing)
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
