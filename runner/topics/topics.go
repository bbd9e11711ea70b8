// Package topics reads what a run left in its Kafka topics and the
// server's dead-letter route, with the lab's own client, at the end of a
// run: the dead-letter topic's records with their reasons and the fan-out
// topic's queued messages, each read bounded (MaxTopicRecordsRead). It
// owns no accounting (the runner and package result do that) and must not
// write to a topic.
package topics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/ref/fanout"
	"imlab/ref/server"
	"imlab/result"
	"imlab/runner/proc"
)

// MaxTopicRecordsRead bounds the records the lab reads from one topic at
// the end of a run (the dead-letter and fan-out topics); a bigger topic is
// not read, and the accounting says so.
const MaxTopicRecordsRead = 500_000

// FetchDeadLetters reads the api process's DeadLettersPath.
func FetchDeadLetters(ctx context.Context, addr string) (server.DeadLettersAnswer, error) {
	var out server.DeadLettersAnswer
	hc := &http.Client{Timeout: proc.ScrapeTimeout}
	defer hc.CloseIdleConnections()
	if err := proc.GetJSON(ctx, hc, "http://"+addr+server.DeadLettersPath, &out); err != nil {
		return out, fmt.Errorf("dead letters: %w", err)
	}
	return out, nil
}

// ReadDeadLetterTopic reads the dead-letter topic with the lab's own Kafka
// client (the witness the route is checked against): every record's place,
// the message its value names and the consumer's headers, and the topic's
// size.
func ReadDeadLetterTopic(ctx context.Context, brokers []string, topic string) ([]result.TopicLetter, int64, error) {
	out := []result.TopicLetter{}
	total, err := readTopic(ctx, brokers, topic, func(r *kgo.Record) { out = append(out, topicLetter(r)) })
	return out, total, err
}

// ReadQueued reads the fan-out topic with the lab's own client: the
// messages its records name (a record that is no event is left out).
func ReadQueued(ctx context.Context, brokers []string, topic string) (map[uint64]bool, error) {
	out := map[uint64]bool{}
	_, err := readTopic(ctx, brokers, topic, func(r *kgo.Record) {
		if ev, err := fanout.UnmarshalEvent(r.Value); err == nil {
			out[ev.MsgID] = true
		}
	})
	return out, err
}

// readTopic hands every record of topic, from the start offsets to the end
// offsets found first, to each (at most MaxTopicRecordsRead; more is an
// error), and returns the topic's size (end minus start over every
// partition). A topic that does not exist holds nothing.
func readTopic(ctx context.Context, brokers []string, topic string, each func(*kgo.Record)) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return 0, fmt.Errorf("topic %s: client: %w", topic, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("topic %s: start offsets: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("topic %s: end offsets: %w", topic, err)
	}
	var total int64
	want := map[int32]int64{}
	from := map[string]map[int32]kgo.Offset{topic: {}}
	for _, ps := range ends {
		for p, e := range ps {
			if errors.Is(e.Err, kerr.UnknownTopicOrPartition) {
				continue
			}
			if e.Err != nil {
				return 0, fmt.Errorf("topic %s partition %d: %w", topic, p, e.Err)
			}
			s, ok := starts.Lookup(topic, p)
			if !ok || s.Err != nil {
				return 0, fmt.Errorf("topic %s partition %d: no start offset", topic, p)
			}
			if e.Offset > s.Offset {
				total += e.Offset - s.Offset
				want[p] = e.Offset
				from[topic][p] = kgo.NewOffset().At(s.Offset)
			}
		}
	}
	if total > MaxTopicRecordsRead {
		return total, fmt.Errorf("topic %s holds %d records: the lab reads at most %d", topic, total, MaxTopicRecordsRead)
	}
	if len(want) == 0 {
		return 0, nil
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(from))
	if err != nil {
		return total, fmt.Errorf("topic %s: reader: %w", topic, err)
	}
	defer rd.Close()
	read := int64(0)
	for len(want) > 0 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("topic %s: read %d of %d records: %w", topic, read, total, err)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("partition %d: %w", p, err)
			}
		})
		if ferr != nil {
			return total, fmt.Errorf("topic %s: %w", topic, ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			read++
			each(r)
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	return total, nil
}

// topicLetter reads one record: the value as a fan-out event (the wire
// format), the headers by the names the consumer writes.
func topicLetter(r *kgo.Record) result.TopicLetter {
	l := result.TopicLetter{Partition: r.Partition, Offset: r.Offset, RetriedMS: -1, WindowMS: -1}
	if ev, err := fanout.UnmarshalEvent(r.Value); err == nil {
		l.MsgID = ev.MsgID
	}
	num := func(v []byte) int64 {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < 0 {
			return -1
		}
		return n
	}
	for _, h := range r.Headers {
		switch h.Key {
		case fanout.HeaderDLQGroup:
			l.Group = string(h.Value)
		case fanout.HeaderDLQClass:
			l.Class = string(h.Value)
		case fanout.HeaderDLQRetriedMS:
			l.RetriedMS = num(h.Value)
		case fanout.HeaderDLQWindowMS:
			l.WindowMS = num(h.Value)
		}
	}
	return l
}
