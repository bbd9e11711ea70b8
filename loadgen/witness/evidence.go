package witness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"imlab/ledger"
	"imlab/loadgen/summary"
	"imlab/targets"
)

// This file gathers the evidence beyond what devices stored: the store
// witness (every uid's inbox read from the store of record through the
// server's lab route after the final drain) and the read-after-ACK probes
// (the store read right after some ACKs), and writes the notes that tell
// the checker which of them it has.

// Named limits of the evidence.
const (
	// maxStoreFailNotes bounds the per-uid notes of a store witness that
	// failed for some uids; past it the whole witness is marked not made.
	maxStoreFailNotes = 100
	// maxStorePages bounds the pages of one uid's store witness (500 rows
	// each).
	maxStorePages = 100_000
	// maxReadTries bounds the tries of one witness read; maxProbeTries
	// those of a probe, which must answer right after its ACK.
	maxReadTries  = 1000
	maxProbeTries = 3
)

// errNoLab marks a server without the lab routes (404).
// errNotImplemented: the lab route exists but the target has nothing
// behind it (501: e.g. a reference server without a history store).
var errNotImplemented = errors.New("the target implements no such read (501)")

var errNoLab = errors.New("the server has no lab routes (404): start it with --lab-routes (imlab ref) to witness the store")

// evidence is the run's shared state of the probes and the lab route.
type evidence struct {
	noLab   atomic.Bool
	policy  atomic.Pointer[string]
	probes  atomic.Uint64
	failed  atomic.Uint64
	touched atomic.Uint64 // ACKed sends chosen for a probe
}

func (e *evidence) setPolicy(p string) {
	if p != "" && e.policy.Load() == nil {
		e.policy.CompareAndSwap(nil, &p)
	}
}

func (e *evidence) policyName() string {
	if p := e.policy.Load(); p != nil {
		return *p
	}
	return ""
}

// readRetry calls f until it answers, a definite refusal comes, ctx ends,
// or tries calls were made; it waits out 429s (Retry-After) and backs off
// after transport errors and 5xx but 501 (not implemented: asking again
// changes nothing).
func readRetry[T any](ctx context.Context, tries int, f func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := f()
		if err == nil {
			return v, nil
		}
		var te *targets.Error
		if !errors.As(err, &te) || te.Class == targets.Failed || te.Status == 501 || attempt >= tries {
			return v, err
		}
		wait := te.RetryAfter
		if wait <= 0 {
			wait = min(time.Duration(attempt)*20*time.Millisecond, time.Second)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return v, ctx.Err()
		}
	}
}

// labRead is readRetry for a lab route: a 404 is errNoLab, a 501
// errNotImplemented.
func labRead[T any](ctx context.Context, tries int, f func() (T, error)) (T, error) {
	v, err := readRetry(ctx, tries, f)
	switch targets.StatusOf(err) {
	case 404:
		return v, fmt.Errorf("%w: %v", errNoLab, err)
	case 501:
		return v, fmt.Errorf("%w: %v", errNotImplemented, err)
	}
	return v, err
}

// Probe reads the store for each of uids (the sender and some recipients
// of an ACKed send) right after its ACK and records what it found in
// shard.
func (w *Witness) Probe(shard *ledger.Shard, a *ledger.Attempt, uids []uint64) {
	w.ev.touched.Add(1)
	for _, uid := range uids {
		p := ledger.Probe{Tick: a.Tick, MsgID: a.MsgID, UID: uid}
		var m targets.StoredMsg
		ls, err := w.labSession(context.Background(), uid)
		if err == nil {
			m, err = labRead(context.Background(), maxProbeTries, func() (targets.StoredMsg, error) { return ls.Stored(context.Background(), a.MsgID) })
		}
		p.At = time.Since(w.env.Start)
		if errors.Is(err, errNoLab) {
			w.ev.noLab.Store(true)
			return
		}
		if err != nil {
			p.Status = ledger.ProbeFailed
			p.HTTP = uint16(targets.StatusOf(err))
			w.ev.failed.Add(1)
			shard.Probe(p)
			continue
		}
		w.ev.setPolicy(m.Policy)
		p.Status = ledger.ProbeRead
		if m.Inbox {
			p.Found |= ledger.FoundInbox
		}
		if m.Content {
			p.Found |= ledger.FoundContent
		}
		if m.Outbox != "" && m.Outbox != "none" {
			p.Found |= ledger.FoundOutbox
		}
		w.ev.probes.Add(1)
		shard.Probe(p)
	}
}

