package fanout

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLagIsAgeOfOldestUnprocessed: with the consumer down, lag per
// partition is the age of the first unprocessed record's sent_at (the
// oldest, not the newest) plus the record count; after the consumer caught
// up both are 0. Dead letters show as the DLQ size.
func TestLagIsAgeOfOldestUnprocessed(t *testing.T) {
	brokers, tp, p := newKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := testConsumerConfig(brokers, tp)

	now := time.Now()
	conv := uint64(42)
	part := int32(PartitionOf(conv, DefaultPartitions))
	var recs []*kgo.Record
	for i := 0; i < 5; i++ { // sent 60s, 50s, ... 20s ago
		recs = append(recs, eventRecord(t, tp.Fanout, Event{MsgID: uint64(100 + i), ConvID: conv, ConvSeq: uint64(i + 1),
			SenderUID: 1, SentAt: now.Add(-time.Duration(60-10*i) * time.Second)}))
	}
	if err := p.PublishSync(ctx, recs); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	mc := DefaultMonitorConfig()
	mc.Brokers, mc.Topic, mc.DLQTopic, mc.Groups = brokers, tp.Fanout, tp.DLQ, []string{cfg.Group}
	mo, err := NewMonitor(mc, nil, m)
	if err != nil {
		t.Fatal(err)
	}
	defer mo.Close()
	s, err := mo.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got *PartitionLag
	for i := range s.Partitions {
		if s.Partitions[i].Partition == part {
			got = &s.Partitions[i]
		} else if s.Partitions[i].Records != 0 {
			t.Fatalf("partition %d has lag %+v", s.Partitions[i].Partition, s.Partitions[i])
		}
	}
	if got == nil || got.Records != 5 || got.AgeSeconds < 59 || got.AgeSeconds > 65 {
		t.Fatalf("lag of partition %d: %+v (errors %v)", part, got, s.Errors)
	}
	if s.MaxAgeSeconds[cfg.Group] != got.AgeSeconds || s.Records[cfg.Group] != 5 {
		t.Fatalf("summary %+v", s)
	}

	// Process the first two only (the third fails for good → DLQ, the
	// rest succeed): lag goes to 0, DLQ size 1.
	stop := runConsumer(t, cfg, HandlerFunc(func(ctx context.Context, ds []Delivery) error {
		for _, d := range ds {
			if d.Event.MsgID == 102 {
				return Permanent(context.DeadlineExceeded)
			}
		}
		return nil
	}), p)
	defer stop()
	waitFor(t, 30*time.Second, "caught up", func() bool {
		s, err = mo.Poll(ctx)
		return err == nil && s.Records[cfg.Group] == 0
	})
	if s.MaxAgeSeconds[cfg.Group] != 0 || s.DLQRecords != 1 {
		t.Fatalf("after catching up: %+v", s)
	}
}
