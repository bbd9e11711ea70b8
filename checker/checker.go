package checker

import (
	"fmt"
	"strings"
	"time"

	"imlab/checker/conv"
	"imlab/ledger"
)

// MaxListed bounds how many msg_ids a finding lists in the text table and
// how many examples it keeps; the JSON verdict lists every msg_id.
const MaxListed = conv.MaxListed

// Finding names.
const (
	Lost          = "lost"
	Duplicated    = "duplicated"
	Unexpected    = "unexpected"
	Recovered     = "recovered"
	Reordered     = "reordered"
	Skipped       = "skipped"
	LostInStore   = "lost-in-store"
	UnstoredAtAck = "unstored-at-ack"
	DoubleStored  = "double-stored"
	SeqConflict   = "seq-conflict"
	AckMismatch   = "ack-mismatch"
	// The conversation (ledger version 3): the conversation model's
	// (package conv, as unexplained-gap below), and retention's (package
	// retention).
	HistoryLost        = conv.FindHistoryLost
	DeleteLogDropped   = conv.FindDeleteLogDropped
	HistoryMismatch    = conv.FindHistoryMismatch
	HistoryOverwritten = conv.FindHistoryOverwritten
	HistoryDuplicated  = conv.FindHistoryDuplicated
	HistoryView        = conv.FindHistoryView
	ConvPullWrong      = conv.FindConvPull
	RetentionUnpulled  = "retention-unpulled"
	RetentionEarly     = "retention-early"
	// Both targets (issue 25).
	FailedButStored  = "failed-but-stored"
	RefusedAfterHeal = "refused-after-heal"
	UnexplainedGap   = conv.FindUnexplainedGap
	RetryDuplicate   = "retry-duplicate"
)

// Names of the findings, in table order.
var Names = []string{Lost, Duplicated, Unexpected, Recovered, Reordered, Skipped,
	LostInStore, UnstoredAtAck, DoubleStored, SeqConflict, AckMismatch,
	HistoryLost, DeleteLogDropped, HistoryMismatch, HistoryOverwritten, HistoryDuplicated, HistoryView, ConvPullWrong,
	RetentionUnpulled, RetentionEarly, FailedButStored, RefusedAfterHeal, UnexplainedGap, RetryDuplicate}

// Deciding are the findings that make a run invalid (unless allowed, see
// Verdict.Judge).
var Deciding = []string{Lost, Unexpected, Reordered, Skipped, LostInStore, UnstoredAtAck, DoubleStored, SeqConflict, AckMismatch,
	HistoryLost, DeleteLogDropped, HistoryMismatch, HistoryOverwritten, HistoryDuplicated, HistoryView, ConvPullWrong,
	RetentionUnpulled, RetentionEarly, FailedButStored, RefusedAfterHeal, UnexplainedGap}

// Check names (Verdict.Checks).
const (
	CheckPullWitness  = "pull-witness"
	CheckStoreWitness = "store-witness"
	CheckReadAfterAck = "read-after-ack"
	// Version 3.
	CheckHistoryWitness = conv.HistoryWitness
	CheckHistoryPages   = conv.HistoryPages
	CheckConvPulls      = conv.ConvPulls
	CheckRetention      = "retention"
	CheckDeleteLog      = conv.DeleteLog
	// The target's capabilities and the run's liveness bound.
	CheckInbox    = "inbox"
	CheckRetries  = "retries"
	CheckLiveness = "liveness"
)

// Finding is one anomaly class.
type Finding struct {
	Name string `json:"name"`
	// Count is the number of distinct messages concerned (for duplicated:
	// the extra copies, one per delivery beyond the first a device stored,
	// so it is larger than the number of MsgIDs, the distinct messages
	// copied; for lost, skipped and lost-in-store see Pairs).
	Count int `json:"count"`
	// Pairs counts (message, device) pairs for lost and skipped, (message,
	// uid) pairs for lost-in-store and unstored-at-ack.
	Pairs  int      `json:"pairs,omitempty"`
	MsgIDs []uint64 `json:"msg_ids"`
	// UIDs lists the uids concerned, for the store-level findings.
	UIDs []uint64 `json:"uids,omitempty"`
	// Convs lists the conversations concerned, for the conversation
	// findings.
	Convs []uint64 `json:"convs,omitempty"`
	// NotMade says why the finding could not be judged (no check that
	// feeds it was made): its count of 0 then says nothing.
	NotMade string `json:"not_made,omitempty"`
	// Decides: a count above Allowed makes the run invalid.
	Decides bool `json:"decides"`
	// Allowed is the count this finding may reach and still leave the run
	// valid (0 unless Judge was given an allowance).
	Allowed int `json:"allowed,omitempty"`
	// Examples explain a few entries in words.
	Examples []string `json:"examples,omitempty"`
}

