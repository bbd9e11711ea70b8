package fanout

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/ref/model"
)

// Topic names and layout (seed 003: partition by hash(conv_id), partitions
// opened ahead of consumers).
const (
	DefaultTopic      = "im.fanout.msg"
	DefaultDLQTopic   = "im.fanout.dlq"
	DefaultPartitions = 16
	// MinPartitions is the fewest partitions the fan-out topic may have.
	MinPartitions = 16
	// MaxPartitions bounds the partition count (and so the consumer loops).
	MaxPartitions = 1024
	// HeaderOutboxID carries mq_outbox.id on records the relay published,
	// so that the consumer can confirm them (status 2).
	HeaderOutboxID = "outbox_id"
	// Header names of dead-lettered records.
	HeaderDLQReason    = "dlq_reason"
	HeaderDLQTopic     = "dlq_topic"
	HeaderDLQPartition = "dlq_partition"
	HeaderDLQOffset    = "dlq_offset"
	HeaderDLQAttempts  = "dlq_attempts"
	// HeaderDLQGroup names the consumer group (tier) that gave up: the
	// dead-letter topic is shared by the inbox and history tiers, and a
	// replay must go to the tier that failed only.
	HeaderDLQGroup = "dlq_group"
	// HeaderDLQClass says why it gave up (DLQClassTransient, Permanent or
	// Undecodable); HeaderDLQRetriedMS how long the delivery was retried
	// since its batch first failed; HeaderDLQWindowMS the transient window
	// in force then (ms). A transient dead letter retried less than that
	// window broke the consumer's promise to wait out a short outage.
	HeaderDLQClass     = "dlq_class"
	HeaderDLQRetriedMS = "dlq_retried_ms"
	HeaderDLQWindowMS  = "dlq_window_ms"
)

// Topics names the fan-out and dead-letter topics and their size.
type Topics struct {
	Fanout     string
	DLQ        string
	Partitions int32
	// Replication is the replication factor used when creating topics
	// (1 for kfake and a one-broker Kafka; -1 lets the broker decide).
	Replication int16
}

// DefaultTopics is im.fanout.msg and im.fanout.dlq with 16 partitions.
func DefaultTopics() Topics {
	return Topics{Fanout: DefaultTopic, DLQ: DefaultDLQTopic, Partitions: DefaultPartitions, Replication: 1}
}

// Validate checks names and the partition count.
func (t Topics) Validate() error {
	for _, n := range []string{t.Fanout, t.DLQ} {
		if n == "" || len(n) > 64 || strings.ContainsAny(n, " /\\") {
			return fmt.Errorf("%w: topic name %q", model.ErrInvalid, n)
		}
	}
	if t.Fanout == t.DLQ {
		return fmt.Errorf("%w: fan-out and dead-letter topics are the same", model.ErrInvalid)
	}
	if t.Partitions < MinPartitions || t.Partitions > MaxPartitions {
		return fmt.Errorf("%w: partitions must be in %d..%d", model.ErrInvalid, MinPartitions, MaxPartitions)
	}
	if t.Replication == 0 || t.Replication < -1 {
		return fmt.Errorf("%w: replication factor %d", model.ErrInvalid, t.Replication)
	}
	return nil
}

// EnsureTopics creates the fan-out and dead-letter topics when missing. An
// existing topic is left as it is (an existing fan-out topic with fewer
// than MinPartitions partitions is an error: ordering by conv_id and the
// consumer count depend on it).
func EnsureTopics(ctx context.Context, cl *kgo.Client, t Topics) error {
	if err := t.Validate(); err != nil {
		return err
	}
	adm := kadm.NewClient(cl)
	resps, err := adm.CreateTopics(ctx, t.Partitions, t.Replication, nil, t.Fanout, t.DLQ)
	if err != nil {
		return fmt.Errorf("fanout: create topics: %w", err)
	}
	for _, r := range resps {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("fanout: create topic %s: %w", r.Topic, r.Err)
		}
	}
	// Wait until the metadata shows the topic with its partitions.
	deadline := time.Now().Add(10 * time.Second)
	for {
		md, err := adm.Metadata(ctx, t.Fanout, t.DLQ)
		if err == nil {
			d, ok := md.Topics[t.Fanout]
			if ok && d.Err == nil && len(d.Partitions) > 0 {
				if int32(len(d.Partitions)) < MinPartitions {
					return fmt.Errorf("%w: topic %s has %d partitions, need >= %d",
						model.ErrInvalid, t.Fanout, len(d.Partitions), MinPartitions)
				}
				if dl, ok := md.Topics[t.DLQ]; ok && dl.Err == nil && len(dl.Partitions) > 0 {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: topics %s/%s not visible after creation", model.ErrUnavailable, t.Fanout, t.DLQ)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// PartitionOf is the fan-out partition of a conversation: a 64-bit mix of
// conv_id modulo n. Every message of a conversation lands in one
// partition, so one consumer loop sees them in conv_seq order.
func PartitionOf(convID uint64, n int) int {
	if n <= 0 {
		return 0
	}
	return int(mix64(convID) % uint64(n))
}

// mix64 is the splitmix64 finalizer: adjacent conv ids (uids packed in the
// 1:1 id, small group ids) spread evenly over partitions.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// ShardKey encodes a conv_id as a record key.
func ShardKey(convID uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), convID)
}

// partitioner places records whose key is an 8-byte shard key by
// PartitionOf; any other record (the dead-letter topic's, keyed the same)
// falls back to a key hash.
func partitioner() kgo.Partitioner {
	return kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
		return func(r *kgo.Record, n int) int {
			if len(r.Key) == 8 {
				return PartitionOf(binary.BigEndian.Uint64(r.Key), n)
			}
			var h uint64 = 1469598103934665603
			for _, c := range r.Key {
				h = (h ^ uint64(c)) * 1099511628211
			}
			return int(h % uint64(n))
		}
	})
}
