package send

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"imlab/ref/defect"
	"imlab/ref/inbox"
	"imlab/ref/model"
)

// Pending is one accepted send inside a batch. The batcher fills Msg
// (msg_id, conv_seq, created_at) before the policy's InTx runs.
type Pending struct {
	Req model.SendRequest
	// Msg is the message as stored: MsgID, ConvID, ConvType, ConvSeq,
	// SenderUID, ClientMsgID, Content, CreatedAt.
	Msg model.Message
	// Recipients are the uids whose inboxes get the message, ascending; the
	// sender is one of them (1:1: {to_uid, sender}; group: all members).
	Recipients []uint64

	start    time.Time
	ctx      context.Context // the caller's (cancellation)
	deadline time.Time       // the caller's deadline or SendTimeout, the earlier
	done     chan outcome
	dups     []*Pending // same (sender, client_msg_id) later in the batch
	key      dupKey
	flight   *flight // this send's in-process dedupe flight (nil for batch duplicates)
	// held are the seq proposals of a strict batch whose guarded fence
	// raise missed (set on the batch's first Pending for its next attempt).
	held *inbox.Proposals
	// tk is the strict batch's claim ticket (claims.go; nil without
	// claims), set on every Pending of the batch.
	tk *ticket
	// pre is the strict batch's seq proposals being taken while its
	// transaction begins (Strict.prefetch; set on every Pending of the
	// batch, so that it is found whichever of them are left when InTx runs).
	pre *prefetch
	// pair and fl hold a 1:1 send's Recipients and its flight, so that a
	// send costs fewer allocations.
	pair [2]uint64
	fl   flight
}