// CheckResult says whether a piece of evidence was there to judge with.
type CheckResult struct {
	Name string `json:"name"`
	// Made: the evidence was gathered (Partial: for some uids or probes
	// only, Detail says which).
	Made    bool   `json:"made"`
	Partial bool   `json:"partial,omitempty"`
	Detail  string `json:"detail,omitempty"`
	// Unexercised: not made because the run did not exercise what the
	// check judges (the target does not offer it, the run did none of it,
	// or the ledger's version predates its records), not because evidence
	// the run set out to gather is missing. It is named (Made false,
	// Detail says why), and it is no gap: Unmade leaves it out.
	Unexercised bool `json:"unexercised,omitempty"`
	// Findings are the findings this evidence feeds.
	Findings []string `json:"findings"`
}

// Latency quantiles in microseconds.
type Latency struct {
	Count int64 `json:"count"`
	P50   int64 `json:"p50_us"`
	P90   int64 `json:"p90_us"`
	P99   int64 `json:"p99_us"`
	P999  int64 `json:"p999_us"`
	Max   int64 `json:"max_us"`
}

// Verdict is the checker's answer.
type Verdict struct {
	// Format is VerdictFormat: readers of verdict.json refuse another.
	Format string `json:"format"`
	Valid  bool   `json:"valid"`
	// LedgerVersion is the format version of the ledger judged.
	LedgerVersion int `json:"ledger_version"`
	// Policy is the server's ack policy as the lab route reported it ("":
	// unknown).
	Policy     string              `json:"policy,omitempty"`
	Devices    int                 `json:"devices"`
	Users      int                 `json:"users"`
	Groups     int                 `json:"groups"`
	Attempts   map[string]int      `json:"attempts"` // ok / fail / unknown
	Deliveries int                 `json:"deliveries"`
	Witnessed  int                 `json:"witnessed"`
	Stored     int                 `json:"stored"` // store witness entries
	Probes     int                 `json:"probes"` // read-after-ACK probes answered
	OK         int                 `json:"ok"`
	Findings   map[string]*Finding `json:"findings"`
	Checks     []CheckResult       `json:"checks"`
	Latency    map[string]Latency  `json:"latency"`
	Shards     []ShardNote         `json:"shards"`
	Warnings   []string            `json:"warnings,omitempty"`
	// JudgedPartly: each finding a check made only in part feeds (its
	// count covers only what was read), with those checks.
	JudgedPartly map[string][]string `json:"judged_partly,omitempty"`
	// Followed is what became of the messages Options.Follow named (nil
	// when none were named).
	Followed *Fate `json:"followed,omitempty"`
	// Target is the driver of the server judged, as the ledger's header
	// states it ("ref" when it states none).
	Target string `json:"target,omitempty"`
	// Conversations counts the version 3 evidence (nil: a ledger without
	// any).
	Conversations *ConvCounts `json:"conversations,omitempty"`
}

// ConvCounts counts the conversation actions devices made and the
// history and retention records of a run.
type ConvCounts struct {
	Pulls      int `json:"conv_pulls"`
	Pages      int `json:"history_pages"`
	Revokes    int `json:"revokes"`
	Deletes    int `json:"deletes"`
	Clears     int `json:"clears"`
	Reads      int `json:"reads"`
	Slots      int `json:"history_slots"`
	Watermarks int `json:"watermarks"`
	Deletions  int `json:"retention_deletions"`
	DelRanges  int `json:"del_ranges,omitempty"`
}

// VerdictFormat names the layout of a Verdict's JSON (verdict.json); a
// change that a reader could misread gets a new one.
const VerdictFormat = "imlab-verdict/1"

// Options of CheckSourcesWith.
type Options struct {
	// Follow names messages from outside the ledger, e.g. those forward
	// reconciliation repaired, whose fate the verdict reports in Followed.
	Follow []uint64
	// Liveness, when set, judges refused-after-heal.
	Liveness *Liveness
}

// Liveness is the bound a conversation must be accepting sends again
// within once the run's last fault healed.
type Liveness struct {
	// Healed is when the last fault healed, as an offset on the time
	// base of the judged records (the earliest shard start of the
	// sources, moved by their shifts): the same base as every time in the
	// ledger.
	Healed time.Duration
	// Bound is how long after Healed a conversation may still refuse
	// sends (at least 0).
	Bound time.Duration
}

