package recovery

import (
	"math"
	"strings"
	"testing"
)

// timeline builds one-group samples at t = 0, 1, 2, ... from ages (a
// negative age: an unknown sample); records behind are age*100 and the
// group consumes 1000 records per second while behind.
func timeline(ages ...float64) []Sample {
	var out []Sample
	consumed := int64(0)
	for i, a := range ages {
		s := Sample{T: float64(i), OutboxAge: -1, InboxRows: consumed * 2}
		if a >= 0 {
			s.Known = true
			s.Groups = map[string]Group{"inbox": {Age: a, Records: int64(a * 100), Consumed: consumed}}
		}
		out = append(out, s)
		consumed += 1000
	}
	return out
}

func cfgFrom(from float64) Config { return Config{From: from, Bound: 1, Hold: 2} }

func compute(t *testing.T, cfg Config, ss []Sample) *Figures {
	t.Helper()
	f, err := Compute(cfg, ss)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestRecovers(t *testing.T) {
	// burst ends at t=2; lag 5 s at t=3, under 1 s from t=6 on.
	f := compute(t, cfgFrom(2), timeline(0, 3, 4, 5, 3, 1.5, 0.5, 0.2, 0, 0))
	if f.Status != Recovered || f.RecoverySeconds == nil || !near(*f.RecoverySeconds, 4) || !near(*f.RecoveredAt, 6) {
		t.Fatalf("figures: %+v", f)
	}
	g := f.Groups[0]
	if g.PeakAge != 5 || g.PeakAgeT != 3 || g.PeakRecords != 500 || g.Relapses != 0 {
		t.Fatalf("group: %+v", g)
	}
	// window t=2 (last sample at From) .. t=6: 4000 records in 4 s.
	if g.DrainRecordsPerSec == nil || !near(*g.DrainRecordsPerSec, 1000) || !near(*g.PeakDrainRecordsPerSec, 1000) || g.DrainFrom != 2 || g.DrainTo != 6 {
		t.Fatalf("drain: %+v", g)
	}
	if f.DrainRowsPerSec == nil || !near(*f.DrainRowsPerSec, 2000) {
		t.Fatalf("rows: %v %s", f.DrainRowsPerSec, f.DrainRowsNote)
	}
	if f.BacklogPeak != 500 || f.BacklogPeakT != 3 {
		t.Fatalf("backlog: %d at %g", f.BacklogPeak, f.BacklogPeakT)
	}
	if v, name := f.MinDrainRecordsPerSec(); v == nil || name != "inbox" || !near(*v, 1000) {
		t.Fatalf("min drain: %v %s", v, name)
	}
	if f.Outbox != nil {
		t.Fatalf("outbox figures without an outbox: %+v", f.Outbox)
	}
}

func TestNeverRecovers(t *testing.T) {
	f := compute(t, cfgFrom(2), timeline(0, 3, 4, 5, 6, 7, 8))
	if f.Status != NotRecovered || f.RecoverySeconds != nil || !strings.Contains(f.Reason, "still above the bound") {
		t.Fatalf("figures: %+v", f)
	}
	g := f.Groups[0]
	if g.DrainRecordsPerSec == nil || !strings.Contains(g.DrainNote, "not recovered") {
		t.Fatalf("drain of a group that did not recover: %+v", g)
	}
}

func TestRecoversThenRelapses(t *testing.T) {
	// under the bound at t=4..5, over again at t=6, back for good at t=8.
	f := compute(t, cfgFrom(2), timeline(0, 3, 4, 0.5, 0.5, 0.8, 2, 1.2, 0.3, 0.1, 0.1))
	g := f.Groups[0]
	if f.Status != Recovered || !near(*f.RecoveredAt, 8) || !near(*f.RecoverySeconds, 6) || g.Relapses != 1 {
		t.Fatalf("figures: %+v group %+v", f, g)
	}
	// relapsing at the very end: not recovered.
	f = compute(t, cfgFrom(2), timeline(0, 3, 0.5, 0.5, 0.5, 3))
	if f.Status != NotRecovered || f.Groups[0].Relapses != 1 {
		t.Fatalf("relapse at the end: %+v", f)
	}
}

func TestUnknownSamples(t *testing.T) {
	// an unknown sample inside the good run pushes R past it.
	f := compute(t, cfgFrom(2), timeline(0, 3, 0.5, -1, 0.5, 0.5, 0.5))
	if f.Status != Recovered || !near(*f.RecoveredAt, 4) || f.UnknownSamples != 1 {
		t.Fatalf("unknown in the middle: %+v", f)
	}
	// unknown samples after a recovery that has held: gaps, not a relapse.
	f = compute(t, cfgFrom(2), timeline(0, 3, 0.5, 0.5, 0.5, -1, -1, 0.5, -1))
	if f.Status != Recovered || !near(*f.RecoveredAt, 2) {
		t.Fatalf("unknown after an established recovery: %+v", f)
	}
	// ... but a bad sample after them is.
	f = compute(t, cfgFrom(2), timeline(0, 3, 0.5, 0.5, 0.5, -1, 4, 0.5, 0.5, 0.5))
	if f.Status != Recovered || !near(*f.RecoveredAt, 7) || f.Groups[0].Relapses != 1 {
		t.Fatalf("bad after the gap: %+v %+v", f, f.Groups[0])
	}
	// everything after the burst unknown.
	f = compute(t, cfgFrom(2), timeline(0, 3, -1, -1, -1))
	if f.Status != Unknown || !strings.Contains(f.Reason, "no known") {
		t.Fatalf("all unknown after From: %+v", f)
	}
	// last known sample over the bound, then unknown: unknown, not "recovered", not 0.
	f = compute(t, cfgFrom(2), timeline(0, 3, 4, -1, -1))
	if f.Status != Unknown || f.RecoverySeconds != nil || !strings.Contains(f.Reason, "not measured since t=3.0s") {
		t.Fatalf("unknown tail: %+v", f)
	}
	// a group missing from a known sample is unknown in it.
	ss := timeline(0, 3, 0.5, 0.5, 0.5, 0.5, 0.5)
	ss[3].Groups = map[string]Group{}
	f = compute(t, cfgFrom(2), ss)
	if f.Status != Recovered || !near(*f.RecoveredAt, 4) {
		t.Fatalf("missing group: %+v", f)
	}
	// no samples at all.
	f = compute(t, cfgFrom(2), nil)
	if f.Status != Unknown || f.RecoverySeconds != nil {
		t.Fatalf("no samples: %+v", f)
	}
}

func TestHoldAndDeadline(t *testing.T) {
	// under the bound only at the last sample: not held.
	f := compute(t, cfgFrom(2), timeline(0, 3, 4, 5, 0.5))
	if f.Status != NotRecovered || !strings.Contains(f.Reason, "less than the hold") {
		t.Fatalf("not held: %+v", f)
	}
	c := cfgFrom(2)
	c.Deadline = 4
	f = compute(t, c, timeline(0, 3, 4, 5, 3, 0.5, 0.5, 0.5))
	if f.Status != NotRecovered || !strings.Contains(f.Reason, "after the deadline") {
		t.Fatalf("past the deadline: %+v", f)
	}
	// already under the bound at From: recovery 0, no backlog to drain.
	f = compute(t, cfgFrom(2), timeline(0, 0, 0, 0, 0, 0))
	if f.Status != Recovered || *f.RecoverySeconds != 0 || f.Groups[0].DrainRecordsPerSec != nil || !strings.Contains(f.Groups[0].DrainNote, "no backlog") {
		t.Fatalf("no backlog: %+v %+v", f, f.Groups[0])
	}
}

func TestSeveralGroupsAndOutbox(t *testing.T) {
	ss := timeline(0, 3, 4, 0.5, 0.5, 0.5, 0.5, 0.5)
	ages := []float64{0, 1, 6, 5, 3, 0.9, 0.1, 0}
	for i := range ss {
		ss[i].Groups["history"] = Group{Age: ages[i], Records: int64(ages[i] * 10), Consumed: int64(i * 10)}
		ss[i].OutboxBacklog, ss[i].OutboxAge = int64(ages[i]*1000), ages[i]/2
	}
	if f := compute(t, cfgFrom(2), ss); f.Outbox != nil {
		t.Fatalf("outbox figures for a run without an outbox: %+v", f.Outbox)
	}
	c := cfgFrom(2)
	c.Outbox = true
	f := compute(t, c, ss)
	if f.Status != Recovered || !near(*f.RecoveredAt, 5) || len(f.Groups) != 2 {
		t.Fatalf("figures: %+v", f)
	}
	if f.Groups[0].Name != "history" || !near(*f.Groups[0].RecoveredAt, 5) || !near(*f.Groups[1].RecoveredAt, 3) {
		t.Fatalf("groups: %+v", f.Groups)
	}
	if v, name := f.MinDrainRecordsPerSec(); v == nil || name != "history" || !near(*v, 10) {
		t.Fatalf("min drain: %v %s", v, name)
	}
	if f.BacklogPeak != 460 || f.BacklogPeakT != 2 {
		t.Fatalf("backlog: %d at %g", f.BacklogPeak, f.BacklogPeakT)
	}
	o := f.Outbox
	if o == nil || o.PeakBacklog != 6000 || o.PeakT != 2 || o.Status != Recovered || !near(*o.DrainedAt, 5) || !near(*o.DrainSeconds, 3) {
		t.Fatalf("outbox: %+v", o)
	}
}

func TestConsumedGoesDown(t *testing.T) {
	ss := timeline(0, 3, 4, 0.5, 0.5, 0.5)
	g := ss[3].Groups["inbox"]
	g.Consumed = 0
	ss[3].Groups["inbox"] = g
	f := compute(t, cfgFrom(2), ss)
	if gf := f.Groups[0]; gf.DrainRecordsPerSec != nil || !strings.Contains(gf.DrainNote, "went down") {
		t.Fatalf("drain: %+v", gf)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{From: -1, Bound: 1}, {Bound: 0}, {Bound: 1, Hold: -1}, {From: 5, Bound: 1, Deadline: 3}, {From: math.NaN(), Bound: 1}} {
		if _, err := Compute(c, nil); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}
