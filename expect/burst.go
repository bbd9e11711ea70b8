package expect

import (
	"fmt"
	"math"
	"time"

	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
	"imlab/result"
	"imlab/scenario"
)

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
func BurstFigures(sh schedule.Shape, d time.Duration, sum *summary.Summary, loadOffset float64) *result.BurstFigures {
	from, to, ok := BurstWindow(sh, d)
	if !ok || sum == nil || len(sum.Timeline) == 0 {
		return nil
	}
	bf := &result.BurstFigures{From: loadOffset + from.Seconds(), To: loadOffset + to.Seconds(), PeakPerSec: sh.Rate(from)}
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
func generatorCheck(e scenario.ExpectSpec, bf *result.BurstFigures) result.Check {
	minRatio, maxDelay := e.MinOfferedRatioOr(), e.MaxStartDelayOr()
	c := result.Check{Name: "generator_kept_up", Want: fmt.Sprintf("started >= %.2f of intended around the burst, start delay p99 <= %s", minRatio, maxDelay)}
	if bf == nil {
		c.Got = "the burst was not measured (no generator timeline)"
		return c
	}
	c.Got = fmt.Sprintf("%.0f/s intended, %.0f/s started in the burst; %d of %.0f started around it (%.3f); start delay p99 %s",
		bf.IntendedPerSec, bf.StartedPerSec, bf.Started, bf.Intended, bf.Ratio, bf.StartDelay())
	c.OK = bf.Ratio >= minRatio && bf.StartDelayP99ms != nil && *bf.StartDelayP99ms <= float64(maxDelay)/float64(time.Millisecond)
	if !c.OK {
		c.Got = "the generator fell behind: " + c.Got
	}
	return c
}
