package loadgen

import (
	"context"
	"fmt"
	"sync"
	"time"

	"imlab/ledger"
	"imlab/targets"
)

// quiesce waits Settle and looks for inbox entries past what every device
// of the uid holds; while there are some, it pulls every device to the end
// again. It returns false when the server did not settle by deadline.
func (r *runner) quiesce(ctx context.Context, deadline time.Time, sum *Summary) bool {
	for {
		select {
		case <-time.After(r.cfg.Settle):
		case <-ctx.Done():
			return false
		}
		if late := r.waitInboxTier(ctx, deadline); late != "" {
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
		r.forEach(ctx, len(r.devs), func(i int) error { r.devs[i].final(ctx); r.prog.step(); return nil })
	}
}

// behind counts uids whose inbox holds an entry past the chain of one of
// their devices (a one-entry pull by the witness device).
func (r *runner) behind(ctx context.Context) (int, error) {
	var mu sync.Mutex
	n := 0
	err := r.forEach(ctx, len(r.mine), func(i int) error {
		uid := r.mine[i]
		from := uint64(1<<64 - 1)
		for _, d := range r.byUID[uid] {
			from = min(from, d.chain)
		}
		ws, err := r.drv.Session(ctx, uid, WitnessDID)
		if err != nil {
			return err
		}
		pr, err := r.pull(ctx, ws, targets.PullOpts{Cursor: from, UseCursor: true, Limit: 1, Full: true})
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

// forEach runs f(0..n-1) on at most 32 goroutines and returns the first error.
func (r *runner) forEach(ctx context.Context, n int, f func(i int) error) error {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// witness pulls every uid's whole inbox from seq 0 and records it.
func (r *runner) witness(ctx context.Context) (uids, errs int) {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, uid := range r.mine {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := r.witnessOne(ctx, i, uid)
			r.prog.step()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				r.fail("witness uid %d: %v", uid, err)
				return
			}
			uids++
		}()
	}
	wg.Wait()
	return uids, errs
}

func (r *runner) witnessOne(ctx context.Context, i int, uid uint64) error {
	ws, err := r.drv.Session(ctx, uid, WitnessDID)
	if err != nil {
		return err
	}
	sh := r.led.Shard(i)
	var cursor uint64
	for {
		pr, err := r.pull(ctx, ws, targets.PullOpts{Cursor: cursor, UseCursor: true, Limit: targets.MaxPullLimit, Full: true})
		if err != nil {
			return err
		}
		for _, m := range pr.Msgs {
			tick, _, _ := r.parseContent(m.Content)
			sh.Witness(ledger.Witness{UID: uid, Seq: m.Seq, MsgID: m.MsgID, ConvID: m.ConvID, ConvSeq: m.ConvSeq, Tick: tick})
		}
		if !pr.HasMore || pr.NextCursor <= cursor {
			return nil
		}
		cursor = pr.NextCursor
	}
}

// pull fetches one page, waiting out 429s (Retry-After) and retrying
// transport errors, until ctx ends.
func (r *runner) pull(ctx context.Context, s targets.Session, o targets.PullOpts) (targets.PullPage, error) {
	return readRetry(ctx, maxReadTries, func() (targets.PullPage, error) { return s.Pull(ctx, o) })
}
