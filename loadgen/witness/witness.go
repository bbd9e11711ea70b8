// Package witness owns what a load run reads of the target once its
// devices drained, and the reads beside the load: the pull witness (every
// uid's whole inbox), the store witness and the read-after-ACK probes
// through the target's lab view, the history witness (every conversation
// an ACK named, as stored, after a bounded wait for the history tier), the
// retention log, the conversation log of a target without an inbox, the
// queue lag at the end and the wait for the inbox tier; and the notes
// that tell the checker which of them it has.
//
// It must not send, drive the devices or judge; it must not import the
// generator (loadgen) or its devices.
package witness

import (
	"context"
	"sync"
	"time"

	"imlab/ledger"
	"imlab/targets"
)

// DID is the device id of the witness's reads.
const DID = "imlab-witness"

// Env is what the witness reads with and records into.
type Env struct {
	Drv targets.Driver
	// Lab is Drv's lab view of the target; nil when it offers none.
	Lab    targets.LabDriver
	Ledger *ledger.Ledger
	// Start is the run's time zero.
	Start time.Time
	// Parse reads a message's content: the send's tick and intended time,
	// ours false when another run (or no run) sent it.
	Parse func(content string) (tick uint64, intended time.Duration, ours bool)
	// Fail records a run error; Step counts one item of the run's phase
	// done (the live line).
	Fail func(format string, args ...any)
	Step func()
}

// Witness is one run's witness and the evidence it gathers while the load
// runs (the probes) and after.
type Witness struct {
	env Env
	ev  evidence
}

// New is the witness of a run.
func New(env Env) *Witness { return &Witness{env: env} }

// ForEach runs f(0..n-1) on at most 32 goroutines and returns the first error.
func ForEach(ctx context.Context, n int, f func(i int) error) error {
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

// Inboxes is the pull witness: it pulls every uid's whole inbox from seq 0
// and records it (uid i in the ledger's shard i), and counts the uids read
// and those whose read failed.
func (w *Witness) Inboxes(ctx context.Context, mine []uint64) (uids, errs int) {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, uid := range mine {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := w.witnessOne(ctx, i, uid)
			w.env.Step()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				w.env.Fail("witness uid %d: %v", uid, err)
				return
			}
			uids++
		}()
	}
	wg.Wait()
	return uids, errs
}

func (w *Witness) witnessOne(ctx context.Context, i int, uid uint64) error {
	ws, err := w.env.Drv.Session(ctx, uid, DID)
	if err != nil {
		return err
	}
	sh := w.env.Ledger.Shard(i)
	var cursor uint64
	for {
		pr, err := Pull(ctx, ws, targets.PullOpts{Cursor: cursor, UseCursor: true, Limit: targets.MaxPullLimit, Full: true})
		if err != nil {
			return err
		}
		for _, m := range pr.Msgs {
			tick, _, _ := w.env.Parse(m.Content)
			sh.Witness(ledger.Witness{UID: uid, Seq: m.Seq, MsgID: m.MsgID, ConvID: m.ConvID, ConvSeq: m.ConvSeq, Tick: tick})
		}
		if !pr.HasMore || pr.NextCursor <= cursor {
			return nil
		}
		cursor = pr.NextCursor
	}
}

// Pull fetches one page, waiting out 429s (Retry-After) and retrying
// transport errors, until ctx ends.
func Pull(ctx context.Context, s targets.Session, o targets.PullOpts) (targets.PullPage, error) {
	return readRetry(ctx, maxReadTries, func() (targets.PullPage, error) { return s.Pull(ctx, o) })
}
