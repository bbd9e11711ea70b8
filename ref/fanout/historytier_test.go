package fanout

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/ref/history"
	"imlab/ref/model"
)

// newFerretHistory returns a history store on a fresh database of an
// embedded FerretDB started for this test.
func newFerretHistory(t *testing.T) *history.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := history.New(ctx, testenv.NewFerretDB(t), history.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stallingHistory is a history store that can be stalled: while stalled,
// WriteBatch blocks until it is released or its context ends (then it
// fails), as a history store that stopped answering does.
type stallingHistory struct {
	inner   *history.Store
	mu      sync.Mutex
	gate    chan struct{} // closed: writes go through
	blocked atomic.Int64  // WriteBatch calls that waited
	failed  atomic.Int64  // of them, those that failed
	calls   atomic.Int64
	lastErr error // of the store itself
	written map[uint64][]uint64
}

func (h *stallingHistory) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastErr
}

func (h *stallingHistory) stall() {
	h.mu.Lock()
	h.gate = make(chan struct{})
	h.mu.Unlock()
}

func (h *stallingHistory) release() {
	h.mu.Lock()
	close(h.gate)
	h.mu.Unlock()
}

func (h *stallingHistory) WriteBatch(ctx context.Context, msgs []model.Message) error {
	h.calls.Add(1)
	h.mu.Lock()
	g := h.gate
	h.mu.Unlock()
	select {
	case <-g:
	default:
		h.blocked.Add(1)
		select {
		case <-g:
		case <-ctx.Done():
			h.failed.Add(1)
			return ctx.Err()
		}
	}
	err := h.inner.WriteBatch(ctx, msgs)
	h.mu.Lock()
	if err != nil {
		h.lastErr = err
	} else {
		if h.written == nil {
			h.written = map[uint64][]uint64{}
		}
		for _, m := range msgs {
			h.written[m.ConvID] = append(h.written[m.ConvID], m.ConvSeq)
		}
	}
	h.mu.Unlock()
	return err
}

// TestHistoryTierStalledDoesNotHoldInbox runs the consumer role of a
// Runtime (inbox tier and history tier, each its own consumer group) with
// the history store stalled: every inbox row arrives while no history
// write completes, the lag monitor shows the history group behind (age and
// records) and the inbox group caught up; once the store answers again the
// history tier catches up (every message readable from history), its lag
// goes to 0 and nothing was dead-lettered.
func TestHistoryTierStalledDoesNotHoldInbox(t *testing.T) {
	f := newFixture(t)
	hs := &stallingHistory{inner: newFerretHistory(t), gate: make(chan struct{})}
	close(hs.gate)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cfg := DefaultConfig()
	cfg.Topics = f.tp
	cfg.Consumer.Group = testenv.RandomName("inbox_")
	cfg.HistoryGroup = testenv.RandomName("hist_")
	cfg.Consumer.SessionTimeout = 6 * time.Second
	cfg.Consumer.BackoffBase, cfg.Consumer.BackoffMax = 5*time.Millisecond, 50*time.Millisecond
	cfg.Monitor.Interval = 200 * time.Millisecond
	deps := f.runtimeDeps()
	deps.History = hs
	rt, err := NewRuntime(ctx, cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	mon, err := rt.NewMonitor(true)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()

	f.groups[77] = []uint64{1, 2, 3, 4, 5}
	convs := []uint64{77}
	for u := uint64(1); u <= 4; u++ {
		c, _ := model.SingleConvID(u, u+100)
		convs = append(convs, c)
	}
	hs.stall()
	stallStart := time.Now()
	rctx, rcancel := context.WithCancel(ctx)
	rdone := make(chan error, 1)
	go func() { rdone <- rt.RunConsumer(rctx) }()
	defer func() {
		rcancel()
		if err := <-rdone; err != nil {
			t.Errorf("consumer role: %v", err)
		}
	}()

	msgs := f.storeAndPublish(t, ctx, convs, 40, 5000) // 200 messages, 520 inbox rows
	wantRows := 40 * (5 + 4*2)
	waitFor(t, 20*time.Second, "inbox rows while history is stalled", func() bool {
		return countRows(t, f.my.DB, "SELECT COUNT(*) FROM offline_msg") == wantRows
	})
	inboxTook := time.Since(stallStart)
	if hs.blocked.Load() == 0 {
		t.Fatal("the history tier never tried to write while stalled")
	}
	var snap LagSnapshot
	waitFor(t, 10*time.Second, "lag figures", func() bool {
		snap, err = mon.Poll(ctx)
		return err == nil && snap.Records[cfg.Consumer.Group] == 0 && snap.Records[cfg.HistoryGroup] > 0
	})
	if snap.MaxAgeSeconds[cfg.HistoryGroup] <= 0 || snap.MaxAgeSeconds[cfg.Consumer.Group] != 0 {
		t.Fatalf("lag while history is stalled: %+v", snap)
	}
	t.Logf("history stalled: all %d inbox rows in %s; lag inbox %d records / %.2fs, history %d records / %.2fs; %d history writes blocked",
		wantRows, inboxTook.Round(time.Millisecond), snap.Records[cfg.Consumer.Group], snap.MaxAgeSeconds[cfg.Consumer.Group],
		snap.Records[cfg.HistoryGroup], snap.MaxAgeSeconds[cfg.HistoryGroup], hs.blocked.Load())

	time.Sleep(time.Second) // the history lag keeps growing; the inbox is done
	hs.release()
	var lastProblem string
	defer func() {
		if t.Failed() {
			sn, _ := mon.Poll(context.Background())
			t.Logf("history: %s; lag %+v", lastProblem, sn)
		}
	}()
	waitFor(t, 30*time.Second, "history caught up", func() bool {
		for _, cv := range convs {
			var seqs []uint64
			for s := uint64(1); s <= 40; s++ {
				seqs = append(seqs, s)
			}
			rr, err := hs.inner.ReadSlots(ctx, cv, seqs)
			if err != nil {
				lastProblem = fmt.Sprintf("conv %d: %v", cv, err)
				return false
			}
			var miss []uint64
			for _, s := range seqs {
				if rr.Slots[s].State != history.SlotFilled {
					miss = append(miss, s)
				}
			}
			if len(miss) > 0 {
				hs.mu.Lock()
				w := fmt.Sprint(hs.written[cv])
				hs.mu.Unlock()
				lastProblem = w + fmt.Sprintf(" conv %d seqs %v not in history (failed writes %d, calls %d, last store error %v)", cv, miss, hs.failed.Load(), hs.calls.Load(), hs.err())
				return false
			}
		}
		return true
	})
	for _, m := range []model.Message{msgs[0], msgs[len(msgs)/2], msgs[len(msgs)-1]} {
		got, ok, err := hs.inner.FindMessage(ctx, m.ConvID, m.MsgID)
		if err != nil || !ok || got.Content != m.Content || got.ConvSeq != m.ConvSeq {
			t.Fatalf("history after catching up: msg %d: %+v %v %v", m.MsgID, got, ok, err)
		}
	}
	waitFor(t, 10*time.Second, "history lag back to 0", func() bool {
		snap, err = mon.Poll(ctx)
		return err == nil && snap.Records[cfg.HistoryGroup] == 0
	})
	if snap.DLQRecords != 0 || snap.MaxAgeSeconds[cfg.HistoryGroup] != 0 {
		t.Fatalf("after catching up: %+v", snap)
	}
}
