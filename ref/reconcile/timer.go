package reconcile

import (
	"context"
	"time"
)

// What a timer run covered (Report.Timer).
const (
	TimerFull        = "full"
	TimerIncremental = "incremental"
)

// Timer is the state of one reconciler's timer runs: where the previous
// run's passes ended. Not safe for concurrent use; RunTimer owns one.
type Timer struct {
	r *Reconciler
	// until: forward and reverse covered everything before it (zero: no
	// run yet); pushUntil: push did (its ranges end PushAfter before now).
	until, pushUntil time.Time
	// lastFull is the now of the last full run that succeeded.
	lastFull time.Time
}

// NewTimer returns the state of timer runs that have not run yet: the
// first run covers the whole window.
func (r *Reconciler) NewTimer() *Timer { return &Timer{r: r} }

// Run is one timer run at now. A full run covers [now-Window, now-Grace)
// with every pass, as Reconciler.Run does; it is the first run, the run
// after the clock went back, and the run FullInterval after the last full
// one. The runs between are incremental: forward and reverse cover
// [previous until - Overlap, now-Grace), push [previous push end -
// Overlap, now-PushAfter), each clipped to the window, so a run reads the
// rows written since the previous run (and those of Overlap again), not
// the window: msg_content along idx_created and offline_msg along
// idx_created_msg, the index alone for push.
//
// What the passes find, run by run: a message whose inbox rows are
// missing, or an inbox row without its body, by the first run after it
// passed now-Grace; an inbox row unpulled PushAfter after its created_at,
// by the first run after that; and, by the next full run while it is in
// the window, what only appeared later: a body or an inbox row gone after
// its row was looked at, a row written more than Grace+Overlap (for push
// PushAfter) after its created_at (an inbox tier that lagged that much).
//
// A run that failed, or whose forward pass stopped at MaxRepairs, leaves
// the state as it was: the next run covers its range again.
func (t *Timer) Run(ctx context.Context, now time.Time) (Report, error) {
	cfg := t.r.cfg
	now = now.Round(0) // the wall clock the rows' created_at is read on, not the monotonic one
	since, until := now.Add(-cfg.Window), now.Add(-cfg.Grace)
	pushSince := since
	full := t.until.IsZero() || now.Sub(t.lastFull) >= cfg.FullInterval || until.Before(t.until)
	if !full {
		since = latest(since, t.until.Add(-cfg.Overlap))
		pushSince = latest(pushSince, t.pushUntil.Add(-cfg.Overlap))
	}
	rep, err := t.r.run(ctx, since, until, pushSince, now)
	rep.Timer = TimerIncremental
	if full {
		rep.Timer = TimerFull
	}
	if err != nil || rep.Forward.Incomplete {
		return rep, err
	}
	// Neither end goes back in a run that is not full: now and until only
	// grow between full runs.
	t.until, t.pushUntil = until, now.Add(-cfg.PushAfter) // Push's own end, when before until
	if until.Before(t.pushUntil) {
		t.pushUntil = until
	}
	if full {
		t.lastFull = now
	}
	return rep, nil
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// RunTimer runs Timer.Run every Interval until ctx is done (the
// reconciler role): the first run, and one every FullInterval, over the
// whole window [now-Window, now-Grace), the others over what was written
// since the previous run. Each report goes to onReport (may be nil).
func (r *Reconciler) RunTimer(ctx context.Context, onReport func(Report)) error {
	tm := r.NewTimer()
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		rep, err := tm.Run(ctx, time.Now())
		if err != nil && ctx.Err() == nil {
			r.log.Warn("reconciliation run failed", "timer", rep.Timer, "err", err)
		} else if err == nil {
			r.log.Info("reconciliation run", "timer", rep.Timer, "since", rep.Since, "forward_messages", rep.Forward.Messages,
				"forward_missing", rep.Forward.MissingRows, "forward_repaired", rep.Forward.Repaired,
				"reverse_rows", rep.Reverse.Rows, "reverse_missing", rep.Reverse.Missing, "reverse_repaired", rep.Reverse.Repaired,
				"push_rows", rep.Push.Rows, "push_recorded", rep.Push.Recorded, "duration", rep.Duration)
			if onReport != nil {
				onReport(rep)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
