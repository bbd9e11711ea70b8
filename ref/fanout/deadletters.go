package fanout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/ref/model"
)

// MaxDeadLettersRead bounds the records ReadDeadLetters returns (the
// topic's count goes on past it).
const MaxDeadLettersRead = 10_000

// DeadLetter is one record of the dead-letter topic as the consumer wrote
// it: where it lies, the message it carries (when its value is an Event)
// and the headers that say which group gave up, why and after what.
type DeadLetter struct {
	Partition int32
	Offset    int64
	// Event is the record's value decoded; Decoded is false for a value
	// that is not an Event (it was dead-lettered for that).
	Event   Event
	Decoded bool
	Group   string // HeaderDLQGroup
	Reason  string // HeaderDLQReason
	Class   string // HeaderDLQClass ("" for a record written before it existed)
	// Attempts, RetriedMS and WindowMS are -1 when the header is absent or
	// unreadable (unknown, never 0).
	Attempts  int
	RetriedMS int64
	WindowMS  int64
	// Source is the fan-out record it replaces.
	SourceTopic     string
	SourcePartition int32
	SourceOffset    int64
}

// DeadLetterRead is what ReadDeadLetters found: Records is the topic's
// size (end minus start offsets over every partition), Letters the first
// MaxDeadLettersRead of them in partition then offset order (Truncated:
// more were there).
type DeadLetterRead struct {
	Records   int64
	Letters   []DeadLetter
	Truncated bool
}

// ReadDeadLetters reads the dead-letter topic from its start offsets to
// the end offsets it finds first, with a client of its own, bounded by
// ctx. A topic that does not exist yet holds no dead letters.
func ReadDeadLetters(ctx context.Context, brokers []string, topic string) (DeadLetterRead, error) {
	if len(brokers) == 0 || topic == "" {
		return DeadLetterRead{}, fmt.Errorf("%w: dead letters need brokers and a topic", model.ErrInvalid)
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return DeadLetterRead{}, fmt.Errorf("fanout: dead-letter admin client: %w", err)
	}
	adm := kadm.NewClient(admCl)
	defer adm.Close()
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return DeadLetterRead{}, fmt.Errorf("fanout: dead-letter start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return DeadLetterRead{}, fmt.Errorf("fanout: dead-letter end offsets: %w", err)
	}
	var out DeadLetterRead
	want := map[int32]int64{} // partition → end offset still to reach
	from := map[string]map[int32]kgo.Offset{topic: {}}
	var missing error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			missing = o.Err
			return
		}
		st, ok := starts.Lookup(o.Topic, o.Partition)
		if !ok || st.Err != nil {
			missing = fmt.Errorf("no start offset for partition %d", o.Partition)
			return
		}
		if o.Offset > st.Offset {
			out.Records += o.Offset - st.Offset
			want[o.Partition] = o.Offset
			from[topic][o.Partition] = kgo.NewOffset().At(st.Offset)
		}
	})
	if missing != nil {
		if isUnknownTopic(missing) {
			return DeadLetterRead{Letters: []DeadLetter{}}, nil
		}
		return DeadLetterRead{}, fmt.Errorf("fanout: dead-letter offsets: %w", missing)
	}
	out.Letters = []DeadLetter{}
	if len(want) == 0 {
		return out, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(from))
	if err != nil {
		return DeadLetterRead{}, fmt.Errorf("fanout: dead-letter client: %w", err)
	}
	defer cl.Close()
	byPart := map[int32][]DeadLetter{}
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return DeadLetterRead{}, fmt.Errorf("fanout: reading dead letters (%d partitions unfinished): %w", len(want), err)
		}
		fs.EachError(func(_ string, p int32, ferr error) {
			if err == nil {
				err = fmt.Errorf("partition %d: %w", p, ferr)
			}
		})
		if err != nil {
			return DeadLetterRead{}, fmt.Errorf("fanout: reading dead letters: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			byPart[r.Partition] = append(byPart[r.Partition], parseDeadLetter(r))
			if r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
	parts := make([]int32, 0, len(byPart))
	for p := range byPart {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	for _, p := range parts {
		for _, dl := range byPart[p] {
			if len(out.Letters) >= MaxDeadLettersRead {
				out.Truncated = true
				return out, nil
			}
			out.Letters = append(out.Letters, dl)
		}
	}
	return out, nil
}

// parseDeadLetter reads one dead-letter record.
func parseDeadLetter(r *kgo.Record) DeadLetter {
	dl := DeadLetter{Partition: r.Partition, Offset: r.Offset, Attempts: -1, RetriedMS: -1, WindowMS: -1,
		SourcePartition: -1, SourceOffset: -1}
	if ev, err := UnmarshalEvent(r.Value); err == nil {
		dl.Event, dl.Decoded = ev, true
	}
	num := func(v []byte) int64 {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderDLQGroup:
			dl.Group = string(h.Value)
		case HeaderDLQReason:
			dl.Reason = string(h.Value)
		case HeaderDLQClass:
			dl.Class = string(h.Value)
		case HeaderDLQAttempts:
			dl.Attempts = int(num(h.Value))
		case HeaderDLQRetriedMS:
			dl.RetriedMS = num(h.Value)
		case HeaderDLQWindowMS:
			dl.WindowMS = num(h.Value)
		case HeaderDLQTopic:
			dl.SourceTopic = string(h.Value)
		case HeaderDLQPartition:
			dl.SourcePartition = int32(num(h.Value))
		case HeaderDLQOffset:
			dl.SourceOffset = num(h.Value)
		}
	}
	return dl
}

// isUnknownTopic tells a "topic does not exist" answer.
func isUnknownTopic(err error) bool { return errors.Is(err, kerr.UnknownTopicOrPartition) }
