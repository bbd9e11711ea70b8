package chaos

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Limits of the Kafka faults.
const (
	// RecreateTimeout bounds how long KafkaTopicRecreate keeps trying to
	// create the topic again while the broker still finishes the deletion.
	RecreateTimeout = 30 * time.Second
	// RecreateBackoff is the pause between those attempts.
	RecreateBackoff = 100 * time.Millisecond
)

var topicRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// topicState is what the Kafka faults read before they act.
type topicState struct {
	partitions int32
	records    int64        // end - start summed over partitions
	ends       kadm.Offsets // high watermarks
}

// inspectTopic checks the arguments and that every broker of the cluster
// is on this machine, then reads the topic's partitions and offsets.
func inspectTopic(ctx context.Context, adm *kadm.Client, topic string) (topicState, error) {
	if err := checkTopicArgs(adm, topic); err != nil {
		return topicState{}, err
	}
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return topicState{}, fmt.Errorf("chaos: kafka metadata of %q: %w", topic, err)
	}
	if len(md.Brokers) == 0 {
		return topicState{}, fmt.Errorf("chaos: kafka metadata of %q lists no brokers", topic)
	}
	for _, b := range md.Brokers {
		if err := checkLoopbackHost(b.Host); err != nil {
			return topicState{}, fmt.Errorf("chaos: kafka broker %d at %s:%d: %w", b.NodeID, b.Host, b.Port, err)
		}
	}
	td, ok := md.Topics[topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return topicState{}, fmt.Errorf("%w: kafka topic %q does not exist", ErrInvalid, topic)
	}
	if td.Err != nil {
		return topicState{}, fmt.Errorf("chaos: kafka topic %q: %w", topic, td.Err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return topicState{}, fmt.Errorf("chaos: kafka end offsets of %q: %w", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return topicState{}, fmt.Errorf("chaos: kafka start offsets of %q: %w", topic, err)
	}
	st := topicState{partitions: int32(len(td.Partitions)), ends: make(kadm.Offsets)}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic != topic || o.Partition < 0 {
			return
		}
		st.ends.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && o.Offset > s.Offset {
			st.records += o.Offset - s.Offset
		}
	})
	return st, nil
}

func checkTopicArgs(adm *kadm.Client, topic string) error {
	if adm == nil {
		return fmt.Errorf("%w: nil kafka admin client", ErrInvalid)
	}
	if !topicRE.MatchString(topic) {
		return fmt.Errorf("%w: kafka topic name %q", ErrInvalid, topic)
	}
	return nil
}

type kafkaRecordLoss struct {
	adm      *kadm.Client
	topic    string
	affected atomic.Int64
}

// KafkaRecordLoss deletes every record of the topic up to each partition's
// current high watermark with kadm DeleteRecords: records not consumed yet
// are gone (queue loss). Affected is the number of records deleted.
// One-shot.
func KafkaRecordLoss(adm *kadm.Client, topic string) Fault {
	return &kafkaRecordLoss{adm: adm, topic: topic}
}

func (f *kafkaRecordLoss) Name() string               { return "kafka_record_loss(" + f.topic + ")" }
func (f *kafkaRecordLoss) Validate() error            { return checkTopicArgs(f.adm, f.topic) }
func (f *kafkaRecordLoss) Affected() int64            { return f.affected.Load() }
func (f *kafkaRecordLoss) Heal(context.Context) error { return nil }

func (f *kafkaRecordLoss) Inject(ctx context.Context) error {
	st, err := inspectTopic(ctx, f.adm, f.topic)
	if err != nil {
		return err
	}
	rs, err := f.adm.DeleteRecords(ctx, st.ends)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		return fmt.Errorf("chaos: kafka delete records of %q: %w", f.topic, err)
	}
	f.affected.Store(st.records)
	return nil
}

type kafkaTopicRecreate struct {
	adm      *kadm.Client
	topic    string
	affected atomic.Int64
}

// KafkaTopicRecreate deletes the topic and creates it again with the same
// partition count (read before deleting) and replication factor 1: every
// record is gone and producers see UNKNOWN_TOPIC_ID. Topic configs are not
// carried over (the new topic has the broker defaults). Affected is the
// number of records the old topic held. One-shot.
func KafkaTopicRecreate(adm *kadm.Client, topic string) Fault {
	return &kafkaTopicRecreate{adm: adm, topic: topic}
}

func (f *kafkaTopicRecreate) Name() string               { return "kafka_topic_recreate(" + f.topic + ")" }
func (f *kafkaTopicRecreate) Validate() error            { return checkTopicArgs(f.adm, f.topic) }
func (f *kafkaTopicRecreate) Affected() int64            { return f.affected.Load() }
func (f *kafkaTopicRecreate) Heal(context.Context) error { return nil }

func (f *kafkaTopicRecreate) Inject(ctx context.Context) error {
	st, err := inspectTopic(ctx, f.adm, f.topic)
	if err != nil {
		return err
	}
	if st.partitions < 1 {
		return fmt.Errorf("chaos: kafka topic %q has no partitions", f.topic)
	}
	if _, err := f.adm.DeleteTopic(ctx, f.topic); err != nil {
		return fmt.Errorf("chaos: kafka delete topic %q: %w", f.topic, err)
	}
	deadline := time.Now().Add(RecreateTimeout)
	for {
		_, err := f.adm.CreateTopic(ctx, st.partitions, 1, nil, f.topic)
		if err == nil {
			f.affected.Store(st.records)
			return nil
		}
		if !errors.Is(err, kerr.TopicAlreadyExists) || time.Now().After(deadline) {
			return fmt.Errorf("chaos: kafka topic %q deleted but not created again (%d partitions): %w", f.topic, st.partitions, err)
		}
		t := time.NewTimer(RecreateBackoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("chaos: kafka topic %q deleted, re-creation interrupted: %w", f.topic, ctx.Err())
		case <-t.C:
		}
	}
}
