package fanout

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/internal/testenv"
)

func TestProducerRecoversFromRecreatedTopic(t *testing.T) {
	c := newCluster(t)
	brokers := c.ListenAddrs()
	tp := testTopics()
	ensureTopics(t, brokers, tp)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cfg := DefaultProducerConfig()
	cfg.Brokers = brokers
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rec := func(i uint64) *kgo.Record {
		return &kgo.Record{Topic: tp.Fanout, Key: ShardKey(i), Value: []byte("x")}
	}
	if err := p.PublishSync(ctx, []*kgo.Record{rec(1), rec(2)}); err != nil {
		t.Fatal(err)
	}

	// Delete and recreate the topic under the producer.
	adm := kadm.NewClient(testenv.KafkaClient(t, brokers))
	if _, err := adm.DeleteTopics(ctx, tp.Fanout); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ctx, adm, tp.Fanout)
	ensureTopics(t, brokers, tp)

	start := time.Now()
	defer func() { t.Logf("after recreate: %s", time.Since(start)) }()
	// A plain client would now fail every record with UNKNOWN_TOPIC_ID;
	// the producer rebuilds its client and delivers.
	for i := uint64(10); i < 20; i++ {
		if err := p.PublishSync(ctx, []*kgo.Record{rec(i)}); err != nil {
			t.Fatalf("publish after recreate: %v (recreates %d)", err, p.Recreates())
		}
	}
	ends, err := kadm.NewClient(testenv.KafkaClient(t, brokers)).ListEndOffsets(ctx, tp.Fanout)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Errorf("end offset %d: %v", o.Partition, o.Err)
		}
		total += o.Offset
	})
	if total != 10 {
		t.Fatalf("recreated topic holds %d records, want 10", total)
	}
	t.Logf("client rebuilds: %d", p.Recreates())

	// The async path recovers the same way.
	if _, err := adm.DeleteTopics(ctx, tp.Fanout); err != nil {
		t.Fatal(err)
	}
	waitGone(t, ctx, adm, tp.Fanout)
	ensureTopics(t, brokers, tp)
	errs := make(chan error, 1)
	p.Publish(ctx, rec(99), func(err error) { errs <- err })
	if err := <-errs; err != nil {
		t.Fatalf("async publish after recreate: %v", err)
	}
}

func waitGone(t testing.TB, ctx context.Context, adm *kadm.Client, topic string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if d, ok := md.Topics[topic]; !ok || d.Err != nil {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("topic %s still present", topic)
}
