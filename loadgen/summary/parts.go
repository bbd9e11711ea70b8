package summary

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"imlab/loadgen/clientmix"
	"imlab/targets"
)

// The parts of a Summary that the generator, its devices and its witness
// fill: the figures of the sends (Quantiles, Second, IntendedFailures),
// the segment, the queue lag at the end, the evidence and the client
// mix's counts.

// IntendedBin is the resolution of Summary.FailedByIntended.
const IntendedBin = 100 * time.Millisecond

// IntendedFailures counts the sends intended in one IntendedBin (from At
// seconds after the start) that ended failed, of unknown outcome, or
// needed more than one try, whenever their outcome came.
type IntendedFailures struct {
	At      float64 `json:"at_s"`
	Fail    uint64  `json:"fail"`
	Unknown uint64  `json:"unknown"`
	Retried uint64  `json:"retried"`
}

// Quantiles of one histogram, in microseconds.
type Quantiles struct {
	Count int64 `json:"count"`
	P50   int64 `json:"p50_us"`
	P90   int64 `json:"p90_us"`
	P99   int64 `json:"p99_us"`
	P999  int64 `json:"p999_us"`
	Max   int64 `json:"max_us"`
}

// Second is one line of the per-second timeline.
type Second struct {
	T          int    `json:"t"`
	Started    uint64 `json:"started"`
	OK         uint64 `json:"ok"`
	Fail       uint64 `json:"fail"`
	Unknown    uint64 `json:"unknown"`
	Late       uint64 `json:"late"`
	Missed     uint64 `json:"missed"`
	Deliveries uint64 `json:"deliveries"`
	Workers    int64  `json:"workers"`
	// Queued: sends started and waiting for a sender at the second's end
	// (the pacer's queued mode).
	Queued    int64     `json:"queued,omitempty"`
	Response  Quantiles `json:"response"`
	SendDelay Quantiles `json:"send_delay"`
	E2E       Quantiles `json:"end_to_end"`
}

// MaxSegments bounds Segment.Count.
const MaxSegments = 1024

// Segment is one part of a run split over several generator processes
// (execution segments): segment Index of Count, 1-based. The split is
// derived from the seed alone, so processes started independently with the
// same flags and segments 1..Count together offer exactly the load one
// process would, with no coordinator and no overlap:
//
//   - user i of the population (0-based) belongs to segment i mod Count + 1,
//     with all of that user's devices;
//   - an intended send (a tick of the rate shape) belongs to the segment of
//     its sender's user; the sender is chosen from the seed and the tick, as
//     in a whole run, so every tick belongs to exactly one segment;
//   - every segment creates every group before it sends (the same members
//     again are a no-op on the server; a group left to one segment could be
//     sent to by another that started first); a group's members may belong
//     to any segment, and each member's devices record what they receive in
//     their own segment's ledger.
//
// Every segment builds the whole population (it is cheap and deterministic)
// and drives only its own part. The zero value and 1/1 mean the whole run.
type Segment struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// Whole tells whether the segment is the whole run.
func (s Segment) Whole() bool { return s.Count <= 1 }

func (s Segment) String() string {
	if s.Whole() {
		return "1/1"
	}
	return strconv.Itoa(s.Index) + "/" + strconv.Itoa(s.Count)
}

// Validate checks the bounds.
func (s Segment) Validate() error {
	if s.Count == 0 && s.Index == 0 {
		return nil
	}
	if s.Count < 1 || s.Count > MaxSegments || s.Index < 1 || s.Index > s.Count {
		return fmt.Errorf("%w: segment %d/%d: want i/n with 1 <= i <= n <= %d", ErrInvalid, s.Index, s.Count, MaxSegments)
	}
	return nil
}

// Owns tells whether the i-th (0-based) user or group belongs to s.
func (s Segment) Owns(i int) bool { return s.Whole() || i%s.Count == s.Index-1 }

// SegmentSummary says which part of which run a summary covers.
type SegmentSummary struct {
	Segment     Segment `json:"segment"`
	Fingerprint string  `json:"fingerprint"`
	Seed        uint64  `json:"seed"`
	Host        string  `json:"host"`
	Users       int     `json:"users"` // users of this segment
	// Clock: this host's clock offset to the target's, estimated before the
	// schedule starts (nil: unknown, see ClockError). Latencies between a
	// send of one segment and a delivery seen by another are as precise as
	// the two segments' offsets (see imlab check DIR...).
	Clock      *targets.Clock `json:"clock,omitempty"`
	ClockError string         `json:"clock_error,omitempty"`
}

