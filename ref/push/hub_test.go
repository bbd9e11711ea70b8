package push_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"imlab/internal/testenv"
	"imlab/ref/model"
	"imlab/ref/push"
)

func ent(uid, seq, prev uint64) model.InboxEntry {
	return model.InboxEntry{UID: uid, Seq: seq, PrevSeq: prev, MsgID: 1000 + seq, ConvID: 5, ConvType: model.ConvSingle,
		ConvSeq: seq, SenderUID: 2, CreatedAt: time.UnixMilli(1700000000123).UTC(), Content: "hi"}
}

func chain(uid, from, to uint64) []model.InboxEntry {
	var out []model.InboxEntry
	for s := from; s <= to; s++ {
		out = append(out, ent(uid, s, s-1))
	}
	return out
}

func newHub(t *testing.T, mut func(*push.Config)) (*push.Hub, *prometheus.Registry) {
	t.Helper()
	cfg := push.DefaultConfig()
	if mut != nil {
		mut(&cfg)
	}
	reg := prometheus.NewRegistry()
	h, err := push.New(cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h, reg
}

func decode(t *testing.T, b []byte) push.Item {
	t.Helper()
	var it push.Item
	if err := json.Unmarshal(b, &it); err != nil {
		t.Fatalf("frame %s: %v", b, err)
	}
	return it
}

// recv reads n frames (or fails after a timeout) and returns their seqs.
func recv(t *testing.T, s *push.Subscription, n int) []push.Item {
	t.Helper()
	var out []push.Item
	deadline := time.After(5 * time.Second)
	for len(out) < n {
		select {
		case b, ok := <-s.C:
			if !ok {
				t.Fatalf("subscription closed (%s) after %d of %d frames", s.Reason(), len(out), n)
			}
			out = append(out, decode(t, b))
		case <-deadline:
			t.Fatalf("got %d of %d frames", len(out), n)
		}
	}
	return out
}

func seqsOf(items []push.Item) []uint64 {
	out := make([]uint64, len(items))
	for i, it := range items {
		out[i] = it.Seq
	}
	return out
}

func TestFrameShape(t *testing.T) {
	e := ent(7, 12, 10)
	e.Content = "a\"b\\c\n\x01<>&\u2028é😀"
	b := push.EncodeEntry(e)
	if !json.Valid(b) {
		t.Fatalf("invalid JSON %s", b)
	}
	it := decode(t, b)
	want := push.Item{Type: "msg", Seq: 12, PrevSeq: 10, MsgID: 1012, MsgIDStr: "1012", ConvID: 5, ConvIDStr: "5", ConvType: 1,
		ConvSeq: 12, SenderUID: 2, CreatedAt: 1700000000123, Content: e.Content}
	if it != want {
		t.Fatalf("got %+v\nwant %+v", it, want)
	}
	// A pull item is the same object without type and prev_seq.
	var m map[string]any
	if err := json.Unmarshal(push.AppendItem(nil, e), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"seq", "msg_id", "msg_id_str", "conv_id", "conv_id_str", "conv_type", "conv_seq", "sender_uid", "created_at", "content"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("item lacks %q: %v", k, m)
		}
	}
	if len(m) != 10 {
		t.Fatalf("item has extra fields: %v", m)
	}
	// Invalid UTF-8 becomes U+FFFD; missing bodies are marked.
	e.Content = "x\xffy"
	e.Missing = true
	it = decode(t, push.AppendItem(nil, e))
	if it.Content != "x\ufffdy" || !it.Missing {
		t.Fatalf("got %+v", it)
	}
	// Large ids keep their precision (1:1 conv ids use bit 63), in the
	// number and in its string twin.
	e.ConvID = 1<<63 | 3<<31 | 4
	e.MsgID = 1<<53 + 1
	it = decode(t, push.AppendItem(nil, e))
	if it.ConvID != e.ConvID || it.ConvIDStr != strconv.FormatUint(e.ConvID, 10) ||
		it.MsgID != e.MsgID || it.MsgIDStr != strconv.FormatUint(e.MsgID, 10) {
		t.Fatalf("got %+v for msg_id %d conv_id %d", it, e.MsgID, e.ConvID)
	}
}

