// Package summary owns the record of one generator's run, summary.json:
// the Summary and its parts (the sends and their outcome, OVERLOADED or
// within load, the latencies, the timeline, the drain, the evidence, the
// client mix's counts, the lab's CPU share), which segment of a run it
// covers (Segment), writing and reading it, its text, and the segments of
// a split run taken together: the plan that merges their directories
// (PlanMerge) and their summaries summed (MergeSummaries).
//
// It must not run load, talk to a target or read a ledger, and must not
// import the generator (loadgen) or its devices and witnesses.
package summary

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"imlab/loadgen/schedule"
)

// ErrInvalid marks a summary or a set of run directories that cannot be
// read or merged.
var ErrInvalid = errors.New("summary: invalid")

// File is the summary's name in the run directory.
const File = "summary.json"

// Format names the layout of summary.json; a change that a reader
// could misread gets a new one. A summary without the field was written
// before it existed, in the layout of format 1 less the fields added
// since (readers treat those as not recorded).
const Format = "imlab-load-summary/1"

// Ceiling is the generator's own limit, measured on a no-op endpoint.
type Ceiling struct {
	PerSec   float64 `json:"per_sec"`
	Requests uint64  `json:"requests"`
	Seconds  float64 `json:"seconds"`
	Via      string  `json:"via"`
	Conns    int     `json:"conns"`
	Pipeline int     `json:"pipeline,omitempty"`
	Workers  int     `json:"workers"`
}

// GeneratorSummary is how the generator ran: what its figures depend on.
type GeneratorSummary struct {
	GOMAXPROCS    int    `json:"gomaxprocs"`
	CPUs          int    `json:"cpus"`
	GOGC          int    `json:"gogc"` // -1: off
	Conns         int    `json:"conns"`
	Pipeline      int    `json:"pipeline"`
	PipelineConns int    `json:"pipeline_conns,omitempty"`
	PipelineDelay string `json:"pipeline_delay,omitempty"`
	Workers       int    `json:"workers"`
	MaxWorkers    int    `json:"max_workers"`
	// Senders and MaxQueued: the pacer's queued mode (0: off).
	Senders   int `json:"senders,omitempty"`
	MaxQueued int `json:"max_queued,omitempty"`
}

