package fanout

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"imlab/internal/testenv"
)

// newCluster starts a private one-broker kfake cluster for a test.
func newCluster(t testing.TB) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(DefaultPartitions))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// testTopics returns unique topic names for a test.
// newKafka starts a private kfake cluster with the test topics created and
// returns its brokers, the topics and a producer to them.
func newKafka(t testing.TB) ([]string, Topics, *Producer) {
	t.Helper()
	brokers, tp := newCluster(t).ListenAddrs(), testTopics()
	ensureTopics(t, brokers, tp)
	return brokers, tp, testProducer(t, brokers)
}

func testTopics() Topics {
	t := DefaultTopics()
	t.Fanout = testenv.RandomName("fan_")
	t.DLQ = t.Fanout + "_dlq"
	return t
}

func ensureTopics(t testing.TB, brokers []string, tp Topics) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := EnsureTopics(ctx, testenv.KafkaClient(t, brokers), tp); err != nil {
		t.Fatal(err)
	}
}