// TestAppendIDTwin: an id above 2^53 survives exactly as the string twin,
// while a parse of the number as an IEEE double (JavaScript's JSON.parse)
// rounds it to another id.
func TestAppendIDTwin(t *testing.T) {
	for _, id := range []uint64{0, 7, 1<<53 - 1, 1<<53 + 1, 1<<63 | 3<<31 | 4, math.MaxUint64} {
		b := append(push.AppendID([]byte{'{'}, "msg_id", id), '}')
		var exact struct {
			MsgID    uint64 `json:"msg_id"`
			MsgIDStr string `json:"msg_id_str"`
		}
		if err := json.Unmarshal(b, &exact); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if exact.MsgID != id || exact.MsgIDStr != strconv.FormatUint(id, 10) {
			t.Fatalf("%s: %+v, want %d", b, exact, id)
		}
		var js struct {
			MsgID float64 `json:"msg_id"`
		}
		if err := json.Unmarshal(b, &js); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		// What a double-only client keeps of the number: exact up to 2^53.
		lossy := strconv.FormatFloat(js.MsgID, 'f', -1, 64)
		if (lossy == exact.MsgIDStr) != (id <= 1<<53) {
			t.Fatalf("%d: the double reads %s, the string %s", id, lossy, exact.MsgIDStr)
		}
	}
	// The twin is written into dst's spare room: no allocation.
	buf := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() { _ = push.AppendID(buf, "conv_id", math.MaxUint64) }); n != 0 {
		t.Fatalf("AppendID: %v allocs", n)
	}
}

// TestFrameFitsItsBuffer: the longest frame (every number at its widest)
// is written into the buffer EncodeEntry makes, without growing it.
func TestFrameFitsItsBuffer(t *testing.T) {
	e := model.InboxEntry{Seq: math.MaxUint64, PrevSeq: math.MaxUint64, MsgID: math.MaxUint64, ConvID: math.MaxUint64,
		ConvType: math.MaxUint8, ConvSeq: math.MaxUint64, SenderUID: math.MaxUint64, CreatedAt: time.UnixMilli(math.MinInt64), Missing: true}
	for _, content := range []string{"", "hi"} {
		e.Content = content
		if n := testing.AllocsPerRun(10, func() { _ = push.EncodeEntry(e) }); n != 1 {
			t.Fatalf("EncodeEntry of %q: %v allocs, want 1 (its buffer)", content, n)
		}
		if b := push.EncodeEntry(e); !json.Valid(b) {
			t.Fatalf("invalid JSON %s", b)
		}
	}
}

func TestOrderAcrossOutOfOrderBatches(t *testing.T) {
	ctx := context.Background()
	h, _ := newHub(t, func(c *push.Config) { c.ReorderWindow = 5 * time.Second })
	s, err := h.Subscribe(1, "phone")
	if err != nil {
		t.Fatal(err)
	}
	h.Committed(ctx, chain(1, 1, 1))
	// batch C, then B, then A: each waits for its predecessor
	h.Committed(ctx, chain(1, 8, 9))
	h.Committed(ctx, chain(1, 5, 7))
	if got := len(s.C); got != 1 {
		t.Fatalf("%d frames queued before the chain closed, want 1", got)
	}
	h.Committed(ctx, chain(1, 2, 4))
	items := recv(t, s, 9)
	for i, it := range items {
		if it.Seq != uint64(i+1) || it.PrevSeq != uint64(i) {
			t.Fatalf("frame %d: seq %d prev %d", i, it.Seq, it.PrevSeq)
		}
	}
	if s.MaxPushed() != 9 {
		t.Fatalf("MaxPushed %d", s.MaxPushed())
	}
}

