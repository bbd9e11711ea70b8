// Package resulttest builds run records (package result's types) for the
// tests of the packages that read them: expect's checks, the run pages. It
// owns nothing but these fixtures; it must not be imported by non-test
// code, run anything, or read or write files.
package resulttest

import "imlab/result"

// LagTimeline is a lag timeline of one group, imlab-inbox, polled at t = 0,
// 1, ... seconds with the given oldest-record ages (its records and
// consumed counts follow from them). An age below 0 is a failed poll; no
// sample has an outbox.
func LagTimeline(ages ...float64) []result.LagSample {
	var out []result.LagSample
	for i, a := range ages {
		s := result.LagSample{T: float64(i)}
		if a < 0 {
			s.Err = "lag: connection refused"
		} else {
			s.MaxAge = map[string]float64{"imlab-inbox": a}
			s.Records = map[string]int64{"imlab-inbox": int64(a * 1000)}
			s.Consumed = map[string]int64{"imlab-inbox": int64(i * 5000)}
		}
		out = append(out, s)
	}
	return out
}

// OutboxErr is the outbox query's error WithOutbox gives a sample whose
// outbox was not measured.
const OutboxErr = "fanout: outbox backlog: invalid connection"

// WithOutbox gives lag's samples, in order, an outbox of the given oldest
// ages (a backlog of ten rows a second of age); an age below 0 is an
// outbox query that failed (OutboxErr, no figures) while the rest of the
// sample stands as it was.
func WithOutbox(lag []result.LagSample, ages ...float64) []result.LagSample {
	out := append([]result.LagSample(nil), lag...)
	for i, a := range ages {
		if a < 0 {
			out[i].OutboxErr = OutboxErr
			continue
		}
		n, age := int64(a*10), a
		out[i].OutboxBacklog, out[i].OutboxOldestAge = &n, &age
	}
	return out
}
