package loadgen

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestE2ETrackerCountsACKedSendsOnly: a copy stored before its send's ACK
// is counted once the ACK comes, one stored after it at once, and copies
// of a send that failed or stayed unknown never.
func TestE2ETrackerCountsACKedSendsOnly(t *testing.T) {
	m := newMetrics(1)
	l := m.lane(0)
	tr := newE2ETracker()
	tr.stored(l, 1, 10*time.Millisecond) // pushed before the ACK
	tr.stored(l, 2, 20*time.Millisecond) // a send that will stay unknown
	tr.stored(l, 3, 5*time.Second)
	tr.outcome(l, 1, true)
	tr.outcome(l, 2, false)
	tr.outcome(l, 3, false)
	tr.stored(l, 1, 30*time.Millisecond) // another recipient, after the ACK
	tr.stored(l, 2, 40*time.Millisecond) // delivered late, outcome unknown
	h := m.swap()[hE2E]
	if h.TotalCount() != 2 || h.Max() > 31000 || h.Min() < 9000 {
		t.Fatalf("end_to_end: %d samples, min %dµs max %dµs; want the two copies of send 1", h.TotalCount(), h.Min(), h.Max())
	}
	for i := range tr.shards {
		if n := len(tr.shards[i].wait); n != 0 {
			t.Fatalf("shard %d still holds %d waiting sends", i, n)
		}
	}
}

// TestE2ETrackerDenseAndSparseTicks: ticks far apart in the bit sets
// (growing them) and past e2eDenseTicks (the map) settle independently.
func TestE2ETrackerDenseAndSparseTicks(t *testing.T) {
	m := newMetrics(1)
	l := m.lane(0)
	tr := newE2ETracker()
	ticks := []uint64{0, 63, 64 * e2eShards, 1_000_003, e2eDenseTicks - 1, e2eDenseTicks, e2eDenseTicks + 17}
	for i, tick := range ticks {
		tr.outcome(l, tick, i%2 == 0)
	}
	for i, tick := range ticks {
		s := &tr.shards[tick%e2eShards]
		acked, known := s.state(tick)
		if !known || acked != (i%2 == 0) {
			t.Fatalf("tick %d: acked %v known %v, want acked %v known", tick, acked, known, i%2 == 0)
		}
	}
	for _, tick := range []uint64{1, 62, 65 * e2eShards, 1_000_004, e2eDenseTicks + 1} {
		if _, known := tr.shards[tick%e2eShards].state(tick); known {
			t.Fatalf("tick %d: known without an outcome", tick)
		}
	}
	for _, tick := range ticks {
		tr.stored(l, tick, time.Millisecond)
	}
	if n := m.swap()[hE2E].TotalCount(); n != 4 {
		t.Fatalf("end_to_end: %d samples, want the 4 ACKed ticks'", n)
	}
}

// TestProgressLineNamesThePhase: the live line says which phase the run is
// in and how far it has come.
func TestProgressLineNamesThePhase(t *testing.T) {
	cfg := DefaultConfig("http://127.0.0.1:1", "x", t.TempDir())
	var p progress
	p.enter(PhaseSending, 0, 0)
	if got := p.line(&cfg); got != "" {
		t.Fatalf("sending: %q, want the send line", got)
	}
	p.enter(PhaseSettle, 0, 0)
	if got := p.line(&cfg); !strings.HasPrefix(got, "settle ") || !strings.Contains(got, " of "+cfg.Settle.String()) {
		t.Fatalf("settle: %q", got)
	}
	p.enter(PhaseDrain, 0, 40)
	for range 3 {
		p.step()
	}
	if got := p.line(&cfg); !strings.HasPrefix(got, "drain: 3/40 devices at the end") {
		t.Fatalf("drain: %q", got)
	}
	p.enter(PhaseDrain, 1, 40)
	if got := p.line(&cfg); !strings.HasPrefix(got, "drain round 2: 0/40") {
		t.Fatalf("drain round: %q", got)
	}
	p.enter(PhaseWitness, 0, 20)
	p.step()
	if got := p.line(&cfg); !strings.HasPrefix(got, "witness: 1/20 users") {
		t.Fatalf("witness: %q", got)
	}
}

// BenchmarkE2ETrackerSettle settles a run's sends in tick order, as the
// send workers do, and reports what the tracker holds per send once they
// are all settled (heap_B/send), and the time per settled send (ns/send).
func BenchmarkE2ETrackerSettle(b *testing.B) {
	const sends = 1 << 20
	m := newMetrics(1)
	l := m.lane(0)
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		tr := newE2ETracker()
		for tick := range uint64(sends) {
			tr.outcome(l, tick, tick%100 != 0)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/sends, "heap_B/send")
		runtime.KeepAlive(tr)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*sends), "ns/send")
}
