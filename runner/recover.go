package runner

import (
	"context"
	"sync/atomic"
	"time"

	"imlab/expect"
	"imlab/recovery"
	"imlab/runner/lagpoll"
)

// awaitRecovery keeps the lag poller running after the load until every
// group has recovered (and held) or the deadline has passed, so that a
// run never ends before its recovery can be judged and never waits past
// the drain timeout for it.
func (r *run) awaitRecovery(ctx context.Context, base time.Time, cfg recovery.Config, lag *lagpoll.Log) {
	tk := time.NewTicker(lagpoll.Interval)
	defer tk.Stop()
	for {
		f, err := recovery.Compute(cfg, expect.RecoverySamples(lag.Snapshot()))
		if err != nil || f.Status == recovery.Recovered || time.Since(base).Seconds() > cfg.Deadline+cfg.Hold+lagpoll.Interval.Seconds() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// pollLag runs the lag poller for a file that uses Kafka (lagpoll.Poll:
// the first live process's lag endpoint, the run's inbox rows) until ctx
// ends; for one that does not it only waits. Its live lines count from
// the load's start once loadAt holds it (UnixNano), as the load's do.
func (r *run) pollLag(ctx context.Context, base time.Time, loadAt *atomic.Int64, out *lagpoll.Log) {
	if !r.f.UsesKafka() {
		<-ctx.Done()
		return
	}
	lagpoll.Poll(ctx, lagpoll.Config{Base: base, DB: r.rowsDB, Progress: r.cfg.Progress, LineBase: loadAt, Addr: func() string {
		for _, p := range r.procs {
			if a := p.Addr(); a != "" {
				return a
			}
		}
		return ""
	}}, out)
}
