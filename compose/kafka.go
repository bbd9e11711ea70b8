package compose

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func pingKafka(ctx context.Context, brokers []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.Ping(ctx)
}

func (r *run) externalKafka(ctx context.Context) error {
	brokers := append([]string(nil), r.cfg.KafkaBrokers...)
	if err := waitFor(ctx, r.cfg.StartTimeout, nil, func(ctx context.Context) error { return pingKafka(ctx, brokers) }); err != nil {
		return fmt.Errorf("%w: external Kafka at %s: %v", ErrUnavailable, strings.Join(brokers, ","), err)
	}
	r.b.KafkaBrokers = brokers
	r.b.Kinds[PartKafka] = "external kafka"
	return nil
}

func (r *run) embeddedKafka(ctx context.Context) error {
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.DefaultNumPartitions(r.cfg.KafkaPartitions),
		kfake.AllowAutoTopicCreation(),
		kfake.ClusterID("imlab-embedded"),
	}
	if len(r.cfg.KafkaTopics) > 0 {
		opts = append(opts, kfake.SeedTopics(int32(r.cfg.KafkaPartitions), r.cfg.KafkaTopics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("%w: embedded Kafka: %v", ErrUnavailable, err)
	}
	r.st.add("embedded Kafka", func(context.Context) error { c.Close(); return nil })
	brokers := c.ListenAddrs()
	if err := waitFor(ctx, r.cfg.StartTimeout, nil, func(ctx context.Context) error { return pingKafka(ctx, brokers) }); err != nil {
		return fmt.Errorf("%w: embedded Kafka: %v", ErrUnavailable, err)
	}
	r.b.KafkaBrokers = brokers
	r.b.Kinds[PartKafka] = strings.TrimSpace("embedded kfake " + moduleVersion("github.com/twmb/franz-go/pkg/kfake"))
	r.b.Embedded = append(r.b.Embedded, PartKafka)
	return nil
}
