package fanout

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/internal/testenv"
	"imlab/ref/model"
)

func testProducer(t testing.TB, brokers []string) *Producer {
	t.Helper()
	cfg := DefaultProducerConfig()
	cfg.Brokers = brokers
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func eventRecord(t testing.TB, topic string, ev Event) *kgo.Record {
	t.Helper()
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: topic, Key: ShardKey(ev.ConvID), Value: b, Timestamp: ev.SentAt}
}

func testConsumerConfig(brokers []string, tp Topics) ConsumerConfig {
	cfg := DefaultConsumerConfig()
	cfg.Brokers = brokers
	cfg.Topic = tp.Fanout
	cfg.DLQTopic = tp.DLQ
	cfg.Group = testenv.RandomName("g_")
	cfg.BackoffBase = 5 * time.Millisecond
	cfg.BackoffMax = 20 * time.Millisecond
	cfg.SessionTimeout = 6 * time.Second
	cfg.TransientWindow = 0 // the tests of MaxAttempts; TestConsumerTransientWindow sets it
	return cfg
}

type seen struct {
	mu      sync.Mutex
	convSeq map[uint64][]uint64 // conv → conv_seqs in handling order
	calls   map[uint64]int      // msg_id → Handle calls that included it
}

func (s *seen) handler(fail func(Event) error) Handler {
	return HandlerFunc(func(ctx context.Context, ds []Delivery) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, d := range ds {
			s.calls[d.Event.MsgID]++
			if fail != nil {
				if err := fail(d.Event); err != nil {
					return err
				}
			}
		}
		for _, d := range ds {
			s.convSeq[d.Event.ConvID] = append(s.convSeq[d.Event.ConvID], d.Event.ConvSeq)
		}
		return nil
	})
}

func runConsumer(t testing.TB, cfg ConsumerConfig, h Handler, dlq *Producer) (stop func()) {
	t.Helper()
	c, err := NewConsumer(cfg, h, dlq, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("consumer: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("consumer did not stop")
		}
	}
}

func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConsumerOrderRetryDLQ: every record is handled; within a conversation
// in conv_seq order; a delivery that always fails goes to the dead-letter
// topic after at most 5 attempts with its reason and does not block its
// partition; a bad payload is dead-lettered at once.
func TestConsumerOrderRetryDLQ(t *testing.T) {
	brokers, tp, p := newKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const convs, perConv = 40, 25
	const poison = uint64(7_000_013)
	var recs []*kgo.Record
	msg := uint64(7_000_000)
	for s := 1; s <= perConv; s++ {
		for cv := 1; cv <= convs; cv++ {
			msg++
			recs = append(recs, eventRecord(t, tp.Fanout, Event{MsgID: msg, ConvID: uint64(cv), ConvSeq: uint64(s),
				SenderUID: 5, SentAt: time.Now()}))
		}
	}
	bad := &kgo.Record{Topic: tp.Fanout, Key: ShardKey(3), Value: []byte("not an event")}
	recs = append(recs, bad)
	if err := p.PublishSync(ctx, recs); err != nil {
		t.Fatal(err)
	}

	s := &seen{convSeq: map[uint64][]uint64{}, calls: map[uint64]int{}}
	errPoison := errors.New("poison")
	cfg := testConsumerConfig(brokers, tp)
	cfg.MaxBatch = 16
	stop := runConsumer(t, cfg, s.handler(func(e Event) error {
		if e.MsgID == poison {
			return errPoison
		}
		return nil
	}), p)
	defer stop()

	waitFor(t, 30*time.Second, "all conversations handled", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := 0
		for _, v := range s.convSeq {
			n += len(v)
		}
		return n >= convs*perConv-1
	})
	s.mu.Lock()
	for cv, seqs := range s.convSeq {
		last := uint64(0)
		for _, q := range seqs {
			if q <= last {
				t.Errorf("conv %d: conv_seq %d handled after %d", cv, q, last)
			}
			last = q
		}
	}
	if n := s.calls[poison]; n < 1 || n > 5 {
		t.Errorf("poison delivery tried %d times, want 1..5", n)
	}
	s.mu.Unlock()

	// The dead-letter topic holds the poison event and the bad payload.
	got := readAll(t, ctx, brokers, tp.DLQ, 2)
	reasons := map[string]string{}
	for _, r := range got {
		var reason, attempts, group string
		for _, h := range r.Headers {
			switch h.Key {
			case HeaderDLQReason:
				reason = string(h.Value)
			case HeaderDLQAttempts:
				attempts = string(h.Value)
			case HeaderDLQGroup:
				group = string(h.Value)
			}
		}
		if group != cfg.Group {
			t.Errorf("dead letter names group %q, want %q", group, cfg.Group)
		}
		if ev, err := UnmarshalEvent(r.Value); err == nil {
			reasons[strconv.FormatUint(ev.MsgID, 10)] = reason + " after " + attempts
			if a, _ := strconv.Atoi(attempts); a < 1 || a > 5 {
				t.Errorf("dead letter attempts %q", attempts)
			}
		} else {
			reasons["bad"] = reason
		}
	}
	if _, ok := reasons[strconv.FormatUint(poison, 10)]; !ok {
		t.Errorf("poison not dead-lettered: %v", reasons)
	}
	if r, ok := reasons["bad"]; !ok || !strings.Contains(r, model.ErrInvalid.Error()) {
		t.Errorf("bad payload not dead-lettered with a reason: %v", reasons)
	}
	t.Logf("dead letters: %v", reasons)
}

