package loadgen

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"imlab/ledger"
	"imlab/targets"
)

// This file holds the client mix's actions (Mix): entering a conversation
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
func (r *runner) actionBound() time.Duration { return 2 * r.cfg.Timeout }

// MixSummary counts the mix's actions by outcome.
type MixSummary struct {
	Mix            Mix    `json:"mix"`
	Entered        uint64 `json:"entered"`
	ConvPulls      uint64 `json:"conv_pulls"`
	HistoryPages   uint64 `json:"history_pages"`
	Revokes        uint64 `json:"revokes"`
	RevokesDropped uint64 `json:"revokes_dropped,omitempty"`
	Deletes        uint64 `json:"deletes"`
	Clears         uint64 `json:"clears"`
	Reads          uint64 `json:"reads"`
	// Failed and Unknown: actions answered with a definite refusal, and
	// unanswered or answered 5xx (they may or may not have happened).
	Failed  uint64 `json:"failed"`
	Unknown uint64 `json:"unknown"`
}

// mixCounters are the live counters behind MixSummary.
type mixCounters struct {
	entered, convPulls, pages, revokes, revokesDropped, deletes, clears, reads, failed, unknown atomic.Uint64
}

func (c *mixCounters) summary(m Mix) *MixSummary {
	return &MixSummary{Mix: m, Entered: c.entered.Load(), ConvPulls: c.convPulls.Load(), HistoryPages: c.pages.Load(),
		Revokes: c.revokes.Load(), RevokesDropped: c.revokesDropped.Load(), Deletes: c.deletes.Load(), Clears: c.clears.Load(),
		Reads: c.reads.Load(), Failed: c.failed.Load(), Unknown: c.unknown.Load()}
}

// convBook is every conversation an ACK named: its type, a party or member
// who may read it, and the highest conv_seq ACKed. Safe for concurrent use.
type convBook struct {
	mu    sync.Mutex
	convs map[uint64]*convEntry
}

type convEntry struct {
	typ    uint8
	reader uint64 // a party (1:1) or member (group) of the conversation
	maxSeq uint64
}

func newConvBook() *convBook { return &convBook{convs: map[uint64]*convEntry{}} }

// acked records an ACK of a send by uid.
func (b *convBook) acked(uid uint64, typ uint8, convID, convSeq uint64) {
	if convID == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.convs[convID]
	if e == nil {
		e = &convEntry{typ: typ, reader: uid}
		b.convs[convID] = e
	}
	e.maxSeq = max(e.maxSeq, convSeq)
}

// snapshot lists the conversations.
func (b *convBook) snapshot() map[uint64]convEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[uint64]convEntry, len(b.convs))
	for id, e := range b.convs {
		out[id] = *e
	}
	return out
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
func (r *runner) act(dev uint32, convID uint64, started time.Duration, err error) ledger.Act {
	a := ledger.Act{Dev: dev, ConvID: convID, Intended: started, Started: started, Ended: time.Since(r.start),
		Outcome: outcomeOf(err), Status: uint16(targets.StatusOf(err))}
	switch a.Outcome {
	case ledger.Fail:
		r.mixN.failed.Add(1)
	case ledger.Unknown:
		r.mixN.unknown.Add(1)
	}
	return a
}

// chance draws a decision of probability p from the device's generator.
func (d *device) chance(p float64) bool { return p > 0 && d.rng.Float64() < p }

