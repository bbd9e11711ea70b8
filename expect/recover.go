package expect

import (
	"fmt"
	"time"

	"imlab/loadgen/schedule"
	"imlab/recovery"
	"imlab/result"
	"imlab/scenario"
)

// burstWindow is the last burst of a burst shape that starts before d,
// in the load's time; ok false for other shapes.
func BurstWindow(sh schedule.Shape, d time.Duration) (from, to time.Duration, ok bool) {
	b, isBurst := sh.(schedule.Burst)
	if !isBurst || b.At >= d || b.Len <= 0 {
		return 0, 0, false
	}
	from = b.At
	if b.Every > 0 {
		for from+b.Every < d {
			from += b.Every
		}
	}
	return from, min(from+b.Len, d), true
}

// recoverySince is the instant recovery counts from (seconds since the
// run's time base) and what it is: the later of the end of the (last)
// burst and the heal of the last fault; without either, the end of the
// load.
func RecoverySince(sh schedule.Shape, d time.Duration, loadOffset float64, events []result.FaultEvent) (float64, string) {
	at, what := -1.0, ""
	if _, to, ok := BurstWindow(sh, d); ok {
		at, what = loadOffset+to.Seconds(), "end of the burst"
	}
	for _, e := range events {
		if e.Action == "heal" && e.At > at {
			at, what = e.At, "heal of "+e.Fault
		}
	}
	if at < 0 {
		at, what = loadOffset+d.Seconds(), "end of the load"
	}
	return at, what
}

// recoveryConfig is the recovery rule of the file for a run whose
// recovery counts from since.
func RecoveryConfig(e scenario.ExpectSpec, since float64, drain time.Duration) recovery.Config {
	return recovery.Config{From: since, Bound: e.RecoveryBoundOr().Seconds(), Hold: e.RecoveryHoldOr().Seconds(),
		Deadline: since + drain.Seconds()}
}

// RecoverySamples converts the lag timeline part by part, as the run
// page draws it: a sample is known for the groups when its consumer lag
// was measured (LagSample.LagKnown: the poll answered and no error but
// the outbox's came with it), and its outbox is measured only when
// LagSample.Outbox says so. A sample whose outbox query alone failed
// therefore counts for the groups' recovery and is unknown for the
// outbox's drain.
func RecoverySamples(lag []result.LagSample) []recovery.Sample {
	out := make([]recovery.Sample, 0, len(lag))
	for _, s := range lag {
		rs := recovery.Sample{T: s.T, Known: s.LagKnown(), OutboxAge: -1, InboxRows: -1, Groups: map[string]recovery.Group{}}
		if n, age, ok := s.Outbox(); ok {
			rs.OutboxBacklog, rs.OutboxAge = n, age
		}
		if s.InboxRows != nil {
			rs.InboxRows = *s.InboxRows
		}
		for g, a := range s.MaxAge {
			c, ok := s.Consumed[g]
			if !ok {
				c = -1
			}
			rs.Groups[g] = recovery.Group{Age: a, Records: s.Records[g], Consumed: c}
		}
		out = append(out, rs)
	}
	return out
}

// figures computes the recovery figures of a timeline.
func RecoveryFigures(cfg recovery.Config, since string, lag []result.LagSample) (*recovery.Figures, error) {
	f, err := recovery.Compute(cfg, RecoverySamples(lag))
	if err != nil {
		return nil, fmt.Errorf("scenarios: recovery: %w", err)
	}
	f.Since = since
	return f, nil
}
