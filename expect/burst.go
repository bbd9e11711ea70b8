package scenarios

import (
	"fmt"
	"math"
	"time"

	"imlab/loadgen"
	"imlab/loadgen/schedule"
)

// Defaults of the generator's burst expectations.
const (
	// DefaultMinOfferedRatio: started over intended sends around the burst.
	DefaultMinOfferedRatio = 0.95
	// DefaultMaxStartDelay bounds the p99 of (start - intended time) of
	// the sends of the burst's seconds.
	DefaultMaxStartDelay = 100 * time.Millisecond
)

// BurstFigures say whether the generator really offered the burst: the
// sends it was meant to start (the shape's integral) against those it
// started, over the burst's seconds padded by one second on each side
// (the generator's per-second buckets are not aligned to the burst to the
// millisecond; the padding costs only base-rate sends, and a start that
// slipped by more than that second is missing from the count), and the
// start delay's p99 in the burst's own seconds (max over those seconds).
type BurstFigures struct {
	// From and To bound the burst, seconds since the run's time base.
	From float64 `json:"from_s"`
	To   float64 `json:"to_s"`
	// PeakPerSec is the shape's burst rate; IntendedPerSec and
	// StartedPerSec are over the burst's own seconds.
	PeakPerSec     float64 `json:"peak_per_s"`
	IntendedPerSec float64 `json:"intended_per_s"`
	StartedPerSec  float64 `json:"started_per_s"`
	// Intended and Started count the padded window; Ratio is
	// Started / Intended.
	Intended float64 `json:"intended"`
	Started  uint64  `json:"started"`
	Ratio    float64 `json:"ratio"`
	// Late: sends of the burst's seconds that started more than the
	// pacer's LateAfter after their intended time; StartDelayP99 (ms) the
	// largest per-second p99 of start - intended.
	Late uint64 `json:"late"`
	// StartDelayP99ms is nil when a second of the burst that started sends
	// has no start delay measured (the generator's per-second histogram
	// was empty): unknown, never 0.
	StartDelayP99ms *float64 `json:"start_delay_p99_ms"`
	// OK, Fail and Unknown: outcomes of the sends answered in the burst's
	// seconds; AckP99ms their largest per-second ACK p99 from the intended
	// time.
	OK       uint64  `json:"ok"`
	Fail     uint64  `json:"fail"`
	Unknown  uint64  `json:"unknown"`
	AckP99ms float64 `json:"ack_p99_ms"`
}

// integral is the number of sends the shape intends in [a, b).
func integral(sh schedule.Shape, a, b time.Duration) float64 {
	const step = time.Millisecond
	var sum float64
	for t := a; t < b; t += step {
		sum += sh.Rate(t) * step.Seconds()
	}
	return sum
}

// burstFigures measures the burst of a burst shape from the generator's
// timeline (nil for other shapes or without a timeline). Second k of the
// timeline covers [k-1, k) of the load.
func burstFigures(sh schedule.Shape, d time.Duration, sum *loadgen.Summary, loadOffset float64) *BurstFigures {
	from, to, ok := burstWindow(sh, d)
	if !ok || sum == nil || len(sum.Timeline) == 0 {
		return nil
	}
	bf := &BurstFigures{From: loadOffset + from.Seconds(), To: loadOffset + to.Seconds(), PeakPerSec: sh.Rate(from)}
	first, last := int(math.Floor(from.Seconds()))+1, int(math.Ceil(to.Seconds())) // the burst's own seconds
	padA, padB := max(0, first-2), last+1                                          // one more second each side
	var own uint64
	delay, delayKnown := 0.0, true
	for _, s := range sum.Timeline {
		if s.T > padA && s.T <= padB {
			bf.Started += s.Started
		}
		if s.T >= first && s.T <= last {
			own += s.Started
			bf.Late += s.Late
			bf.OK, bf.Fail, bf.Unknown = bf.OK+s.OK, bf.Fail+s.Fail, bf.Unknown+s.Unknown
			if s.SendDelay.Count == 0 {
				delayKnown = false
			}
			delay = max(delay, float64(s.SendDelay.P99)/1000)
			bf.AckP99ms = max(bf.AckP99ms, float64(s.Response.P99)/1000)
		}
	}
	if delayKnown {
		bf.StartDelayP99ms = &delay
	}
	bf.Intended = integral(sh, time.Duration(padA)*time.Second, min(time.Duration(padB)*time.Second, d))
	if bf.Intended > 0 {
		bf.Ratio = float64(bf.Started) / bf.Intended
	}
	ownLen := time.Duration(last-first+1) * time.Second
	bf.IntendedPerSec = integral(sh, time.Duration(first-1)*time.Second, time.Duration(first-1)*time.Second+ownLen) / ownLen.Seconds()
	bf.StartedPerSec = float64(own) / ownLen.Seconds()
	return bf
}

// generatorCheck is generator_kept_up: the started/intended ratio around
// the burst and the start delay p99 in it. A burst that could not be
// measured fails.
func generatorCheck(e ExpectSpec, bf *BurstFigures) Check {
	minRatio, maxDelay := e.MinOfferedRatioOr(), e.MaxStartDelayOr()
	c := Check{Name: "generator_kept_up", Want: fmt.Sprintf("started >= %.2f of intended around the burst, start delay p99 <= %s", minRatio, maxDelay)}
	if bf == nil {
		c.Got = "the burst was not measured (no generator timeline)"
		return c
	}
	c.Got = fmt.Sprintf("%.0f/s intended, %.0f/s started in the burst; %d of %.0f started around it (%.3f); start delay p99 %s",
		bf.IntendedPerSec, bf.StartedPerSec, bf.Started, bf.Intended, bf.Ratio, bf.startDelay())
	c.OK = bf.Ratio >= minRatio && bf.StartDelayP99ms != nil && *bf.StartDelayP99ms <= float64(maxDelay)/float64(time.Millisecond)
	if !c.OK {
		c.Got = "the generator fell behind: " + c.Got
	}
	return c
}

// startDelay formats the start delay p99 ("unknown" when not measured).
func (bf *BurstFigures) startDelay() string {
	if bf.StartDelayP99ms == nil {
		return "unknown (a second of the burst has no start delay measured)"
	}
	return fmt.Sprintf("%.1f ms", *bf.StartDelayP99ms)
}