func TestWindowFlushesGapInOrder(t *testing.T) {
	ctx := context.Background()
	h, reg := newHub(t, func(c *push.Config) { c.ReorderWindow = 30 * time.Millisecond })
	s, _ := h.Subscribe(2, "d")
	h.Committed(ctx, chain(2, 1, 2))
	// 3..4 never arrive in time; 7 arrives before 5..6
	h.Committed(ctx, []model.InboxEntry{ent(2, 7, 6)})
	h.Committed(ctx, chain(2, 5, 6)[:2])
	start := time.Now()
	items := recv(t, s, 5)
	if got := seqsOf(items); !equal(got, []uint64{1, 2, 5, 6, 7}) {
		t.Fatalf("order %v", got)
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Fatal("gap flushed before the window")
	}
	if items[2].PrevSeq != 4 {
		t.Fatalf("flushed frame lost its prev_seq: %+v", items[2])
	}
	// The late batch is dropped, counted, and later entries flow.
	h.Committed(ctx, chain(2, 3, 4))
	h.Committed(ctx, chain(2, 8, 8))
	if it := recv(t, s, 1); it[0].Seq != 8 {
		t.Fatalf("got %d", it[0].Seq)
	}
	if v := testenv.Metric(t, reg, "imlab_ws_dropped_total", map[string]string{"reason": push.DropLateFrame}); v != 2 {
		t.Fatalf("late frames counted %v, want 2", v)
	}
}

func TestReorderBufferIsBounded(t *testing.T) {
	ctx := context.Background()
	h, _ := newHub(t, func(c *push.Config) { c.ReorderWindow = 10 * time.Second; c.ReorderMax = 4 })
	s, _ := h.Subscribe(3, "d")
	h.Committed(ctx, chain(3, 1, 1))
	for seq := uint64(10); seq < 15; seq++ { // 5 out-of-chain entries: the 5th overflows
		h.Committed(ctx, []model.InboxEntry{ent(3, seq, seq-1)})
	}
	if got := seqsOf(recv(t, s, 6)); !equal(got, []uint64{1, 10, 11, 12, 13, 14}) {
		t.Fatalf("order %v", got)
	}
}

func TestSlowConsumerIsClosedOthersContinue(t *testing.T) {
	ctx := context.Background()
	h, reg := newHub(t, func(c *push.Config) { c.QueueSize = 4 })
	slow, _ := h.Subscribe(4, "tablet")
	fast, _ := h.Subscribe(4, "phone")
	done := make(chan []push.Item)
	go func() {
		var got []push.Item
		for b := range fast.C {
			var it push.Item
			_ = json.Unmarshal(b, &it)
			got = append(got, it)
			if len(got) == 10 {
				break
			}
		}
		done <- got
	}()
	for seq := uint64(1); seq <= 10; seq++ {
		h.Committed(ctx, []model.InboxEntry{ent(4, seq, seq-1)})
		time.Sleep(2 * time.Millisecond) // let the fast reader keep up
	}
	select {
	case <-slow.Done:
	case <-time.After(5 * time.Second):
		t.Fatal("slow subscription not closed")
	}
	if slow.Reason() != push.ReasonSlowConsumer {
		t.Fatalf("reason %q", slow.Reason())
	}
	n := 0
	for range slow.C { // what was queued stays readable, then C is closed
		n++
	}
	if n != 4 {
		t.Fatalf("slow sub kept %d frames, want its queue of 4", n)
	}
	got := <-done
	if s := seqsOf(got); len(s) != 10 || s[0] != 1 || s[9] != 10 {
		t.Fatalf("fast sub got %v", s)
	}
	if v := testenv.Metric(t, reg, "imlab_ws_dropped_total", map[string]string{"reason": push.ReasonSlowConsumer}); v != 1 {
		t.Fatalf("slow_consumer drops %v", v)
	}
	if v := testenv.Metric(t, reg, "imlab_ws_connections", nil); v != 1 {
		t.Fatalf("connections %v, want 1", v)
	}
}