func readAll(t testing.TB, ctx context.Context, brokers []string, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records from %s", len(out), want, topic)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// TestConsumerRetryTransient: with RetryTransient a delivery failing with a
// transient error far more often than MaxAttempts is retried until it
// succeeds (its partition waits), in order, never dead-lettered; a
// permanent error is still dead-lettered at once.
func TestConsumerRetryTransient(t *testing.T) {
	brokers, tp, p := newKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conv := uint64(42)
	var recs []*kgo.Record
	for i := uint64(1); i <= 20; i++ {
		recs = append(recs, eventRecord(t, tp.Fanout, Event{MsgID: 100 + i, ConvID: conv, ConvSeq: i, SenderUID: 1, SentAt: time.Now()}))
	}
	if err := p.PublishSync(ctx, recs); err != nil {
		t.Fatal(err)
	}
	cfg := testConsumerConfig(brokers, tp)
	cfg.RetryTransient = true
	cfg.BackoffMax = 5 * time.Millisecond
	const transientFailures = 40 // the delivery of msg 105 fails this often
	s := &seen{convSeq: map[uint64][]uint64{}, calls: map[uint64]int{}}
	failed := 0
	stop := runConsumer(t, cfg, s.handler(func(e Event) error {
		switch {
		case e.MsgID == 105 && failed < transientFailures:
			failed++
			return fmt.Errorf("%w: store away", model.ErrUnavailable)
		case e.MsgID == 110:
			return Permanent(errors.New("bad event"))
		}
		return nil
	}), p)
	defer stop()
	waitFor(t, 30*time.Second, "every delivery handled", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.convSeq[conv]) == 19
	})
	s.mu.Lock()
	got := append([]uint64(nil), s.convSeq[conv]...)
	n105 := s.calls[105]
	s.mu.Unlock()
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("handled out of order: %v", got)
		}
	}
	if n105 <= cfg.MaxAttempts || failed != transientFailures {
		t.Fatalf("msg 105 tried %d times (failed %d), want more than MaxAttempts=%d", n105, failed, cfg.MaxAttempts)
	}
	dl := readAll(t, ctx, brokers, tp.DLQ, 1)
	if ev, err := UnmarshalEvent(dl[0].Value); err != nil || ev.MsgID != 110 || len(dl) != 1 {
		t.Fatalf("dead letters: %d, first %+v %v; want only msg 110", len(dl), ev, err)
	}
}

// TestConsumerTransientWindow: without RetryTransient, a delivery failing
// with a transient error for longer than MaxAttempts' backoff (a short store
// outage) is retried through the TransientWindow and handled in order,
// never dead-lettered; one that keeps failing is dead-lettered once the
// window has passed, so the partition is not held for ever.
func TestConsumerTransientWindow(t *testing.T) {
	brokers, tp, p := newKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conv := uint64(43)
	var recs []*kgo.Record
	for i := uint64(1); i <= 20; i++ {
		recs = append(recs, eventRecord(t, tp.Fanout, Event{MsgID: 200 + i, ConvID: conv, ConvSeq: i, SenderUID: 1, SentAt: time.Now()}))
	}
	if err := p.PublishSync(ctx, recs); err != nil {
		t.Fatal(err)
	}
	cfg := testConsumerConfig(brokers, tp)
	cfg.TransientWindow = time.Second
	cfg.BackoffMax = 5 * time.Millisecond // MaxAttempts alone: done in ~25 ms
	const outage = 300 * time.Millisecond // msg 205's store is away this long
	s := &seen{convSeq: map[uint64][]uint64{}, calls: map[uint64]int{}}
	var first205, first210 time.Time
	var dead210 time.Duration
	stop := runConsumer(t, cfg, s.handler(func(e Event) error {
		switch e.MsgID {
		case 205:
			if first205.IsZero() {
				first205 = time.Now()
			}
			if time.Since(first205) < outage {
				return fmt.Errorf("%w: store away", model.ErrUnavailable)
			}
		case 210:
			if first210.IsZero() {
				first210 = time.Now()
			}
			dead210 = time.Since(first210)
			return fmt.Errorf("%w: store away for good", model.ErrUnavailable)
		}
		return nil
	}), p)
	defer stop()
	dl := readAll(t, ctx, brokers, tp.DLQ, 1)
	waitFor(t, 30*time.Second, "every other delivery handled", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.convSeq[conv]) == 19
	})
	s.mu.Lock()
	got := append([]uint64(nil), s.convSeq[conv]...)
	n205, n210, tried210 := s.calls[205], s.calls[210], dead210
	s.mu.Unlock()
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("handled out of order: %v", got)
		}
	}
	if ev, err := UnmarshalEvent(dl[0].Value); err != nil || ev.MsgID != 210 || len(dl) != 1 {
		t.Fatalf("dead letters: %d, first %+v %v; want only msg 210", len(dl), ev, err)
	}
	if n205 <= cfg.MaxAttempts {
		t.Fatalf("msg 205 tried %d times: a 300 ms outage outlasts MaxAttempts=%d with 5 ms backoff, so it should have been retried through the window", n205, cfg.MaxAttempts)
	}
	if n210 <= cfg.MaxAttempts || tried210 < cfg.TransientWindow/2 {
		t.Fatalf("msg 210 dead-lettered after %d tries over %s; want more than MaxAttempts, over about the %s window", n210, tried210, cfg.TransientWindow)
	}
}
