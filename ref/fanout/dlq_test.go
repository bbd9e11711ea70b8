package fanout

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/ref/defect"
	"imlab/ref/model"
)

// publishConv publishes msgs first+1..first+n of conversation conv, one
// partition (their shard key), in one produce.
func publishConv(t *testing.T, ctx context.Context, p *Producer, tp Topics, conv, first uint64, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := uint64(1); i <= uint64(n); i++ {
		recs = append(recs, eventRecord(t, tp.Fanout, Event{MsgID: first + i, ConvID: conv, ConvSeq: i, SenderUID: 1, SentAt: time.Now()}))
	}
	if err := p.PublishSync(ctx, recs); err != nil {
		t.Fatal(err)
	}
}

// TestDeadLetterHeadersAndRead: a delivery given up after the transient
// window carries its class, how long it was retried and the window in
// force; ReadDeadLetters reads the topic back with them. A delivery that
// failed for less than the window is not dead-lettered, unless the shipped
// defect dlq-before-transient-window ignores the window: then it is, with
// a retried time below the window (what the lab's check reads).
func TestDeadLetterHeadersAndRead(t *testing.T) {
	for _, withDefect := range []bool{false, true} {
		t.Run(fmt.Sprint("defect=", withDefect), func(t *testing.T) {
			brokers, tp, p := newKafka(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if dl, err := ReadDeadLetters(ctx, brokers, tp.DLQ); err != nil || dl.Records != 0 || len(dl.Letters) != 0 {
				t.Fatalf("empty dead-letter topic read as %+v, %v", dl, err)
			}
			publishConv(t, ctx, p, tp, 44, 300, 10)
			cfg := testConsumerConfig(brokers, tp)
			cfg.TransientWindow = time.Second
			cfg.BackoffMax = 5 * time.Millisecond
			if withDefect {
				cfg.Defects, _ = defect.Parse(defect.DLQBeforeTransientWindow)
			}
			const outage = 300 * time.Millisecond
			s := &seen{convSeq: map[uint64][]uint64{}, calls: map[uint64]int{}}
			var first303 time.Time
			stop := runConsumer(t, cfg, s.handler(func(e Event) error {
				switch e.MsgID {
				case 303:
					if first303.IsZero() {
						first303 = time.Now()
					}
					if time.Since(first303) < outage {
						return fmt.Errorf("%w: store away", model.ErrUnavailable)
					}
				case 307:
					return fmt.Errorf("%w: store away for good", model.ErrUnavailable)
				}
				return nil
			}), p)
			defer stop()
			want := 1
			if withDefect {
				want = 2
			}
			readAll(t, ctx, brokers, tp.DLQ, want)
			read, err := ReadDeadLetters(ctx, brokers, tp.DLQ)
			if err != nil {
				t.Fatal(err)
			}
			if read.Records != int64(want) || len(read.Letters) != want || read.Truncated {
				t.Fatalf("read %d records, %d letters (truncated %v); want %d", read.Records, len(read.Letters), read.Truncated, want)
			}
			byMsg := map[uint64]DeadLetter{}
			for _, dl := range read.Letters {
				if !dl.Decoded || dl.Group != cfg.Group || dl.Class != DLQClassTransient || dl.WindowMS != 1000 ||
					dl.SourceTopic != tp.Fanout || dl.SourceOffset < 0 || dl.Attempts < cfg.MaxAttempts || dl.Reason == "" {
					t.Fatalf("dead letter %+v: want a decoded transient letter of group %s, window 1000 ms, its source and reason", dl, cfg.Group)
				}
				byMsg[dl.Event.MsgID] = dl
			}
			if dl, ok := byMsg[307]; !ok || dl.RetriedMS < 1000 {
				if !withDefect {
					t.Fatalf("msg 307: %+v; want dead-lettered after at least the 1000 ms window", dl)
				}
			}
			dl, ok := byMsg[303]
			switch {
			case withDefect && (!ok || dl.RetriedMS >= 1000):
				t.Fatalf("with the defect msg 303 should be dead-lettered before the window: %+v (found %v)", dl, ok)
			case !withDefect && ok:
				t.Fatalf("msg 303 failed %s, less than the window, and was dead-lettered: %+v", outage, dl)
			}
		})
	}
}

// TestDeadLetterKeepsBatchRest: when a failed batch is retried one by
// one, a delivery that is dead-lettered does not take the rest of its
// batch with it: every other record is handled. The shipped defect
// dlq-abandons-batch marks the rest done unhandled and not dead-lettered.
func TestDeadLetterKeepsBatchRest(t *testing.T) {
	for _, withDefect := range []bool{false, true} {
		t.Run(fmt.Sprint("defect=", withDefect), func(t *testing.T) {
			brokers, tp, p := newKafka(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const conv, n = 45, 10
			publishConv(t, ctx, p, tp, conv, 400, n)
			cfg := testConsumerConfig(brokers, tp)
			if withDefect {
				cfg.Defects, _ = defect.Parse(defect.DLQAbandonsBatch)
			}
			s := &seen{convSeq: map[uint64][]uint64{}, calls: map[uint64]int{}}
			stop := runConsumer(t, cfg, s.handler(func(e Event) error {
				if e.MsgID == 403 {
					return Permanent(fmt.Errorf("bad record"))
				}
				return nil
			}), p)
			defer stop()
			if dl := readAll(t, ctx, brokers, tp.DLQ, 1); len(dl) != 1 {
				t.Fatalf("%d dead letters; want msg 403 only", len(dl))
			}
			if !withDefect {
				waitFor(t, 30*time.Second, "every other record handled", func() bool {
					s.mu.Lock()
					defer s.mu.Unlock()
					return len(s.convSeq[conv]) == n-1
				})
				return
			}
			time.Sleep(time.Second)
			s.mu.Lock()
			got := len(s.convSeq[conv])
			s.mu.Unlock()
			if got >= n-1 {
				t.Fatalf("with the defect %d of %d records were handled; want the batch's rest given up", got, n-1)
			}
			if dl, err := ReadDeadLetters(ctx, brokers, tp.DLQ); err != nil || dl.Records != 1 {
				t.Fatalf("dead letters %+v, %v; want msg 403 only: the rest is neither handled nor dead-lettered", dl, err)
			}
		})
	}
}
