package device

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"imlab/ledger"
	"imlab/loadgen/clientmix"
	"imlab/loadgen/summary"
	"imlab/targets"
)

// This file holds the client mix's actions (clientmix.Mix): entering a conversation
// (a conversation pull of its gap, a history page, then perhaps a delete
// for oneself, a mark-read, a clear), and the senders' revokes. Every
// action and its answer goes into the ledger; each is bounded by
// actionBound.

// Bounds of the actions.
const (
	// maxEntersPerVisit bounds the conversations a device enters on
	// coming online (the rest keep their news for the next time).
	maxEntersPerVisit = 8
	// revokeQueue bounds the revokes waiting for a revoker; a revoke that
	// finds it full is not made (counted in Summary.Mix.RevokesDropped).
	revokeQueue = 1024
	// revokers are the goroutines that make the revokes.
	revokers = 2
	// maxRevokeTries: a revoke answered "unavailable" (the history tier
	// has not written the message yet: nothing changed) is tried again.
	maxRevokeTries = 5
)

// actionBound is how long one action (all its tries) may take.
func (f *Fleet) actionBound() time.Duration { return 2 * f.env.Timeout }

// mixCounters are the live counters behind MixSummary.
type mixCounters struct {
	entered, convPulls, pages, revokes, revokesDropped, deletes, clears, reads, failed, unknown atomic.Uint64
}

func (c *mixCounters) summary(m clientmix.Mix) *summary.MixSummary {
	return &summary.MixSummary{Mix: m, Entered: c.entered.Load(), ConvPulls: c.convPulls.Load(), HistoryPages: c.pages.Load(),
		Revokes: c.revokes.Load(), RevokesDropped: c.revokesDropped.Load(), Deletes: c.deletes.Load(), Clears: c.clears.Load(),
		Reads: c.reads.Load(), Failed: c.failed.Load(), Unknown: c.unknown.Load()}
}

// devConv is what a device knows of one conversation.
type devConv struct {
	typ    uint8
	cursor uint64 // the conversation pull's cursor (an inbox seq)
	maxSeq uint64 // the highest conv_seq the device has seen
	news   bool   // messages arrived since the device last entered
}

// outcomeOf sorts an answer for the ledger: a retryable refusal did
// nothing (Fail).
func outcomeOf(err error) ledger.Outcome {
	switch targets.Classify(err) {
	case targets.OK:
		return ledger.OK
	case targets.Failed, targets.Retryable:
		return ledger.Fail
	}
	return ledger.Unknown
}

// act is the ledger's record of an action that started at started and
// ended now with err.
func (f *Fleet) act(dev uint32, convID uint64, started time.Duration, err error) ledger.Act {
	a := ledger.Act{Dev: dev, ConvID: convID, Intended: started, Started: started, Ended: time.Since(f.start),
		Outcome: outcomeOf(err), Status: uint16(targets.StatusOf(err))}
	switch a.Outcome {
	case ledger.Fail:
		f.mixN.failed.Add(1)
	case ledger.Unknown:
		f.mixN.unknown.Add(1)
	}
	return a
}

// chance draws a decision of probability p from the device's generator.
func (d *Device) chance(p float64) bool { return p > 0 && d.rng.Float64() < p }

// saw notes a message the device stored (for the mix).
func (d *Device) saw(m *targets.Msg) {
	if !d.f.env.Mix.On() || m.ConvID == 0 {
		return
	}
	c := d.convs[m.ConvID]
	if c == nil {
		c = &devConv{typ: m.ConvType}
		d.convs[m.ConvID] = c
	}
	c.maxSeq = max(c.maxSeq, m.ConvSeq)
	c.news = true
}

// cameOnline enters some of the conversations with news (Mix.EnterOnOnline).
func (d *Device) cameOnline(ctx context.Context) {
	mix := d.f.env.Mix
	if mix.EnterOnOnline == 0 {
		return
	}
	n := 0
	for id, c := range d.convs {
		if !c.news {
			continue
		}
		if n >= maxEntersPerVisit || ctx.Err() != nil {
			return
		}
		c.news = false
		if d.chance(mix.EnterOnOnline) {
			n++
			d.enter(ctx, id)
		}
	}
}

// pushed is a push of m: the device enters its conversation when it has
// it open (Mix.OpenOnPush).
func (d *Device) pushed(ctx context.Context, m *targets.Msg) {
	if d.chance(d.f.env.Mix.OpenOnPush) {
		d.enter(ctx, m.ConvID)
	}
}

