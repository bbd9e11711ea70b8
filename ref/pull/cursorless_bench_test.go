package pull_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/ref/hotcache"
	"imlab/ref/pull"
)

// BenchmarkCursorlessPull is a pull without a cursor (the device's cached
// cursor is where it starts: how burst-50k's offline devices pull) against
// real MariaDB and Redis, with this process's CPU per pull (user + system,
// getrusage): the api's own cost of a pull, the servers' left out. Each
// pull includes the rate limit, the cursor read, the span, the bodies and
// the served mark.
//
//	page100: cursor 250 of 400, limit 100 (has_more; no fence read)
//	tail50:  cursor 350 of 400, limit 100 (reaches the top; the fence is read
//	         every time, as for a device that pulls every few seconds)
func BenchmarkCursorlessPull(b *testing.B) {
	m := testenv.NewMySQL(b)
	r := testenv.NewRedis(b)
	seedBench(b, m)
	ctx := context.Background()
	pcfg := pull.DefaultConfig()
	pcfg.RateLimit, pcfg.RateBurst = 1e6, 1e6
	pcfg.FenceCheckInterval = 0
	cache, err := hotcache.New(r.Client, r.Keys, hotcache.DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	svc, err := pull.New(m.DB, cache, pcfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	for uid := uint64(1); uid <= benchUsers; uid++ {
		if _, err := svc.Pull(ctx, uid, "warm", ptr(benchPerUser-1), 10, true); err != nil {
			b.Fatal(err)
		}
	}
	run := func(b *testing.B, cursor uint64, wantLen int) {
		did := fmt.Sprint("at", cursor)
		for uid := uint64(1); uid <= benchUsers; uid++ {
			if err := cache.SetCursor(ctx, uid, did, cursor); err != nil {
				b.Fatal(err)
			}
		}
		b.SetParallelism(8)
		cpu0 := cpuTime(b)
		start := time.Now()
		b.ResetTimer()
		pullParallel(b, svc, did, nil, pull.SourceCache, wantLen)
		b.StopTimer()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
		b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	}
	b.Run("page100", func(b *testing.B) { run(b, 250, 100) })
	b.Run("tail50", func(b *testing.B) { run(b, 350, 50) })
}

// cpuTime is this process's user + system CPU so far.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
