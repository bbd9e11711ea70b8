package loadgen

import (
	"context"
	"fmt"
	"sync"
	"time"

	"imlab/ledger"
	"imlab/loadgen/summary"
	"imlab/loadgen/witness"
	"imlab/targets"
)

// This file holds what the runner decides between its rooms: the drain
// rounds after the devices drained (quiesce), which ACKs are probed or
// revoked, and what the target must offer the run.

// quiesce waits Settle and looks for inbox entries past what every device
// of the uid holds; while there are some, it pulls every device to the end
// again. It returns false when the server did not settle by deadline.
func (r *runner) quiesce(ctx context.Context, deadline time.Time, sum *summary.Summary) bool {
	for {
		select {
		case <-time.After(r.cfg.Settle):
		case <-ctx.Done():
			return false
		}
		if late := r.wit.WaitInboxTier(ctx, deadline); late != "" {
			sum.Drain.InboxBehind = late
			r.fail("final drain: the inbox tier had not drained by the drain deadline (%s)", late)
			return false
		}
		behind, err := r.behind(ctx)
		if err != nil {
			r.fail("drain round %d: %v", sum.Drain.Rounds, err)
			return false
		}
		if behind == 0 {
			return true
		}
		if sum.Drain.Rounds >= maxDrainRounds || time.Now().After(deadline) {
			r.fail("final drain: %d uids still had new inbox entries after %d rounds", behind, sum.Drain.Rounds)
			return false
		}
		r.prog.enter(PhaseDrain, sum.Drain.Rounds, len(r.devs))
		sum.Drain.Rounds++
		_ = witness.ForEach(ctx, len(r.devs), func(i int) error { r.devs[i].Final(ctx); r.prog.step(); return nil })
	}
}

// behind counts uids whose inbox holds an entry past the chain of one of
// their devices (a one-entry pull by the witness device).
func (r *runner) behind(ctx context.Context) (int, error) {
	var mu sync.Mutex
	n := 0
	err := witness.ForEach(ctx, len(r.mine), func(i int) error {
		uid := r.mine[i]
		from := uint64(1<<64 - 1)
		for _, d := range r.byUID[uid] {
			from = min(from, d.Chain())
		}
		ws, err := r.drv.Session(ctx, uid, witness.DID)
		if err != nil {
			return err
		}
		pr, err := witness.Pull(ctx, ws, targets.PullOpts{Cursor: from, UseCursor: true, Limit: 1, Full: true})
		if err != nil {
			return fmt.Errorf("uid %d: %w", uid, err)
		}
		if len(pr.Msgs) > 0 {
			mu.Lock()
			n++
			mu.Unlock()
		}
		return nil
	})
	return n, err
}

// probeChosen says whether tick's ACK is probed (ProbeFraction, by the
// tick's own hash so that a run is reproducible).
func (r *runner) probeChosen(tick uint64) bool {
	f := r.cfg.ProbeFraction
	if f <= 0 || r.wit.NoLab() {
		return false
	}
	h := splitmix64(r.cfg.Seed ^ tick*0x9e3779b97f4a7c15 ^ 0x70b3)
	return float64(h>>11)/(1<<53) < f
}

// probeUIDs lists the uids a probe reads: the sender, then up to
// ProbeRecipients other recipients.
func (r *runner) probeUIDs(tick uint64, sender uint64, convType uint8, target uint64) []uint64 {
	out := []uint64{sender}
	if convType == 1 {
		if r.cfg.ProbeRecipients > 0 {
			out = append(out, target)
		}
		return out
	}
	var members []uint64
	for _, g := range r.groups {
		if g.id == target {
			members = g.members
			break
		}
	}
	n := len(members)
	for i := 0; i < n && len(out) <= r.cfg.ProbeRecipients; i++ {
		m := members[(int(tick%uint64(n))+i)%n]
		if m != sender {
			out = append(out, m)
		}
	}
	return out
}

// revokeChosen says whether tick's ACKed send is revoked (Mix.Revoke, by
// the tick's own hash so that a run is reproducible).
func (r *runner) revokeChosen(tick uint64) bool {
	p := r.cfg.Mix.Revoke
	if p <= 0 {
		return false
	}
	h := splitmix64(r.cfg.Seed ^ tick*0xd6e8feb86659fd93 ^ 0x4e70)
	return float64(h>>11)/(1<<53) < p
}

// checkCaps takes what the target offers and refuses what this run asks
// of it that it lacks.
func (r *runner) checkCaps() error {
	r.caps = r.drv.Capabilities()
	if r.caps.Inbox {
		return nil
	}
	switch {
	case r.cfg.SendVia == ViaWS:
		return fmt.Errorf("%w: send via ws: the %s driver sends over sessions of its own (use http, its default path)", ErrInvalid, r.drv.Name())
	case !r.cfg.Segment.Whole():
		return fmt.Errorf("%w: segment %s: the %s driver provisions the population in one process (its accounts and topics are the server's, not derived from the run)", ErrInvalid, r.cfg.Segment, r.drv.Name())
	}
	return nil
}

// ledgerOptions states the target in the ledger's header (nothing for the
// reference server, whose contract is the default).
func (r *runner) ledgerOptions() ledger.Options {
	o := ledger.Options{RunID: r.runID, Start: r.start, Shards: r.cfg.Shards}
	if r.caps.Driver != "" && r.caps.Driver != targets.DriverRef {
		caps := r.caps
		o.Target = &caps
	}
	return o
}