// saw notes a message the device stored (for the mix).
func (d *device) saw(m *targets.Msg) {
	if !d.r.cfg.Mix.On() || m.ConvID == 0 {
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
func (d *device) cameOnline(ctx context.Context) {
	mix := d.r.cfg.Mix
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
func (d *device) pushed(ctx context.Context, m *targets.Msg) {
	if d.chance(d.r.cfg.Mix.OpenOnPush) {
		d.enter(ctx, m.ConvID)
	}
}

// enter opens conversation id as a client does: a conversation pull of
// its gap, a history page, then perhaps a delete, a mark-read, a clear.
func (d *device) enter(ctx context.Context, id uint64) {
	c := d.convs[id]
	if c == nil {
		return
	}
	c.news = false
	d.r.mixN.entered.Add(1)
	d.convPull(ctx, id, c)
	if d.r.cfg.Mix.HistoryPage == 0 || c.maxSeq == 0 || ctx.Err() != nil {
		return
	}
	from, to := uint64(1), c.maxSeq
	if to > uint64(d.r.cfg.Mix.HistoryPage) {
		from = to - uint64(d.r.cfg.Mix.HistoryPage) + 1
	}
	items, ok := d.historyPage(ctx, id, from, to)
	if !ok || ctx.Err() != nil {
		return
	}
	mix := d.r.cfg.Mix
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
func (d *device) convPull(ctx context.Context, id uint64, c *devConv) {
	ctx, cancel := context.WithTimeout(ctx, d.r.actionBound())
	defer cancel()
	inbox := d.r.caps.Inbox
	var before uint64
	var errB error
	if inbox {
		before, errB = d.syncCursor(ctx)
	}
	started := d.now()
	pg, err := d.sess.ConvPull(ctx, targets.ConvPullOpts{ConvID: id, Cursor: c.cursor, Limit: targets.MaxConvPullLimit})
	rec := ledger.ConvPull{Act: d.r.act(d.idx, id, started, err), Cursor: c.cursor, Limit: targets.MaxConvPullLimit}
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
	d.r.mixN.convPulls.Add(1)
	if err := d.shard().ConvPull(rec); err != nil {
		d.r.fail("device %d conversation pull: %v", d.idx, err)
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
func (d *device) syncCursor(ctx context.Context) (uint64, error) {
	for i := 1; ; i++ {
		c, err := d.sess.Ack(ctx, 0)
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
func (d *device) historyPage(ctx context.Context, id, from, to uint64) ([]targets.HistoryItem, bool) {
	ctx, cancel := context.WithTimeout(ctx, d.r.actionBound())
	defer cancel()
	started := d.now()
	items, err := d.sess.History(ctx, targets.HistoryOpts{ConvID: id, From: from, To: to})
	rec := ledger.HistoryPage{Act: d.r.act(d.idx, id, started, err), From: from, To: to}
	for _, it := range items {
		tag, _, _ := d.r.parseContent(it.Content)
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
	d.r.mixN.pages.Add(1)
	if err := d.shard().HistoryPage(rec); err != nil {
		d.r.fail("device %d history page: %v", d.idx, err)
	}
	return items, err == nil
}

// msgAction deletes (or revokes) the message at convSeq.
func (d *device) msgAction(ctx context.Context, k ledger.Action, id, convSeq uint64) {
	d.r.msgAction(ctx, d.sess, d.shard(), d.idx, k, id, convSeq)
}

// msgAction makes a revoke or a delete with s, trying again while the
// target answers "unavailable" (503: the history tier has not written the
// message yet, nothing changed), within actionBound; it records the
// outcome of the last try (unknown if any earlier try was unanswered and
// the last refused: the earlier may have happened).
func (r *runner) msgAction(ctx context.Context, s targets.Session, sh *ledger.Shard, dev uint32, k ledger.Action, id, convSeq uint64) {
	ctx, cancel := context.WithTimeout(ctx, r.actionBound())
	defer cancel()
	started := time.Since(r.start)
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
	a := r.act(dev, id, started, err)
	if unanswered && a.Outcome == ledger.Fail {
		a.Outcome = ledger.Unknown
	}
	if k == ledger.ActRevoke {
		r.mixN.revokes.Add(1)
		sh.Revoke(ledger.MsgAction{Act: a, ConvSeq: convSeq})
	} else {
		r.mixN.deletes.Add(1)
		sh.Delete(ledger.MsgAction{Act: a, ConvSeq: convSeq})
	}
}

// markRead marks from..to read.
func (d *device) markRead(ctx context.Context, id, from, to uint64) {
	ctx, cancel := context.WithTimeout(ctx, d.r.actionBound())
	defer cancel()
	started := d.now()
	err := d.sess.MarkRead(ctx, id, from, to)
	d.r.mixN.reads.Add(1)
	d.shard().MarkRead(ledger.MarkRead{Act: d.r.act(d.idx, id, started, err), From: from, To: to})
}

// clear clears the conversation for the device's user.
func (d *device) clear(ctx context.Context, id uint64) {
	ctx, cancel := context.WithTimeout(ctx, d.r.actionBound())
	defer cancel()
	started := d.now()
	minSeq, err := d.sess.Clear(ctx, id)
	d.r.mixN.clears.Add(1)
	d.shard().Clear(ledger.Clear{Act: d.r.act(d.idx, id, started, err), MinSeq: minSeq})
}

// revoker makes the senders' revokes off the send path: a bounded queue
// and revokers goroutines, started by start and stopped (the queue
// drained) by stop.
type revoker struct {
	q  chan revokeReq
	wg sync.WaitGroup
}

type revokeReq struct {
	sender  *device
	shard   *ledger.Shard
	convID  uint64
	convSeq uint64
}

func (r *runner) startRevoker(ctx context.Context) *revoker {
	rv := &revoker{q: make(chan revokeReq, revokeQueue)}
	for range revokers {
		rv.wg.Add(1)
		go func() {
			defer rv.wg.Done()
			for x := range rv.q {
				r.msgAction(ctx, x.sender.sess, x.shard, x.sender.idx, ledger.ActRevoke, x.convID, x.convSeq)
			}
		}()
	}
	return rv
}

// offer queues a revoke; a full queue drops it (nothing asked, nothing
// recorded).
func (r *runner) offerRevoke(x revokeReq) {
	select {
	case r.rev.q <- x:
	default:
		r.mixN.revokesDropped.Add(1)
	}
}

// stop ends the revokers once the queue is empty.
func (rv *revoker) stop() {
	close(rv.q)
	rv.wg.Wait()
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