// Fate is what the ledger says became of a set of messages named from
// outside it, by the findings' definitions: each distinct msg_id is
// delivered, lost or unexplained.
type Fate struct {
	// Messages is the number of distinct msg_ids followed.
	Messages int `json:"messages"`
	// Delivered: ACKed (or recovered) and, after the final drain, stored
	// by every recipient device: not lost, whenever it arrived.
	Delivered int `json:"delivered"`
	// Lost: ACKed (or recovered) and never stored by some recipient
	// device; each is also in the lost finding.
	Lost []uint64 `json:"lost"`
	// Unexplained: no ACK and no send of unknown outcome names it, so the
	// ledger cannot say whom it was for.
	Unexplained []uint64 `json:"unexplained"`
	// LastCopy is, over the delivered messages that were ACKed, the time
	// from the intended send to the first copy of the last recipient
	// device to store it: how late they arrived (Count 0: none measured).
	LastCopy Latency `json:"last_copy"`
}

// ShardNote says how a shard file read.
type ShardNote struct {
	Path      string `json:"path"`
	Records   uint64 `json:"records"`
	Bytes     int64  `json:"bytes"`
	Truncated bool   `json:"truncated"`
}

// Judge re-decides Valid: a deciding finding counts against validity only
// beyond its allowance (allow[name]; absent: 0). Allowances for findings
// that do not decide, or that are unknown, are ignored and reported in the
// error. Check calls Judge(nil).
func (v *Verdict) Judge(allow map[string]int) error {
	var bad []string
	for n, a := range allow {
		if f, ok := v.Findings[n]; !ok || !f.Decides || a < 0 {
			bad = append(bad, n)
		}
	}
	v.Valid = true
	for _, n := range Deciding {
		f := v.Findings[n]
		if f == nil {
			continue
		}
		f.Allowed = max(allow[n], 0)
		if f.Count > f.Allowed {
			v.Valid = false
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("checker: allowances for %v: not deciding findings (or negative)", bad)
	}
	return nil
}

// Partly is, in Names order, each finding judged on partial evidence and
// the partial checks that feed it ("unstored-at-ack (read-after-ack)").
func (v *Verdict) Partly() []string {
	var out []string
	for _, n := range Names {
		if cs := v.JudgedPartly[n]; len(cs) > 0 {
			out = append(out, n+" ("+strings.Join(cs, ", ")+")")
		}
	}
	return out
}

// Unmade names the checks that could not be made (Made false) although
// the run exercised what they judge: the gaps in the evidence.
func (v *Verdict) Unmade() []string {
	var out []string
	for _, c := range v.Checks {
		if !c.Made && !c.Unexercised {
			out = append(out, c.Name)
		}
	}
	return out
}

// Check reads the ledger in dir and returns the verdict.
func Check(dir string) (*Verdict, error) { return CheckSources([]Source{{Dir: dir}}) }

// Source is one run directory to judge and the shift that puts its times on
// the common time base (0 for a single run).
type Source struct {
	Dir   string
	Shift time.Duration
}

// CheckSources judges the ledgers of several run directories (the segments
// of one split run) as one run: their records are read as if one
// generator had written them, each moved by its Shift, and the latency
// histograms are built from every record, never from the segments'
// percentiles.
func CheckSources(srcs []Source) (*Verdict, error) { return CheckSourcesWith(srcs, Options{}) }

// CheckSourcesWith is CheckSources, and reports in Verdict.Followed what
// became of the messages opts.Follow names, and judges refused-after-heal
// by opts.Liveness (a negative bound is an error).
func CheckSourcesWith(srcs []Source, opts Options) (*Verdict, error) {
	if l := opts.Liveness; l != nil && l.Bound < 0 {
		return nil, fmt.Errorf("checker: liveness bound %s: want 0 or more", l.Bound)
	}
	ev := newEvidence()
	for _, src := range srcs {
		in, err := ledger.ReadDir(src.Dir, func(_ int, r *ledger.Record) error { r.Shift(src.Shift); ev.ingest(r); return nil })
		ev.shards = append(ev.shards, in...)
		for _, x := range in {
			ev.header(x.Header)
		}
		if err != nil {
			return nil, err
		}
	}
	m := buildModel(ev)
	m.liveness = opts.Liveness
	if l := opts.Liveness; l != nil {
		m.cv.Liveness(l.Healed, l.Bound)
	}
	v := judge(m)
	if len(opts.Follow) > 0 {
		v.Followed = m.fate(opts.Follow)
	}
	for _, in := range ev.shards {
		v.Shards = append(v.Shards, ShardNote{Path: in.Path, Records: in.Records, Bytes: in.Bytes, Truncated: in.Truncated})
		if in.Truncated {
			v.Warnings = append(v.Warnings, fmt.Sprintf("%s is truncated (the run did not close it): read %d records", in.Path, in.Records))
		}
	}
	return v, nil
}
