package witness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"imlab/ledger"
	"imlab/loadgen/summary"
)

// ConvBook is every conversation an ACK named: its type, a party or member
// who may read it, and the highest conv_seq ACKed. Safe for concurrent use.
type ConvBook struct {
	mu    sync.Mutex
	convs map[uint64]*convEntry
}

type convEntry struct {
	typ    uint8
	reader uint64 // a party (1:1) or member (group) of the conversation
	maxSeq uint64
}

// NewConvBook is an empty book.
func NewConvBook() *ConvBook { return &ConvBook{convs: map[uint64]*convEntry{}} }

// Acked records an ACK of a send by uid.
func (b *ConvBook) Acked(uid uint64, typ uint8, convID, convSeq uint64) {
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
func (b *ConvBook) snapshot() map[uint64]convEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[uint64]convEntry, len(b.convs))
	for id, e := range b.convs {
		out[id] = *e
	}
	return out
}

// convWitness is a driver that reads its target's conversations whole
// through the target's protocol at the end of a run, into the history
// witness records (slots, heads, delete ranges, the history-witness
// notes).
type convWitness interface {
	WriteConvWitness(ctx context.Context, sh *ledger.Shard, now func() time.Duration) (read, failed int, err error)
}

// ConvLog is the evidence of a target without an inbox: the inbox
// witnesses are not made (with the reason), the conversations are read
// whole by the driver (when it can).
func (w *Witness) ConvLog(ctx context.Context, sum *summary.Summary) {
	why := fmt.Sprintf("the target (driver %s) keeps no per-user inbox", w.env.Drv.Name())
	w.Note(ledger.Note{Check: "pull-witness", Reason: why})
	w.Note(ledger.Note{Check: "store-witness", Reason: why})
	sum.Evidence.StoreWitness = summary.StoreSum{Reason: why}
	cw, ok := w.env.Drv.(convWitness)
	if !ok {
		w.Note(ledger.Note{Check: "history-witness", Reason: fmt.Sprintf("the %s driver reads no conversation log", w.env.Drv.Name())})
		return
	}
	read, failed, err := cw.WriteConvWitness(ctx, w.env.Ledger.Shard(0), func() time.Duration { return time.Since(w.env.Start) })
	if err != nil {
		w.env.Fail("history witness: %v", err)
	}
	if failed > 0 {
		w.env.Fail("history witness: %d conversations could not be read (%d read)", failed, read)
	}
}