// GroupLag is one consumer group's lag when the run ended.
type GroupLag struct {
	Group   string `json:"group"`
	Records int64  `json:"records"`
	// OldestAgeS is the age of its oldest unprocessed message; nil when the
	// server could not measure it (unknown, never 0).
	OldestAgeS *float64 `json:"oldest_age_s"`
	Drained    bool     `json:"drained"`
}

// QueueLagEnd is the target's queue lag read once the run ended (after the
// final drain and the witness): whether each tier behind the queue caught
// up, or how far behind it still was. A tier may lag (a slow history
// store does); the run then says so instead of reading as done.
type QueueLagEnd struct {
	Groups        []GroupLag `json:"groups"`
	OutboxBacklog int64      `json:"outbox_backlog"`
	Errors        []string   `json:"errors,omitempty"`
	// Unknown says why the lag could not be read (e.g. a server without
	// the lab route); then Groups is empty.
	Unknown string `json:"unknown,omitempty"`
	// NoQueue: the target said it has no queue, so there is no lag to
	// measure (not a failed measurement: Unknown stays empty).
	NoQueue bool `json:"no_queue,omitempty"`
}

// NoQueueLine is how a queue lag of a target without a queue reads.
const NoQueueLine = "none: the target has no queue"

func (q *QueueLagEnd) String() string {
	if q == nil {
		return "not read"
	}
	if q.NoQueue {
		return NoQueueLine
	}
	if q.Unknown != "" {
		return "unknown (" + q.Unknown + ")"
	}
	if len(q.Groups) == 0 {
		return "no consumer group (no queue behind this server)"
	}
	var parts []string
	for _, g := range q.Groups {
		age := "age unknown"
		if g.OldestAgeS != nil {
			age = fmt.Sprintf("oldest %.1fs", *g.OldestAgeS)
		}
		state := "drained"
		if !g.Drained {
			state = fmt.Sprintf("NOT DRAINED: %d records behind, %s", g.Records, age)
		}
		parts = append(parts, g.Group+" "+state)
	}
	s := strings.Join(parts, "; ")
	if q.OutboxBacklog > 0 {
		s += fmt.Sprintf("; outbox backlog %d", q.OutboxBacklog)
	}
	if len(q.Errors) > 0 {
		s += "; monitor errors: " + strings.Join(q.Errors, ", ")
	}
	return s
}

// EvidenceSummary says what evidence beyond the devices' deliveries the
// run gathered.
type EvidenceSummary struct {
	// Policy is the server's ack policy as its lab route reported it.
	Policy       string   `json:"policy,omitempty"`
	StoreWitness StoreSum `json:"store_witness"`
	ReadAfterAck ProbeSum `json:"read_after_ack"`
	// History and Retention: the history witness and the retention log
	// (nil: not read, the client mix was off).
	History   *HistorySum   `json:"history_witness,omitempty"`
	Retention *RetentionSum `json:"retention,omitempty"`
}

// StoreSum is the store witness's outcome.
type StoreSum struct {
	Made   bool   `json:"made"`
	UIDs   int    `json:"uids"`
	Errors int    `json:"errors"`
	Reason string `json:"reason,omitempty"`
}

// ProbeSum is the read-after-ACK probes' outcome.
type ProbeSum struct {
	Made   bool   `json:"made"`
	Probes uint64 `json:"probes"` // reads answered
	Errors uint64 `json:"errors"` // reads that failed
	Reason string `json:"reason,omitempty"`
}

// HistorySum says what the history witness read.
type HistorySum struct {
	Made    bool   `json:"made"`
	Drained bool   `json:"drained"`
	Convs   int    `json:"convs"`
	Slots   int    `json:"slots"`
	Errors  int    `json:"errors"`
	Reason  string `json:"reason,omitempty"`
	Waited  string `json:"waited,omitempty"`
	Invalid int    `json:"invalid_slots,omitempty"`
}

// RetentionSum says what the retention log read.
type RetentionSum struct {
	Made      bool   `json:"made"`
	Deletions int    `json:"deletions"`
	Reason    string `json:"reason,omitempty"`
}

// MixSummary counts the mix's actions by outcome.
type MixSummary struct {
	Mix            clientmix.Mix `json:"mix"`
	Entered        uint64        `json:"entered"`
	ConvPulls      uint64        `json:"conv_pulls"`
	HistoryPages   uint64        `json:"history_pages"`
	Revokes        uint64        `json:"revokes"`
	RevokesDropped uint64        `json:"revokes_dropped,omitempty"`
	Deletes        uint64        `json:"deletes"`
	Clears         uint64        `json:"clears"`
	Reads          uint64        `json:"reads"`
	// Failed and Unknown: actions answered with a definite refusal, and
	// unanswered or answered 5xx (they may or may not have happened).
	Failed  uint64 `json:"failed"`
	Unknown uint64 `json:"unknown"`
}
