package testenv

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// KafkaClient is a plain client of brokers (no consumer group, no topics
// to consume), closed when the test ends.
func KafkaClient(t testing.TB, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