// enter opens conversation id as a client does: a conversation pull of
// its gap, a history page, then perhaps a delete, a mark-read, a clear.
func (d *Device) enter(ctx context.Context, id uint64) {
	c := d.convs[id]
	if c == nil {
		return
	}
	c.news = false
	d.f.mixN.entered.Add(1)
	d.convPull(ctx, id, c)
	if d.f.env.Mix.HistoryPage == 0 || c.maxSeq == 0 || ctx.Err() != nil {
		return
	}
	from, to := uint64(1), c.maxSeq
	if to > uint64(d.f.env.Mix.HistoryPage) {
		from = to - uint64(d.f.env.Mix.HistoryPage) + 1
	}
	items, ok := d.historyPage(ctx, id, from, to)
	if !ok || ctx.Err() != nil {
		return
	}
	mix := d.f.env.Mix
	if d.chance(mix.Delete) {
		var shown []uint64
		for _, it := range items {
			if !it.Tombstone && !it.Revoked {
				shown = append(shown, it.ConvSeq)
			}
		}
		if len(shown) > 0 {
			d.msgAction(ctx, ledger.ActDelete, id, shown[d.rng.IntN(len(shown))])
		}
	}
	if c.typ == targets.ConvSingle && len(items) > 0 && d.chance(mix.Read) && ctx.Err() == nil {
		d.markRead(ctx, id, from, to)
	}
	if d.chance(mix.Clear) && ctx.Err() == nil {
		d.clear(ctx, id)
	}
}

// convPull reads one page of the conversation's entries above its cursor,
// with the device's sync cursor read right before and after (an
// acknowledgement of 0, which moves nothing). On a target without an
// inbox the cursor is a conv_seq and there is no sync cursor to read.
func (d *Device) convPull(ctx context.Context, id uint64, c *devConv) {
	ctx, cancel := context.WithTimeout(ctx, d.f.actionBound())
	defer cancel()
	inbox := d.f.env.Caps.Inbox
	var before uint64
	var errB error
	if inbox {
		before, errB = d.syncCursor(ctx)
	}
	started := d.now()
	pg, err := d.Sess.ConvPull(ctx, targets.ConvPullOpts{ConvID: id, Cursor: c.cursor, Limit: targets.MaxConvPullLimit})
	rec := ledger.ConvPull{Act: d.f.act(d.Idx, id, started, err), Cursor: c.cursor, Limit: targets.MaxConvPullLimit}
	if err == nil {
		rec.HasMore, rec.NextCursor = pg.HasMore, pg.NextCursor
		if inbox {
			after, errA := d.syncCursor(ctx)
			rec.SyncRead, rec.SyncBefore, rec.SyncAfter = errB == nil && errA == nil, before, after
		}
		for _, m := range pg.Msgs {
			rec.Items = append(rec.Items, ledger.PulledItem{Seq: m.Seq, MsgID: m.MsgID, ConvSeq: m.ConvSeq})
			c.maxSeq = max(c.maxSeq, m.ConvSeq)
		}
		if len(rec.Items) > ledger.MaxPageItems {
			rec.Items = rec.Items[:ledger.MaxPageItems]
		}
		c.cursor = max(c.cursor, pg.NextCursor)
	}
	d.f.mixN.convPulls.Add(1)
	if err := d.shard().ConvPull(rec); err != nil {
		d.f.env.Fail("device %d conversation pull: %v", d.Idx, err)
	}
}

// maxSyncReads bounds the reads of the sync cursor waiting for the
// device's own acknowledgement in flight.
const maxSyncReads = 10

// syncCursor reads the device's stored sync cursor (an acknowledgement of
// 0 moves nothing). An online device acknowledges over its WebSocket,
// which answers nothing: the server may apply an acknowledgement sent
// just before later, so the read waits (bounded) until the cursor has
// reached what the device acknowledged; an error when it never does (the
// pull is then recorded without its sync reads).
func (d *Device) syncCursor(ctx context.Context) (uint64, error) {
	for i := 1; ; i++ {
		c, err := d.Sess.Ack(ctx, 0)
		if err != nil || c >= d.acked {
			return c, err
		}
		if i >= maxSyncReads {
			return c, fmt.Errorf("sync cursor %d still below the acknowledged %d", c, d.acked)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return c, ctx.Err()
		}
	}
}

// historyPage reads conv_seqs from..to as the user sees them.
func (d *Device) historyPage(ctx context.Context, id, from, to uint64) ([]targets.HistoryItem, bool) {
	ctx, cancel := context.WithTimeout(ctx, d.f.actionBound())
	defer cancel()
	started := d.now()
	items, err := d.Sess.History(ctx, targets.HistoryOpts{ConvID: id, From: from, To: to})
	rec := ledger.HistoryPage{Act: d.f.act(d.Idx, id, started, err), From: from, To: to}
	for _, it := range items {
		tag, _, _ := d.f.env.Parse(it.Content)
		pi := ledger.PageItem{ConvSeq: it.ConvSeq, MsgID: it.MsgID, Sender: it.SenderUID, Tag: tag, Revoked: it.Revoked, Tombstone: it.Tombstone}
		if it.Read != nil {
			pi.Read = ledger.ReadNo
			if *it.Read {
				pi.Read = ledger.ReadYes
			}
		}
		rec.Items = append(rec.Items, pi)
	}
	if len(rec.Items) > ledger.MaxPageItems {
		rec.Items = rec.Items[:ledger.MaxPageItems]
	}
	d.f.mixN.pages.Add(1)
	if err := d.shard().HistoryPage(rec); err != nil {
		d.f.env.Fail("device %d history page: %v", d.Idx, err)
	}
	return items, err == nil
}