func TestReplaceCloseAndShutdown(t *testing.T) {
	h, reg := newHub(t, nil)
	a, _ := h.Subscribe(5, "d")
	b, _ := h.Subscribe(5, "d")
	<-a.Done
	if a.Reason() != push.ReasonReplaced || b.Reason() != "" {
		t.Fatalf("reasons %q %q", a.Reason(), b.Reason())
	}
	b.Close()
	b.Close()
	if b.Reason() != push.ReasonClosed {
		t.Fatalf("reason %q", b.Reason())
	}
	c, _ := h.Subscribe(5, "e")
	if v := testenv.Metric(t, reg, "imlab_ws_connections", nil); v != 1 {
		t.Fatalf("connections %v", v)
	}
	h.Close()
	<-c.Done
	if c.Reason() != push.ReasonShutdown {
		t.Fatalf("reason %q", c.Reason())
	}
	if _, err := h.Subscribe(5, "f"); !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("subscribe after close: %v", err)
	}
	h.Committed(context.Background(), chain(5, 1, 3)) // no panic, no effect
	if _, err := h.Subscribe(0, "x"); !errors.Is(err, model.ErrInvalid) {
		t.Fatal(err)
	}
}

// TestConcurrentOrdering: many committers per uid whose hooks race; every
// subscription must see strictly increasing seqs, and with a generous window
// every seq.
func TestConcurrentOrdering(t *testing.T) {
	ctx := context.Background()
	h, _ := newHub(t, func(c *push.Config) { c.QueueSize = 4096; c.ReorderWindow = 2 * time.Second })
	const users, perUser = 8, 300
	subs := make([]*push.Subscription, users)
	for u := range users {
		s, err := h.Subscribe(uint64(u+1), "d")
		if err != nil {
			t.Fatal(err)
		}
		subs[u] = s
	}
	// establish each chain with seq 1, then race the rest
	for u := range users {
		h.Committed(ctx, chain(uint64(u+1), 1, 1))
	}
	var wg sync.WaitGroup
	for u := range users {
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(u), uint64(w)))
				// worker w owns batches w, w+3, ...: seqs 2+10k .. 11+10k
				for k := w; k*10+2 <= perUser; k += 3 {
					from := uint64(k*10 + 2)
					if rng.IntN(2) == 0 {
						time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
					}
					h.Committed(ctx, chain(uint64(u+1), from, from+9))
				}
			}()
		}
	}
	wg.Wait()
	for u, s := range subs {
		items := recv(t, s, perUser+1)
		for i, it := range items {
			if it.Seq != uint64(i+1) {
				t.Fatalf("uid %d frame %d has seq %d", u+1, i, it.Seq)
			}
		}
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSubscribeCloseRaceCommitted: subscriptions come and go while entries
// flow; nothing blocks, panics or races, and every open subscription sees
// increasing seqs.
func TestSubscribeCloseRaceCommitted(t *testing.T) {
	ctx := context.Background()
	h, reg := newHub(t, func(c *push.Config) { c.QueueSize = 8; c.ReorderWindow = time.Millisecond; c.MaxConnsPerDevice = 2 })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq := uint64(0)
			for {
				select {
				case <-stop:
					return
				default:
				}
				uid := uint64(1 + w)
				h.Committed(ctx, chain(uid, seq+1, seq+3))
				seq += 3
			}
		}()
	}
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				s, err := h.Subscribe(uint64(1+g%2), []string{"a", "b", "c"}[i%3])
				if err != nil {
					t.Error(err)
					return
				}
				var last uint64
				for k := 0; k < 3; k++ {
					select {
					case b, ok := <-s.C:
						if !ok {
							k = 3
							break
						}
						var it push.Item
						if err := json.Unmarshal(b, &it); err != nil || it.Seq <= last {
							t.Errorf("seq %d after %d (%v)", it.Seq, last, err)
							return
						}
						last = it.Seq
					case <-time.After(2 * time.Millisecond):
					}
				}
				s.Close()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	h.Close()
	if v := testenv.Metric(t, reg, "imlab_ws_connections", nil); v != 0 {
		t.Fatalf("connections %v after close", v)
	}
}
