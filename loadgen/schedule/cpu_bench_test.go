package schedule

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPacerCPU: what the pacer itself costs at a low and a middling
// constant rate with a handler that does nothing, 2 s per rate:
//
//	go test -run '^$' -bench BenchmarkPacerCPU -benchtime 1x ./loadgen/schedule/
//
// It reports this process's CPU per tick (cpu_µs/tick, user + system time
// over the trial), the share of one core (cores) and the start delay p50
// and p99 (sched_p50_µs, sched_p99_µs), for the default spin window and
// for none (the runtime's timers only).
func BenchmarkPacerCPU(b *testing.B) {
	for _, rate := range []int{500, 5000} {
		for _, spin := range []time.Duration{DefaultConfig().SpinWindow, 0} {
			b.Run("rate_"+strconv.Itoa(rate)+"/spin_"+spin.String(), func(b *testing.B) {
				for range b.N {
					cfg := DefaultConfig()
					cfg.SpinWindow = spin
					var mu sync.Mutex
					delays := make([]time.Duration, 0, 2*rate)
					c0 := rusage()
					t0 := time.Now()
					st, err := Run(context.Background(), cfg, NewIter(Constant{PerSec: float64(rate)}, 2*time.Second), t0, nil,
						func(_ int, t Tick, started time.Duration) {
							mu.Lock()
							delays = append(delays, started-t.Intended)
							mu.Unlock()
						})
					if err != nil {
						b.Fatal(err)
					}
					cpu, wall := rusage()-c0, time.Since(t0)
					if st.Started == 0 {
						b.Fatal("no tick started")
					}
					sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
					b.ReportMetric(float64(cpu.Microseconds())/float64(st.Started), "cpu_µs/tick")
					b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cores")
					b.ReportMetric(float64(delays[len(delays)/2].Microseconds()), "sched_p50_µs")
					b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds()), "sched_p99_µs")
				}
			})
		}
	}
}

// rusage is this process's user + system CPU time so far.
func rusage() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