// expired tells why p must not be started any more (nil: it may).
func (p *Pending) expired(now time.Time) error {
	if err := p.ctx.Err(); err != nil {
		return err
	}
	if !now.Before(p.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Policy is the ack-policy seam. The batcher owns queues, batching, the
// transaction, dedupe, conv_seq and msg_content; a Policy adds what its ACK
// promises:
//
//   - InTx runs inside the batch's READ COMMITTED transaction, after the
//     msg_content rows are inserted (when StoresContent), under the lock
//     order conv_counter then seq_fence; it returns the inbox entries it
//     committed (strict) or nil. An error rolls the batch back: Retryable
//     errors (inbox.Retryable) retry the batch, others fail it (a batch of
//     more than one is then retried message by message, so one bad message
//     does not fail its batch-mates).
//   - AfterCommit runs after COMMIT and before the ACK is released (publish
//     to Kafka for "queue"; wake a relay for "outbox"; nothing for
//     "strict"). A non-nil error fails every send of the batch with
//     ErrUnavailable (the rows stay committed; a retry finds them by
//     client_msg_id).
//   - StoresContent false means the transaction writes no msg_content (the
//     unsafe "queue" policy): the batch transaction then only advances
//     conv_counter and runs InTx, and dedupe by client_msg_id covers only
//     one batch.
//
// Policies other than strict ("store", "outbox", "queue") live in
// ref/fanout and are handed in through Config.Policies.
type Policy interface {
	Name() string
	StoresContent() bool
	InTx(ctx context.Context, tx *sql.Tx, batch []*Pending) ([]model.InboxEntry, error)
	AfterCommit(ctx context.Context, batch []*Pending) error
}

// inboxWriter is a Policy whose InTx writes the recipients' inbox rows
// (strict). For it the batcher claims each batch's uids across its
// committers (claims.go) and calls prepare before each attempt's
// transaction begins.
type inboxWriter interface {
	Policy
	// prepare starts what the attempt of batch needs before its
	// transaction begins; wait, when not nil, is called before the
	// attempt returns (so nothing prepare started outlives it).
	prepare(ctx context.Context, batch []*Pending) (wait func())
}

// Strict is the seed-000 policy: msg_content and every recipient's
// offline_msg row (the sender's own inbox included) committed before ACK.
type Strict struct {
	w       *inbox.Writer
	defects defect.Set // conv-seq-out-of-order lives in InTx
	// pause counts the batches left that write with the locking read
	// (inbox.Writer.WriteFreshTx) instead of the guarded raise, after a
	// guard missed (Config.FenceGuardPause, guardPause).
	pause      atomic.Int64
	guardPause int64
}

// NewStrict returns the strict policy writing through w.
func NewStrict(w *inbox.Writer) (*Strict, error) {
	if w == nil {
		return nil, errors.New("send: strict policy needs an inbox writer")
	}
	return &Strict{w: w, guardPause: int64(DefaultConfig().FenceGuardPause)}, nil
}

// Name implements Policy.
func (*Strict) Name() string { return "strict" }

// StoresContent implements Policy.
func (*Strict) StoresContent() bool { return true }

// InTx implements Policy: one fenced inbox write for the whole batch, by
// the guarded raise (inbox.Writer.WriteFreshGuardedTx) unless a guard
// missed within the last Config.FenceGuardPause batches. A miss fails the attempt
// with inbox.ErrFenceMoved: the batcher rolls it back and runs it again,
// then with the locking read.
func (p *Strict) InTx(ctx context.Context, tx *sql.Tx, batch []*Pending) (_ []model.InboxEntry, err error) {
	items := InboxItems(batch)
	if p.defects.Has(defect.ConvSeqOrder) {
		// Defect: the batch's rows go to the writer newest first, so one
		// conversation's messages get per-user seqs against conv_seq.
		slices.Reverse(items)
	}
	t := batch[0].tk
	// A batch ordered behind others (claims) writes its fence after theirs;
	// batches ordered behind it wait for this one's.
	t.awaitFenced(ctx)
	defer t.doneFencing()
	if held := batch[0].held; held != nil {
		// This batch's guard missed: the same items, the same proposals.
		batch[0].held = nil
		return p.w.WriteFreshProposedTx(ctx, tx, items, held)
	}
	var pre *inbox.Proposals
	if f := batch[0].pre; f != nil {
		for _, m := range batch {
			m.pre = nil
		}
		if pre, err = f.wait(); err != nil {
			return nil, err
		}
	}
	if pre == nil && p.pause.Load() > 0 && p.pause.Add(-1) >= 0 {
		return p.w.WriteFreshTx(ctx, tx, items)
	}
	entries, err := p.w.WriteFreshGuardedTx(ctx, tx, items, pre)
	if fm := (*inbox.FenceMovedError)(nil); errors.As(err, &fm) {
		p.pause.Store(p.guardPause)
		batch[0].held = fm.Proposals
	}
	return entries, err
}

// AfterCommit implements Policy (nothing to do).
func (*Strict) AfterCommit(context.Context, []*Pending) error { return nil }

// prepare implements inboxWriter: the batch's seq proposals are taken by
// a goroutine of their own while the transaction begins (prefetch); wait
// ends it (proposals InTx did not take stay on the batch for its next
// attempt). A batch that starts none is done proposing at once, so batches
// ordered behind it do not wait.
func (p *Strict) prepare(ctx context.Context, batch []*Pending) (wait func()) {
	f := p.prefetch(ctx, batch)
	if f == nil {
		batch[0].tk.doneProposing() // nothing to order behind
		return nil
	}
	return func() { _, _ = f.wait() }
}

// InboxItems lists one inbox item per (message, recipient), messages in
// batch order (conv_seq order within a conversation).
func InboxItems(batch []*Pending) []inbox.Item {
	n := 0
	for _, p := range batch {
		n += len(p.Recipients)
	}
	items := make([]inbox.Item, 0, n)
	for _, p := range batch {
		m := p.Msg
		for _, uid := range p.Recipients {
			items = append(items, inbox.Item{
				UID: uid, MsgID: m.MsgID, ConvID: m.ConvID, ConvType: m.ConvType, ConvSeq: m.ConvSeq,
				SenderUID: m.SenderUID, CreatedAt: m.CreatedAt, Content: m.Content,
			})
		}
	}
	return items
}

// prefetch is one batch's seq proposals taken by a goroutine of their own
// (Strict.prefetch) while the batch's transaction begins and writes its
// first statements. The attempt that started it waits for it before it
// returns, so it never outlives its batch.
type prefetch struct {
	done chan struct{}
	pr   *inbox.Proposals
	err  error
}

// wait blocks until the proposals are taken.
func (f *prefetch) wait() (*inbox.Proposals, error) {
	<-f.done
	return f.pr, f.err
}

// prefetch starts taking the proposals for batch (each recipient's count
// of messages, which is what InTx's items come to; a batch that shrinks on
// the way uses the first of them, inbox.Writer.WriteFreshGuardedTx). Nothing is
// started for a batch that carries proposals from a missed guard, or while
// the locking read is in use, or for one that has its proposals from an
// earlier attempt (kept when that attempt failed before InTx).
func (p *Strict) prefetch(ctx context.Context, batch []*Pending) *prefetch {
	if batch[0].held != nil || batch[0].pre != nil || p.pause.Load() > 0 {
		return nil
	}
	want := make(map[uint64]int, 2*len(batch))
	for _, m := range batch {
		for _, u := range m.Recipients {
			want[u]++
		}
	}
	f := &prefetch{done: make(chan struct{})}
	t := batch[0].tk
	go func() {
		defer close(f.done)
		// Behind the batches in flight it shares uids with (claims).
		t.awaitProposed(ctx)
		f.pr, f.err = p.w.Propose(ctx, want)
		t.doneProposing()
	}()
	for _, m := range batch {
		m.pre = f
	}
	return f
}
