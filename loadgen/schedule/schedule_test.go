package schedule

import (
	"context"
	"errors"
	"math"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	good := map[string]Shape{
		"const:5000":                               Constant{PerSec: 5000},
		"steps:1000@10s,5000@20s":                  Steps{Steps: []Step{{10 * time.Second, 1000}, {20 * time.Second, 5000}}},
		"burst:base=5000,peak=50000,at=5s,len=10s": Burst{Base: 5000, Peak: 50000, At: 5 * time.Second, Len: 10 * time.Second},
		"sine:mean=5000,amp=2000,period=30s":       Sine{Mean: 5000, Amp: 2000, Period: 30 * time.Second},
	}
	for spec, want := range good {
		got, err := Parse(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		if got.String() != want.String() {
			t.Fatalf("%s: got %s want %s", spec, got, want)
		}
		again, err := Parse(got.String())
		if err != nil || again.String() != got.String() {
			t.Fatalf("%s: String does not round-trip: %v", spec, err)
		}
	}
	for _, bad := range []string{"", "const", "const:-1", "const:abc", "const:1e9", "steps:10", "steps:10@0s",
		"burst:base=1,peak=2", "burst:base=1,peak=2,len=1s,every=500ms", "sine:mean=1,amp=1", "sine:mean=1,amp=1,period=0s",
		"burst:base=1,peak=2,len=1s,bogus=3", "square:1"} {
		if _, err := Parse(bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%q: want ErrInvalid, got %v", bad, err)
		}
	}
}

func TestIterConstantSpacing(t *testing.T) {
	it := NewIter(Constant{PerSec: 1000}, time.Second)
	var n uint64
	for {
		idx, at, ok := it.Next()
		if !ok {
			break
		}
		n++
		if idx != n {
			t.Fatalf("idx %d want %d", idx, n)
		}
		want := time.Duration(n-1) * time.Millisecond
		if d := at - want; d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("tick %d at %s want %s", n, at, want)
		}
	}
	if n != 1000 {
		t.Fatalf("ticks %d want 1000", n)
	}
}

