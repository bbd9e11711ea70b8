package loadgen

import (
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"imlab/loadgen/summary"
)

// Histogram names.
const (
	hResponse = iota // intended send -> ACK (what a user waits; no coordinated omission)
	hService         // actual send -> ACK
	hDelay           // intended -> actual send (scheduling error)
	hE2E             // intended send -> a recipient device stored its first copy, ACKed sends only (as the checker's)
	hQueue           // actual send -> a sender took it (the pacer's queued mode; about 0 otherwise)
	nHist
)

var histNames = [nHist]string{"response", "service", "send_delay", "end_to_end", "queue_wait"}

func newHist() *hdr.Histogram { return hdr.New(1, int64(time.Hour/time.Microsecond), 3) }

// lane is a recording lane: workers w with w%lanes == i share lane i, so
// recording is an uncontended lock in practice. A lane keeps the values
// themselves (µs), not a histogram: the reporter swaps each list with its
// emptied spare every second and records the values into the second's
// histograms. A histogram per lane and second (about 190 kB each, fresh or
// emptied, up to 80 a second) cost the reporter more than the values at
// any rate the generator reaches.
type lane struct {
	mu       sync.Mutex
	interval [nHist][]int64
	spare    [nHist][]int64 // owned by the reporter
}

func (l *lane) record(h int, d time.Duration) {
	v := d.Microseconds()
	if v < 1 {
		v = 1
	}
	l.mu.Lock()
	l.interval[h] = append(l.interval[h], v)
	l.mu.Unlock()
}

type metrics struct {
	lanes   []*lane
	ok      atomic.Uint64
	fail    atomic.Uint64
	unknown atomic.Uint64
	retries atomic.Uint64
	retried atomic.Uint64 // sends that needed more than one try
	notSent atomic.Uint64
	// lastStart, lastAck: the latest send start and ACK, as offsets from
	// the run's start (nanoseconds), for the rates' windows.
	lastStart atomic.Int64
	lastAck   atomic.Int64
	deliv     atomic.Uint64
	refused   atomic.Uint64         // answers 401 or 403 (Summary.Refused)
	total     [nHist]*hdr.Histogram // owned by the reporter
	second    [nHist]*hdr.Histogram // owned by the reporter: the last second merged
	// byIntended counts, per IntendedBin of intended send time (index i:
	// from i bins after the start), the sends that were ACKed, ended
	// failed or unknown, and those that needed more than one try, whenever
	// they ended. Sized
	// by sizeIntended before the sends start; a later bin counts in the
	// last slot.
	byIntended []intendedCounts
}

// intendedCounts is one bin of byIntended.
type intendedCounts struct{ ok, fail, unknown, retried atomic.Uint64 }

// sizeIntended makes byIntended cover a run of duration d.
func (m *metrics) sizeIntended(d time.Duration) {
	m.byIntended = make([]intendedCounts, int(d/summary.IntendedBin)+2)
}

// intended is the byIntended bin of an intended time (nil before
// sizeIntended).
func (m *metrics) intended(at time.Duration) *intendedCounts {
	if len(m.byIntended) == 0 {
		return nil
	}
	return &m.byIntended[min(max(int(at/summary.IntendedBin), 0), len(m.byIntended)-1)]
}

// failedByIntended lists the bins with a failed, unknown or retried send.
func (m *metrics) failedByIntended() []summary.IntendedFailures {
	out := []summary.IntendedFailures{}
	for i := range m.byIntended {
		c := &m.byIntended[i]
		f := summary.IntendedFailures{At: (time.Duration(i) * summary.IntendedBin).Seconds(), Fail: c.fail.Load(), Unknown: c.unknown.Load(), Retried: c.retried.Load()}
		if f.Fail+f.Unknown+f.Retried > 0 {
			out = append(out, f)
		}
	}
	return out
}

// ackedByIntended is the ACKed sends per second of their intended time
// (index i: intended from i seconds after the start), whenever the ACK
// came. Trailing empty seconds are cut, but never the first: a run that
// ACKed nothing says 0, which is measured, not "not recorded" (an empty
// list is left out of summary.json).
func (m *metrics) ackedByIntended() []uint64 {
	const perSec = int(time.Second / summary.IntendedBin)
	out := make([]uint64, (len(m.byIntended)+perSec-1)/perSec)
	for i := range m.byIntended {
		out[i/perSec] += m.byIntended[i].ok.Load()
	}
	for len(out) > 1 && out[len(out)-1] == 0 {
		out = out[:len(out)-1]
	}
	return out
}

func newMetrics(n int) *metrics {
	m := &metrics{}
	for range n {
		m.lanes = append(m.lanes, &lane{})
	}
	for h := range nHist {
		m.total[h], m.second[h] = newHist(), newHist()
	}
	return m
}

func (m *metrics) lane(i int) *lane { return m.lanes[i%len(m.lanes)] }

// swap records every lane's values of the interval into the second's
// histograms and folds them into the totals. Only the reporter calls it;
// what it returns is valid until its next call.
func (m *metrics) swap() [nHist]*hdr.Histogram {
	out := m.second
	for h := range nHist {
		out[h].Reset()
	}
	for _, l := range m.lanes {
		l.mu.Lock()
		for h := range nHist {
			l.interval[h], l.spare[h] = l.spare[h][:0], l.interval[h]
		}
		l.mu.Unlock()
		for h := range nHist {
			for _, v := range l.spare[h] {
				_ = out[h].RecordValue(v) // above an hour: dropped, as before
			}
		}
	}
	for h := range nHist {
		m.total[h].Merge(out[h])
	}
	return out
}

func quantiles(h *hdr.Histogram) summary.Quantiles {
	return summary.Quantiles{Count: h.TotalCount(), P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90),
		P99: h.ValueAtQuantile(99), P999: h.ValueAtQuantile(99.9), Max: h.Max()}
}

// storeMax raises v to x if x is larger.
func storeMax(v *atomic.Int64, x int64) {
	for {
		cur := v.Load()
		if x <= cur || v.CompareAndSwap(cur, x) {
			return
		}
	}
}