// msgAction deletes (or revokes) the message at convSeq.
func (d *Device) msgAction(ctx context.Context, k ledger.Action, id, convSeq uint64) {
	d.f.msgAction(ctx, d.Sess, d.shard(), d.Idx, k, id, convSeq)
}

// msgAction makes a revoke or a delete with s, trying again while the
// target answers "unavailable" (503: the history tier has not written the
// message yet, nothing changed), within actionBound; it records the
// outcome of the last try (unknown if any earlier try was unanswered and
// the last refused: the earlier may have happened).
func (f *Fleet) msgAction(ctx context.Context, s targets.Session, sh *ledger.Shard, dev uint32, k ledger.Action, id, convSeq uint64) {
	ctx, cancel := context.WithTimeout(ctx, f.actionBound())
	defer cancel()
	started := time.Since(f.start)
	var err error
	unanswered := false
	for try := 1; ; try++ {
		if k == ledger.ActRevoke {
			err = s.Revoke(ctx, id, convSeq)
		} else {
			err = s.Delete(ctx, id, convSeq)
		}
		if targets.Classify(err) != targets.Unknown || try >= maxRevokeTries || ctx.Err() != nil {
			break
		}
		if targets.StatusOf(err) != 503 {
			unanswered = true
		}
		select {
		case <-time.After(time.Duration(try) * 100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	a := f.act(dev, id, started, err)
	if unanswered && a.Outcome == ledger.Fail {
		a.Outcome = ledger.Unknown
	}
	if k == ledger.ActRevoke {
		f.mixN.revokes.Add(1)
		sh.Revoke(ledger.MsgAction{Act: a, ConvSeq: convSeq})
	} else {
		f.mixN.deletes.Add(1)
		sh.Delete(ledger.MsgAction{Act: a, ConvSeq: convSeq})
	}
}

// markRead marks from..to read.
func (d *Device) markRead(ctx context.Context, id, from, to uint64) {
	ctx, cancel := context.WithTimeout(ctx, d.f.actionBound())
	defer cancel()
	started := d.now()
	err := d.Sess.MarkRead(ctx, id, from, to)
	d.f.mixN.reads.Add(1)
	d.shard().MarkRead(ledger.MarkRead{Act: d.f.act(d.Idx, id, started, err), From: from, To: to})
}

// clear clears the conversation for the device's user.
func (d *Device) clear(ctx context.Context, id uint64) {
	ctx, cancel := context.WithTimeout(ctx, d.f.actionBound())
	defer cancel()
	started := d.now()
	minSeq, err := d.Sess.Clear(ctx, id)
	d.f.mixN.clears.Add(1)
	d.shard().Clear(ledger.Clear{Act: d.f.act(d.Idx, id, started, err), MinSeq: minSeq})
}

// revoker makes the senders' revokes off the send path: a bounded queue
// and revokers goroutines, started by Start when the mix revokes and
// stopped (the queue drained) by StopRevoker.
type revoker struct {
	q  chan revokeReq
	wg sync.WaitGroup
}

type revokeReq struct {
	sender  *Device
	convID  uint64
	convSeq uint64
}

// startRevoker starts the revokers (ctx bounds their actions).
func (f *Fleet) startRevoker(ctx context.Context) {
	rv := &revoker{q: make(chan revokeReq, revokeQueue)}
	for range revokers {
		rv.wg.Add(1)
		go func() {
			defer rv.wg.Done()
			for x := range rv.q {
				f.msgAction(ctx, x.sender.Sess, x.sender.shard(), x.sender.Idx, ledger.ActRevoke, x.convID, x.convSeq)
			}
		}()
	}
	f.rev = rv
}

// OfferRevoke queues sender's revoke of its message at convSeq in convID;
// a full queue drops it (nothing asked, nothing recorded), and so does a
// fleet whose revokers were not started.
func (f *Fleet) OfferRevoke(sender *Device, convID, convSeq uint64) {
	if f.rev == nil {
		return
	}
	select {
	case f.rev.q <- revokeReq{sender: sender, convID: convID, convSeq: convSeq}:
	default:
		f.mixN.revokesDropped.Add(1)
	}
}

// StopRevoker ends the revokers once their queue is empty.
func (f *Fleet) StopRevoker() {
	if f.rev != nil {
		close(f.rev.q)
		f.rev.wg.Wait()
	}
}
