package runner

import (
	"context"
	"time"

	"imlab/expect"
	"imlab/recovery"
)

// awaitRecovery keeps the lag poller running after the load until every
// group has recovered (and held) or the deadline has passed, so that a
// run never ends before its recovery can be judged and never waits past
// the drain timeout for it.
func (r *run) awaitRecovery(ctx context.Context, base time.Time, cfg recovery.Config, lag *lagLog) {
	tk := time.NewTicker(LagInterval)
	defer tk.Stop()
	for {
		f, err := recovery.Compute(cfg, expect.RecoverySamples(lag.snapshot()))
		if err != nil || f.Status == recovery.Recovered || time.Since(base).Seconds() > cfg.Deadline+cfg.Hold+LagInterval.Seconds() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}
