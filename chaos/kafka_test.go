package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/internal/testenv"
)

const kafkaPartitions = 3

type kafkaLab struct {
	brokers []string
	topic   string
	adm     *kadm.Client
}

func newKafkaLab(t *testing.T) *kafkaLab {
	t.Helper()
	topic := testenv.RandomName("chaos_")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(kafkaPartitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &kafkaLab{brokers: c.ListenAddrs(), topic: topic, adm: kadm.NewClient(cl)}
}

// produce writes n records with values tag-0 .. tag-(n-1) through a fresh
// client (one that has no cached topic id).
func (k *kafkaLab) produce(t *testing.T, ctx context.Context, tag string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.DefaultProduceTopic(k.topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s-%d", tag, i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// consumeFromStart reads the topic from the earliest offset with a fresh
// consumer until want records came or wait passed, then for a further
// extra window in which any record beyond want would show up, and returns
// the values seen. A short count is a finding only after the whole wait:
// under a loaded machine a fetch of one partition can lag the others by
// seconds, so a quiet gap between records proves nothing.
func (k *kafkaLab) consumeFromStart(t *testing.T, ctx context.Context, want int, wait, extra time.Duration) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.ConsumeTopics(k.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for len(got) < want {
		fs := cl.PollFetches(wctx)
		if errs := fs.Errors(); len(errs) > 0 {
			if errors.Is(errs[0].Err, context.DeadlineExceeded) {
				break
			}
			t.Fatalf("consume: %v", errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	xctx, cancelExtra := context.WithTimeout(ctx, extra)
	defer cancelExtra()
	cl.PollFetches(xctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	return got
}

func countTagged(vals []string, tag string) int {
	n := 0
	for _, v := range vals {
		if strings.HasPrefix(v, tag+"-") {
			n++
		}
	}
	return n
}

func TestKafkaRecordLoss(t *testing.T) {
	t.Parallel()
	k := newKafkaLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	const n, m = 60, 7
	k.produce(t, ctx, "old", n)
	if got := k.consumeFromStart(t, ctx, n, 15*time.Second, 500*time.Millisecond); countTagged(got, "old") != n {
		t.Fatalf("before the fault a consumer sees %d of %d records", countTagged(got, "old"), n)
	}
	ends, err := k.adm.ListEndOffsets(ctx, k.topic)
	if err != nil {
		t.Fatal(err)
	}

	f := KafkaRecordLoss(k.adm, k.topic)
	if f.Name() != "kafka_record_loss("+k.topic+")" {
		t.Fatalf("Name() = %q", f.Name())
	}
	if err := f.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.(Impact).Affected(); got != n {
		t.Fatalf("Affected() = %d, want %d", got, n)
	}
	starts, err := k.adm.ListStartOffsets(ctx, k.topic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		if s, ok := starts.Lookup(e.Topic, e.Partition); !ok || s.Offset != e.Offset {
			t.Errorf("partition %d: start offset %d, want the old high watermark %d", e.Partition, s.Offset, e.Offset)
		}
	})
	// The topic still works: new records arrive, none of the old ones.
	k.produce(t, ctx, "new", m)
	got := k.consumeFromStart(t, ctx, m, 15*time.Second, 500*time.Millisecond)
	if countTagged(got, "old") != 0 || countTagged(got, "new") != m {
		t.Fatalf("after the loss a consumer from the start sees %d old and %d new records, want 0 and %d",
			countTagged(got, "old"), countTagged(got, "new"), m)
	}
	if err := f.Heal(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestKafkaTopicRecreate(t *testing.T) {
	t.Parallel()
	k := newKafkaLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	const n, m = 45, 5
	k.produce(t, ctx, "old", n)
	before, err := k.adm.ListTopics(ctx, k.topic)
	if err != nil {
		t.Fatal(err)
	}

	f := KafkaTopicRecreate(k.adm, k.topic)
	if err := f.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.(Impact).Affected(); got != n {
		t.Fatalf("Affected() = %d, want %d", got, n)
	}
	// A fresh admin client: kadm serves metadata from its client's cache.
	fresh, err := kgo.NewClient(kgo.SeedBrokers(k.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	after, err := kadm.NewClient(fresh).ListTopics(ctx, k.topic)
	if err != nil {
		t.Fatal(err)
	}
	td := after[k.topic]
	if td.Err != nil || len(td.Partitions) != kafkaPartitions {
		t.Fatalf("re-created topic: %d partitions (%v), want %d", len(td.Partitions), td.Err, kafkaPartitions)
	}
	if td.ID == before[k.topic].ID {
		t.Fatalf("the topic id did not change (%v): the topic was not re-created", td.ID)
	}
	k.produce(t, ctx, "new", m)
	got := k.consumeFromStart(t, ctx, m, 15*time.Second, 500*time.Millisecond)
	if countTagged(got, "old") != 0 || countTagged(got, "new") != m {
		t.Fatalf("after re-creation a consumer from the start sees %d old and %d new records, want 0 and %d",
			countTagged(got, "old"), countTagged(got, "new"), m)
	}
}

func TestKafkaFaultsBadInput(t *testing.T) {
	t.Parallel()
	k := newKafkaLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, f := range []Fault{
		KafkaRecordLoss(nil, k.topic),
		KafkaTopicRecreate(nil, k.topic),
		KafkaRecordLoss(k.adm, ""),
		KafkaTopicRecreate(k.adm, "bad topic"),
		KafkaRecordLoss(k.adm, "no_such_topic"),
		KafkaTopicRecreate(k.adm, "no_such_topic"),
	} {
		if err := f.Inject(ctx); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: want ErrInvalid, got %v", f.Name(), err)
		}
	}
	if ts, err := k.adm.ListTopics(ctx); err != nil || ts.Has("no_such_topic") {
		t.Fatalf("a refused fault created a topic: %v", err)
	}
}
