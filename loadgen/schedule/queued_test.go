package schedule

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func queuedConfig(senders, maxQueued int) Config {
	c := DefaultConfig()
	c.Senders, c.MaxQueued = senders, maxQueued
	return c
}

// TestQueuedStartsAtIntendedTime: in the queued mode a slow handler (every
// send takes 5 ms, 4 senders: 800 sends/s, against 2,000 sends/s offered) does
// not make the sends start late while the queue has room: each is
// started (stamped) when the pacer queues it, never before its intended
// time, exactly once, and the goroutine count stays the senders'.
func TestQueuedStartsAtIntendedTime(t *testing.T) {
	const senders, rate, dur = 4, 2000.0, 300 * time.Millisecond
	before := runtime.NumGoroutine()
	var mu sync.Mutex
	seen := map[uint64]int{}
	var early, peakG atomic.Int64
	var maxDelay atomic.Int64
	start := time.Now().Add(20 * time.Millisecond)
	st, err := Run(context.Background(), queuedConfig(senders, 10_000), NewIter(Constant{PerSec: rate}, dur), start, nil,
		func(w int, tk Tick, started time.Duration) {
			if w < 0 || w >= senders {
				t.Errorf("sender %d out of 0..%d", w, senders-1)
			}
			if started < tk.Intended {
				early.Add(1)
			}
			if d := int64(started - tk.Intended); d > maxDelay.Load() {
				maxDelay.Store(d)
			}
			if g := int64(runtime.NumGoroutine()); g > peakG.Load() {
				peakG.Store(g)
			}
			mu.Lock()
			seen[tk.Idx]++
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		})
	if err != nil {
		t.Fatal(err)
	}
	want := Count(Constant{PerSec: rate}, dur)
	if st.Started != want || st.Missed != 0 || st.Scheduled != want || uint64(len(seen)) != want {
		t.Fatalf("stats %+v, %d distinct ticks, want %d started", st, len(seen), want)
	}
	for idx, n := range seen {
		if n != 1 {
			t.Fatalf("tick %d handled %d times", idx, n)
		}
	}
	if early.Load() > 0 {
		t.Fatalf("%d sends started before their intended time", early.Load())
	}
	if st.Workers != senders || st.QueuePeak < 50 {
		t.Fatalf("workers %d (want %d), queue peak %d (want the backlog of slow senders, >= 50)", st.Workers, senders, st.QueuePeak)
	}
	// The pacer and the senders, plus whatever the runtime and the test
	// framework had: never a goroutine per send in flight.
	if g := peakG.Load(); g > int64(before+senders+4) {
		t.Fatalf("%d goroutines while sending (%d before): the queued mode must not grow a goroutine per send", g, before)
	}
	t.Logf("max start delay %s with %d sends queued at most", time.Duration(maxDelay.Load()), st.QueuePeak)
}

// TestQueuedFullQueueStartsLate: when MaxQueued sends already wait, the
// pacer waits for room and the sends after it start late (counted late):
// a generator held up by its own bound says so.
func TestQueuedFullQueueStartsLate(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	start := time.Now().Add(10 * time.Millisecond)
	go func() { time.Sleep(150 * time.Millisecond); once.Do(func() { close(release) }) }()
	st, err := Run(context.Background(), queuedConfig(1, 5), NewIter(Constant{PerSec: 1000}, 50*time.Millisecond), start, nil,
		func(int, Tick, time.Duration) { <-release })
	if err != nil {
		t.Fatal(err)
	}
	if st.Started != 50 || st.Late < 40 || st.QueuePeak != 5 {
		t.Fatalf("stats %+v: want 50 started, most of them late behind a full queue of 5", st)
	}
}

// TestQueuedMissedPastGrace: ticks the pacer cannot queue before
// duration+Grace are missed, not started; every handler still returns.
func TestQueuedMissedPastGrace(t *testing.T) {
	c := queuedConfig(1, 2)
	c.Grace = 20 * time.Millisecond
	release := make(chan struct{})
	go func() { time.Sleep(200 * time.Millisecond); close(release) }()
	st, err := Run(context.Background(), c, NewIter(Constant{PerSec: 1000}, 20*time.Millisecond), time.Now(), nil,
		func(int, Tick, time.Duration) { <-release })
	if err != nil {
		t.Fatal(err)
	}
	if st.Started != 3 || st.Missed != 17 || st.Scheduled != 20 {
		t.Fatalf("stats %+v: want 3 started (1 sending, 2 queued), 17 missed", st)
	}
}

// TestQueuedCancel: cancelling stops the schedule at once; the rest is
// missed, and so are the sends still queued behind slow senders (they are
// never made: Run does not wait a queue's worth of answers). Every tick is
// either handled or missed, exactly once.
func TestQueuedCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	var handled atomic.Uint64
	began := time.Now()
	st, err := Run(ctx, queuedConfig(2, 10_000), NewIter(Constant{PerSec: 2000}, 10*time.Second), time.Now(), nil,
		func(int, Tick, time.Duration) { handled.Add(1); time.Sleep(20 * time.Millisecond) })
	if err != nil {
		t.Fatal(err)
	}
	if !st.Canceled || st.Started == 0 || st.Started != handled.Load() || st.Scheduled != 20000 || st.Started+st.Missed != 20000 {
		t.Fatalf("stats %+v, %d handled: want a cancelled run, every tick handled or missed", st, handled.Load())
	}
	if st.QueuePeak < 50 || st.Started > 40 {
		t.Fatalf("stats %+v: want ~200 queued at the cancel and only the ones being sent made", st)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("Run took %s after a cancel at 100 ms: it waited for the queue", took)
	}
}