// Summary is written to RUN_DIR/summary.json. AchievedPerSec is ACKed
// sends per second of the send window (AckSeconds); StartedPerSec counts
// every send started, whatever became of it (achieved_per_sec held that
// figure before). Outcome holds the fractions of ok, failed and unknown
// sends and whether they make the run OVERLOADED (Outcomes with
// OverloadFraction).
type Summary struct {
	// Format is Format: Read refuses another.
	Format string `json:"format"`
	RunID  string `json:"run_id"`
	// Split: the segment of the run this process drove (1/1: the whole run).
	Split SegmentSummary `json:"split"`
	// QueueLag: the target's queue lag once the run ended (nil: not read).
	QueueLag   *QueueLagEnd      `json:"queue_lag_at_end,omitempty"`
	Target     string            `json:"target"`
	Shape      string            `json:"shape"`
	SendVia    string            `json:"send_via"`
	Duration   string            `json:"duration"`
	StartedAt  time.Time         `json:"started_at"`
	Population PopulationSummary `json:"population"`
	Ceiling    *Ceiling          `json:"generator_ceiling,omitempty"`
	Generator  GeneratorSummary  `json:"generator"`
	// LabCPU: the generator's share of the machine's CPU while it sent
	// (nil: not measured).
	LabCPU  *LabCPU        `json:"lab_cpu,omitempty"`
	Pacer   schedule.Stats `json:"pacer"`
	OK      uint64         `json:"ok"`
	Fail    uint64         `json:"fail"`
	Unknown uint64         `json:"unknown"`
	Retries uint64         `json:"retries"`
	// Refused: requests the target answered 401 or 403 (not
	// authenticated, not allowed): sends' tries and the devices'
	// registrations, pulls and acknowledgements. Any at all usually means
	// the lab's secret is not the target's (see CredentialsRefused).
	Refused uint64 `json:"refused,omitempty"`
	// RetriedSends: sends that needed more than one try (a timeout or
	// other unknown outcome resent, a 429): whatever their final outcome,
	// the server did not answer them at the first try.
	RetriedSends uint64 `json:"retried_sends,omitempty"`
	// NotSent: sends (counted in Fail) that waited in the generator's
	// queue longer than one send timeout and were never transmitted: a
	// client gives up on a message it could not hand to the server in
	// time, so a server too slow for the offered rate ends the load phase
	// within a bound instead of stretching it by its backlog.
	NotSent        uint64  `json:"not_sent,omitempty"`
	Deliveries     uint64  `json:"deliveries"`
	AchievedPerSec float64 `json:"achieved_per_sec"`
	StartedPerSec  float64 `json:"started_per_sec"`
	LoadSeconds    float64 `json:"load_seconds"`
	// StartSeconds and AckSeconds are the windows StartedPerSec and
	// AchievedPerSec are over: the shape's duration, or until the last
	// start / the last ACK when that came later (LoadSeconds runs to the
	// last answer of any outcome, timeouts included).
	StartSeconds float64 `json:"start_seconds,omitempty"`
	AckSeconds   float64 `json:"ack_seconds,omitempty"`
	Outcome      Outcome `json:"outcome"`
	// FailedByIntended says when the failed, unknown and retried sends
	// were intended, per IntendedBin (bins without any left out): how they
	// line up with a run's faults (Fail and Unknown of the timeline count
	// by the second their outcome came in). Nil in summaries written
	// before it was recorded.
	FailedByIntended []IntendedFailures `json:"failed_by_intended,omitempty"`
	// AckedByIntended is the ACKed sends per second of their intended time
	// (index i: intended from i s after the start, whenever the ACK came;
	// the timeline's OK counts by the second the ACK came, which can
	// exceed the offered rate after a stall). Nil in summaries written
	// before it was recorded.
	AckedByIntended []uint64             `json:"acked_by_intended,omitempty"`
	Latency         map[string]Quantiles `json:"latency"`
	Timeline        []Second             `json:"timeline"`
	Drain           DrainSummary         `json:"drain"`
	Evidence        EvidenceSummary      `json:"evidence"`
	LedgerBytes     int64                `json:"ledger_bytes"`
	// Mix: the client mix's actions (nil: the mix was off).
	Mix    *MixSummary `json:"mix,omitempty"`
	Errors []string    `json:"errors,omitempty"`
}

// PopulationSummary counts the population.
type PopulationSummary struct {
	Users   int            `json:"users"`
	Devices map[string]int `json:"devices"`
	Groups  int            `json:"groups"`
	UIDs    [2]uint64      `json:"uids"`
}

// DrainSummary says whether every device reached the end.
type DrainSummary struct {
	Complete bool `json:"complete"`
	// Rounds of pulling every device to the end: a server still appending
	// after a round (fan-out lag, sends of unknown outcome that finish late)
	// gets another, Settle later.
	Rounds        int     `json:"rounds"`
	Seconds       float64 `json:"seconds"`
	WitnessUIDs   int     `json:"witness_uids"`
	WitnessErrors int     `json:"witness_errors"`
	// InboxBehind says what was still on its way to an inbox (queued,
	// or in the outbox) when the drain deadline passed; "" when the
	// inbox tier drained or the target shows no queue. A message missing
	// then may be late rather than lost, and the verdict says so.
	InboxBehind string `json:"inbox_behind,omitempty"`
}

// Write writes s as RUN_DIR/summary.json, in Format.
func Write(dir string, s *Summary) error {
	s.Format = Format
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, File), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	return nil
}

// Read reads RUN_DIR/summary.json.
func Read(dir string) (*Summary, error) {
	b, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		return nil, fmt.Errorf("summary: %w", err)
	}
	path := filepath.Join(dir, File)
	var head struct {
		Format *string `json:"format"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("%w: %s: not a load summary: %v", ErrInvalid, path, err)
	}
	if head.Format != nil && *head.Format != Format {
		return nil, fmt.Errorf("%w: %s: format %q, this imlab reads %q", ErrInvalid, path, *head.Format, Format)
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
	}
	return &s, nil
}