func TestCounts(t *testing.T) {
	cases := []struct {
		shape Shape
		dur   time.Duration
		want  float64
	}{
		{Steps{Steps: []Step{{time.Second, 100}, {time.Second, 1000}}}, 3 * time.Second, 100 + 1000 + 1000},
		{Burst{Base: 5000, Peak: 50000, At: time.Second, Len: 2 * time.Second}, 5 * time.Second, 5000*3 + 50000*2},
		{Burst{Base: 100, Peak: 1000, At: 0, Len: 100 * time.Millisecond, Every: time.Second}, 3 * time.Second, 3 * (1000*0.1 + 100*0.9)},
		{Sine{Mean: 1000, Amp: 500, Period: time.Second}, 4 * time.Second, 4000},
		{Sine{Mean: 100, Amp: 300, Period: time.Second}, time.Second, -1}, // clamped at zero: just must terminate
	}
	for _, c := range cases {
		got := float64(Count(c.shape, c.dur))
		if c.want < 0 {
			continue
		}
		if math.Abs(got-c.want) > c.want*0.002+2 {
			t.Fatalf("%s over %s: %v ticks, want %v", c.shape, c.dur, got, c.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(*Config){
		func(c *Config) { c.Workers = 0 },
		func(c *Config) { c.MaxWorkers = 1; c.Workers = 2 },
		func(c *Config) { c.LateAfter = 0 },
		func(c *Config) { c.Grace = -1 },
		func(c *Config) { c.SpinWindow = time.Second },
		func(c *Config) { c.Senders = -1 },
		func(c *Config) { c.Senders = 4; c.MaxQueued = 0 },
		func(c *Config) { c.Senders = MaxSenders + 1; c.MaxQueued = 1 },
	}
	for i, f := range bad {
		c := DefaultConfig()
		f(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalid) {
			t.Fatalf("case %d: want ErrInvalid, got %v", i, err)
		}
		if _, err := Run(context.Background(), c, NewIter(Constant{PerSec: 1}, time.Second), time.Now(), nil, func(int, Tick, time.Duration) {}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("case %d: Run accepted a bad config", i)
		}
	}
}

// TestPacerAccuracy: every tick starts exactly once, never before its
// intended time. With IMLAB_TIMING=1 (a quiet machine, no race detector) the
// scheduling error (start - intended) must also have p99 under 1 ms at
// 20k/s, best of three half-second runs; otherwise it is only logged, since
// a shared CI machine's load decides it (the benchmark reports the figure).
func TestPacerAccuracy(t *testing.T) {
	rate, dur := 20000.0, 500*time.Millisecond
	bound := time.Millisecond
	if raceEnabled {
		rate = 2000
	}
	if os.Getenv("IMLAB_TIMING") != "1" || raceEnabled {
		bound = time.Hour
	}
	want := Count(Constant{PerSec: rate}, dur)
	best := time.Hour
	for attempt := 0; attempt < 3 && best > bound; attempt++ {
		cfg := DefaultConfig()
		cfg.Workers = 16
		cfg.Grace = time.Minute // a starved machine starts ticks late, never misses them
		var mu sync.Mutex
		errs := make([]time.Duration, 0, want)
		seen := make(map[uint64]bool, want)
		st, err := Run(context.Background(), cfg, NewIter(Constant{PerSec: rate}, dur), time.Now(), nil, func(_ int, tk Tick, started time.Duration) {
			mu.Lock()
			errs = append(errs, started-tk.Intended)
			seen[tk.Idx] = true
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		if st.Started != want || st.Missed != 0 || uint64(len(seen)) != want || st.Scheduled != st.Started {
			t.Fatalf("stats %+v, distinct ticks %d, want %d started", st, len(seen), want)
		}
		sort.Slice(errs, func(i, j int) bool { return errs[i] < errs[j] })
		if errs[0] < 0 {
			t.Fatalf("a tick started %s before its intended time", -errs[0])
		}
		p99 := errs[len(errs)*99/100]
		t.Logf("rate %v/s: scheduling error p50 %s p99 %s max %s, late %d", rate, errs[len(errs)/2], p99, errs[len(errs)-1], st.Late)
		best = min(best, p99)
	}
	if best > bound {
		t.Fatalf("scheduling error p99 %s > %s in three runs", best, bound)
	}
}

// TestPacerOverload: a target slower than the rate with a capped pool: sends
// start late and are counted, and those that cannot start before the grace
// deadline are counted missed; nothing disappears.
func TestPacerOverload(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workers, cfg.MaxWorkers = 2, 4
	cfg.Grace = 50 * time.Millisecond
	var handled atomic.Uint64
	shape := Constant{PerSec: 1000}
	dur := 200 * time.Millisecond
	st, err := Run(context.Background(), cfg, NewIter(shape, dur), time.Now(), nil, func(int, Tick, time.Duration) {
		handled.Add(1)
		time.Sleep(10 * time.Millisecond)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Count(shape, dur)
	if st.Scheduled != want || st.Started+st.Missed != want || handled.Load() != st.Started {
		t.Fatalf("stats %+v handled %d, want %d scheduled", st, handled.Load(), want)
	}
	if st.Late == 0 || st.Missed == 0 || st.Workers != 4 {
		t.Fatalf("overload not counted: %+v", st)
	}
}

// TestPacerGrowsPool: a pool that starts with one worker grows when every
// worker is busy. The first 20 handlers block until 20 of them run at once,
// which only a pool grown to at least 20 allows (bounded by a timeout); the
// rest sleep briefly. Nothing is missed.
func TestPacerGrowsPool(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workers = 1
	cfg.LateAfter = 5 * time.Millisecond
	cfg.Grace = time.Minute
	const together = 20
	var running atomic.Int64
	all := make(chan struct{})
	var once sync.Once
	var timedOut atomic.Bool
	st, err := Run(context.Background(), cfg, NewIter(Constant{PerSec: 2000}, 300*time.Millisecond), time.Now(), nil, func(int, Tick, time.Duration) {
		if running.Add(1) == together {
			once.Do(func() { close(all) })
		}
		select {
		case <-all:
		case <-time.After(30 * time.Second):
			timedOut.Store(true)
		}
		time.Sleep(20 * time.Millisecond)
	})
	if err != nil {
		t.Fatal(err)
	}
	if timedOut.Load() || st.Workers < together || st.Missed != 0 || st.Started != 600 {
		t.Fatalf("pool did not grow: %+v (a handler waited 30 s for %d running at once: %v)", st, together, timedOut.Load())
	}
	if os.Getenv("IMLAB_TIMING") == "1" && !raceEnabled && st.Late > st.Started/100 {
		t.Fatalf("too many late sends with a growing pool: %+v", st)
	}
}

// TestPacerCancel: cancelling stops the schedule (counted by ticks, not by
// a clock): the rest of the ticks are counted missed, never started.
func TestPacerCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	shape := Constant{PerSec: 1000}
	total := Count(shape, 10*time.Second)
	var handled atomic.Uint64
	st, err := Run(ctx, DefaultConfig(), NewIter(shape, 10*time.Second), time.Now(), nil, func(int, Tick, time.Duration) {
		if handled.Add(1) == 50 {
			cancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Canceled || st.Started+st.Missed != total || st.Started < 50 || st.Started > total/2 || handled.Load() != st.Started {
		t.Fatalf("cancel: %+v, handled %d, total %d", st, handled.Load(), total)
	}
}

// TestPacerWorkersTakeDueTicks: on one P, with a one-worker pool slower than
// the rate and a handler that holds the CPU, the pacer cannot run between
// sends, so the worker takes the ticks already due itself. Every tick is
// started exactly once, never before its intended time, and the direct path
// is counted.
func TestPacerWorkersTakeDueTicks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	cfg := DefaultConfig()
	cfg.Workers, cfg.MaxWorkers = 1, 1
	cfg.Grace = time.Minute
	shape := Constant{PerSec: 2000}
	dur := 100 * time.Millisecond
	want := Count(shape, dur)
	var mu sync.Mutex
	seen := make(map[uint64]int, want)
	early := 0
	st, err := Run(context.Background(), cfg, NewIter(shape, dur), time.Now(), nil, func(_ int, tk Tick, started time.Duration) {
		mu.Lock()
		seen[tk.Idx]++
		if started < tk.Intended {
			early++
		}
		mu.Unlock()
		for end := time.Now().Add(time.Millisecond); time.Now().Before(end); {
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Started != want || st.Missed != 0 || uint64(len(seen)) != want || early != 0 {
		t.Fatalf("stats %+v, distinct %d, early %d, want %d started", st, len(seen), early, want)
	}
	for idx, n := range seen {
		if n != 1 {
			t.Fatalf("tick %d started %d times", idx, n)
		}
	}
	if st.Direct == 0 || st.Direct > st.Started || st.Late == 0 || st.Workers != 1 {
		t.Fatalf("direct path not used or not counted: %+v", st)
	}
	t.Logf("%+v", st)
}
