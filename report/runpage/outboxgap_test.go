package runpage

import (
	"slices"
	"strings"
	"testing"

	"imlab/expect"
	"imlab/recovery"
	"imlab/report"
	"imlab/result"
	"imlab/result/resulttest"
)

// chartsAgreeWithRecovery fails t unless the run page draws every lag
// sample as recovery reads it (expect.RecoverySamples): a point in each
// group's line where the sample is known for the groups and a gap where
// not, a point in the outbox line where the sample measured the outbox
// and a gap where not. It returns the two charts.
func chartsAgreeWithRecovery(t *testing.T, res *result.Result) (lag, outbox report.Chart) {
	t.Helper()
	charts, _ := lagCharts(res)
	for _, c := range charts {
		switch {
		case strings.HasPrefix(c.Title, "Consumer lag"):
			lag = c
		case c.Title == "Outbox backlog":
			outbox = c
		}
	}
	if len(lag.Series) == 0 || len(outbox.Series) != 1 {
		t.Fatalf("charts %+v: want a consumer lag and an outbox chart", charts)
	}
	rs := expect.RecoverySamples(res.Lag)
	for i, s := range res.Lag {
		for _, sr := range lag.Series {
			if _, named := s.MaxAge[sr.Name]; !named && rs[i].Known {
				continue
			}
			if point, gap := drawn(sr, s.T); point != rs[i].Known || gap == rs[i].Known {
				t.Errorf("t=%.1fs group %s: point %v gap %v; recovery reads it known %v", s.T, sr.Name, point, gap, rs[i].Known)
			}
		}
		measured := rs[i].Known && rs[i].OutboxAge >= 0
		if point, gap := drawn(outbox.Series[0], s.T); point != measured || gap == measured {
			t.Errorf("t=%.1fs outbox: point %v gap %v; recovery reads it measured %v", s.T, point, gap, measured)
		}
	}
	return lag, outbox
}

// drawn says whether s has a point, and a gap, at t.
func drawn(s report.Series, t float64) (point, gap bool) {
	return slices.ContainsFunc(s.Points, func(p report.Point) bool { return p.T == t }), slices.Contains(s.Gaps, t)
}

// TestLagChartsOutboxOnlyGaps: seconds whose outbox query alone failed
// are drawn in the consumer lag chart and are gaps in the outbox chart,
// as the groups' recovery counts them and the outbox's drain does not.
func TestLagChartsOutboxOnlyGaps(t *testing.T) {
	res := sampleResult()
	res.Spec.Server.Policy = "outbox"
	res.Lag = resulttest.WithOutbox(resulttest.LagTimeline(3, 3, 3, 0.5, 0.5, 0.5, 0.5), 3, 3, 3, 3, -1, -1, -1)
	res.Lag[1].Err = "lag: connection refused" // a poll that failed: unknown for both
	lag, outbox := chartsAgreeWithRecovery(t, res)
	for _, at := range []float64{4, 5, 6} {
		if p, _ := drawn(lag.Series[0], at); !p {
			t.Errorf("t=%g: consumer lag not drawn", at)
		}
		if _, g := drawn(outbox.Series[0], at); !g {
			t.Errorf("t=%g: outbox not a gap", at)
		}
	}
	_, notes := lagCharts(res)
	if !slices.ContainsFunc(notes, func(n string) bool {
		return strings.HasPrefix(n, "3 lag polls measured the consumer lag but not the outbox")
	}) ||
		!slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, "1 of 7 lag polls failed") }) {
		t.Errorf("notes %q", notes)
	}
}

// TestLagChartsOldResult reads a result.json written before a lag sample
// kept the outbox's error apart (a toxics run: at t=4.0s the server
// measured the consumer lag but its outbox query failed, and that error
// is the sample's "error"). Read now, that sample is unknown for every
// part, as the recovery stored in the file counted it: the page draws it
// as a gap in both charts, and the recovery computed again from the file's
// timeline is the stored one.
func TestLagChartsOldResult(t *testing.T) {
	res, err := result.ReadRun("testdata/toxics-before-outbox-error.result.json")
	if err != nil {
		t.Fatal(err)
	}
	old := slices.IndexFunc(res.Lag, func(s result.LagSample) bool { return strings.Contains(s.Err, "outbox backlog") })
	if old < 0 || res.Lag[old].OutboxErr != "" || res.Lag[old].MaxAge == nil {
		t.Fatalf("the file has no sample in the old form (an outbox error in its error, its consumer lag beside)")
	}
	lag, outbox := chartsAgreeWithRecovery(t, res)
	at := res.Lag[old].T
	if _, g := drawn(lag.Series[0], at); !g {
		t.Errorf("t=%.1fs: the old form's sample is not a gap in the consumer lag chart", at)
	}
	if _, g := drawn(outbox.Series[0], at); !g {
		t.Errorf("t=%.1fs: the old form's sample is not a gap in the outbox chart", at)
	}
	stored := res.Recovery
	cfg := recovery.Config{From: stored.From, Bound: stored.Bound, Hold: stored.Hold, Deadline: stored.Deadline, Outbox: res.SpecOrEmpty().Server.PolicyOr() == "outbox"}
	again, err := expect.RecoveryFigures(cfg, stored.Since, res.Lag)
	if err != nil {
		t.Fatal(err)
	}
	if again.Status != stored.Status || *again.RecoveredAt != *stored.RecoveredAt || again.UnknownSamples != stored.UnknownSamples ||
		again.Outbox == nil || stored.Outbox == nil || again.Outbox.Status != stored.Outbox.Status {
		t.Fatalf("recovery again %+v\nstored %+v", again, stored)
	}
}