// ProbeNote sums the probes up in the ledger and the summary (fraction:
// the fraction of ACKs the run probed).
func (w *Witness) ProbeNote(sum *summary.Summary, fraction float64) {
	ps := summary.ProbeSum{Probes: w.ev.probes.Load(), Errors: w.ev.failed.Load()}
	switch {
	case fraction <= 0:
		ps.Reason = "read-after-ACK probes were off (probe fraction 0)"
	case w.ev.noLab.Load():
		ps.Reason = errNoLab.Error()
	case w.ev.touched.Load() == 0:
		ps.Reason = "no ACKed send was chosen for a probe"
	case ps.Probes == 0:
		ps.Reason = fmt.Sprintf("every probe read failed (%d)", ps.Errors)
	default:
		ps.Made = true
	}
	sum.Evidence.ReadAfterAck = ps
	w.Note(ledger.Note{Check: "read-after-ack", Made: ps.Made, Reason: ps.Reason, Policy: w.ev.policyName(),
		Probes: int(ps.Probes), Errors: int(ps.Errors)})
}

// Note writes n into the ledger (shard 0).
func (w *Witness) Note(n ledger.Note) {
	if err := w.env.Ledger.Shard(0).Note(n); err != nil {
		w.env.Fail("%v", err)
	}
}

// NoLab tells whether the target turned out to have no lab view: no
// probe is worth making then.
func (w *Witness) NoLab() bool { return w.ev.noLab.Load() }

// Policy is the target's ack policy as its lab view reported it ("":
// not reported).
func (w *Witness) Policy() string { return w.ev.policyName() }

// Stores is the store witness: it reads every uid of mine (this
// segment's, all of them for a whole run) from the store of record
// through the lab route (bounded pages by seq, never OFFSET) and records
// it.
func (w *Witness) Stores(ctx context.Context, sum *summary.Summary, mine []uint64) {
	ss := summary.StoreSum{}
	var mu sync.Mutex
	var failed []ledger.Note
	_ = ForEach(ctx, len(mine), func(i int) error {
		if w.ev.noLab.Load() {
			return nil
		}
		uid := mine[i]
		err := w.storeOne(ctx, i, uid)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case errors.Is(err, errNoLab):
			w.ev.noLab.Store(true)
		case err != nil:
			ss.Errors++
			failed = append(failed, ledger.Note{Check: "store-witness", UID: uid, Reason: err.Error()})
		default:
			ss.UIDs++
		}
		return nil
	})
	switch {
	case w.ev.noLab.Load():
		ss.Reason = errNoLab.Error()
	case ctx.Err() != nil:
		ss.Reason = "the run was cancelled before the store witness"
	case ss.Errors > maxStoreFailNotes:
		ss.Reason = fmt.Sprintf("the store witness failed for %d uids (e.g. %s)", ss.Errors, failed[0].Reason)
	default:
		ss.Made = true
	}
	if ss.Made {
		for _, n := range failed {
			w.Note(n)
			w.env.Fail("store witness uid %d: %s", n.UID, n.Reason)
		}
	}
	sum.Evidence.StoreWitness = ss
	w.Note(ledger.Note{Check: "store-witness", Made: ss.Made, Reason: ss.Reason, Policy: w.ev.policyName(), UIDs: ss.UIDs, Errors: ss.Errors})
}

func (w *Witness) storeOne(ctx context.Context, i int, uid uint64) error {
	ls, err := w.labSession(ctx, uid)
	if err != nil {
		return err
	}
	sh := w.env.Ledger.Shard(i)
	var after uint64
	for range maxStorePages {
		p, err := labRead(ctx, maxReadTries, func() (targets.StoredPage, error) { return ls.StoredInbox(ctx, after, targets.MaxPullLimit) })
		if err != nil {
			return err
		}
		w.ev.setPolicy(p.Policy)
		for _, m := range p.Msgs {
			tick, _, _ := w.env.Parse(m.Content)
			sh.Stored(ledger.Witness{UID: uid, Seq: m.Seq, MsgID: m.MsgID, ConvID: m.ConvID, ConvSeq: m.ConvSeq, Tick: tick})
		}
		if !p.HasMore {
			return nil
		}
		if p.NextCursor <= after {
			return fmt.Errorf("store page after seq %d did not advance (next %d)", after, p.NextCursor)
		}
		after = p.NextCursor
	}
	return fmt.Errorf("store witness: more than %d pages", maxStorePages)
}

// labSession is uid's witness device's lab view of the target, or errNoLab
// when the driver offers none.
func (w *Witness) labSession(ctx context.Context, uid uint64) (targets.LabSession, error) {
	s, err := w.env.Drv.Session(ctx, uid, DID)
	if err != nil {
		return nil, err
	}
	ls, ok := s.(targets.LabSession)
	if !ok {
		return nil, fmt.Errorf("%w: the %s driver reads no store", errNoLab, w.env.Drv.Name())
	}
	return ls, nil
}
