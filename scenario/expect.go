package scenario

import (
	"time"
)

// ExpectSpec are the pass/fail thresholds. A nil pointer is not checked.
type ExpectSpec struct {
	// Verdict: valid (default) or invalid (a negative control).
	Verdict string `yaml:"verdict,omitempty" json:"verdict,omitempty"`
	// Maxima of the checker's findings (distinct messages).
	MaxLost       *uint64 `yaml:"max_lost,omitempty" json:"max_lost,omitempty"`
	MaxSkipped    *uint64 `yaml:"max_skipped,omitempty" json:"max_skipped,omitempty"`
	MaxUnexpected *uint64 `yaml:"max_unexpected,omitempty" json:"max_unexpected,omitempty"`
	MaxReordered  *uint64 `yaml:"max_reordered,omitempty" json:"max_reordered,omitempty"`
	MaxDuplicated *uint64 `yaml:"max_duplicated,omitempty" json:"max_duplicated,omitempty"`
	// MinLost: a negative control must catch at least this many losses.
	MinLost *uint64 `yaml:"min_lost,omitempty" json:"min_lost,omitempty"`
	// MinSustainable (kind capacity only): the search must find at least
	// this sustainable rate (sends/s, held twice within the SLO).
	MinSustainable *float64 `yaml:"min_sustainable,omitempty" json:"min_sustainable,omitempty"`
	// MaxAckP99 bounds the p99 of the send response time (ACK latency
	// from the intended send time, coordinated-omission free).
	MaxAckP99 *Duration `yaml:"max_ack_p99,omitempty" json:"max_ack_p99,omitempty"`
	// MinRateRatio: achieved sends/s over the shape's mean rate.
	MinRateRatio *float64 `yaml:"min_rate_ratio,omitempty" json:"min_rate_ratio,omitempty"`
	// MaxLagAge bounds the consumer lag age (oldest unprocessed message,
	// any group and partition) seen by the lag poller.
	MaxLagAge *Duration `yaml:"max_lag_age,omitempty" json:"max_lag_age,omitempty"`
	// MaxSendFailRatio bounds (fail + unknown) / attempts.
	MaxSendFailRatio *float64 `yaml:"max_send_fail_ratio,omitempty" json:"max_send_fail_ratio,omitempty"`
	// MinTruncatedPulls: the truncated answer (past the unread threshold)
	// was served at least this often (from the servers' metrics).
	MinTruncatedPulls *uint64 `yaml:"min_truncated_pulls,omitempty" json:"min_truncated_pulls,omitempty"`
	// MaxRepairs and MinRepairs bound the inbox rows forward
	// reconciliation repaired during the run (rows the pipeline lost, read
	// from the servers' GET /v1/lab/repairs). A scenario about repair
	// asserts min_repairs; any other can assert max_repairs: 0.
	MaxRepairs *uint64 `yaml:"max_repairs,omitempty" json:"max_repairs,omitempty"`
	MinRepairs *uint64 `yaml:"min_repairs,omitempty" json:"min_repairs,omitempty"`
	// DeadLetters bounds and audits the dead-letter topic at the end of the
	// run (see DeadLettersSpec).
	DeadLetters *DeadLettersSpec `yaml:"dead_letters,omitempty" json:"dead_letters,omitempty"`
	// DrainComplete (default true): every device reached the end of its
	// inbox in the final drain.
	DrainComplete *bool `yaml:"drain_complete,omitempty" json:"drain_complete,omitempty"`
	// RecoveryBound (default 1s) is the lag age under which a consumer
	// group counts as caught up, RecoveryHold (default 2s) how long it must
	// stay there (see package recovery for the rule).
	RecoveryBound *Duration `yaml:"recovery_bound,omitempty" json:"recovery_bound,omitempty"`
	RecoveryHold  *Duration `yaml:"recovery_hold,omitempty" json:"recovery_hold,omitempty"`
	// LagRecovered (default true for a file that uses Kafka): every group's
	// lag age was back under the bound, and stayed there, within the drain
	// timeout after the end of the burst or the heal of the last fault.
	LagRecovered *bool `yaml:"lag_recovered,omitempty" json:"lag_recovered,omitempty"`
	// MaxRecovery bounds the recovery time (from the end of the burst or
	// the heal of the last fault until every group is back under the
	// bound for good).
	MaxRecovery *Duration `yaml:"max_recovery,omitempty" json:"max_recovery,omitempty"`
	// MinDrainRate: the slowest group's mean drain rate during recovery,
	// records/s.
	MinDrainRate *float64 `yaml:"min_drain_rate,omitempty" json:"min_drain_rate,omitempty"`
	// MinOfferedRatio (default 0.95) and MaxStartDelay (default 100ms):
	// for a burst shape, generator_kept_up checks that the generator
	// started that share of the sends it intended around the burst and
	// that their start delay p99 stayed under the bound (else the run
	// says the generator fell behind, and fails).
	MinOfferedRatio *float64  `yaml:"min_offered_ratio,omitempty" json:"min_offered_ratio,omitempty"`
	MaxStartDelay   *Duration `yaml:"max_start_delay,omitempty" json:"max_start_delay,omitempty"`
	// Findings the checker must make, each naming at least one message
	// or conversation (a negative control against a server with a known
	// defect; needs verdict: invalid).
	Findings []string `yaml:"findings,omitempty" json:"findings,omitempty"`
}

func (e ExpectSpec) validate() error {
	switch e.Verdict {
	case "", VerdictValid, VerdictInvalid:
	default:
		return Bad("expect.verdict", "%q: want valid or invalid", e.Verdict)
	}
	if e.MaxAckP99 != nil && e.MaxAckP99.D() <= 0 {
		return Bad("expect.max_ack_p99", "%s: want > 0", e.MaxAckP99.D())
	}
	if e.MaxLagAge != nil && e.MaxLagAge.D() <= 0 {
		return Bad("expect.max_lag_age", "%s: want > 0", e.MaxLagAge.D())
	}
	if e.RecoveryBound != nil && (e.RecoveryBound.D() <= 0 || e.RecoveryBound.D() > MaxLatency) {
		return Bad("expect.recovery_bound", "%s: want (0, %s]", e.RecoveryBound.D(), MaxLatency)
	}
	if e.RecoveryHold != nil && (e.RecoveryHold.D() < 0 || e.RecoveryHold.D() > MaxLatency) {
		return Bad("expect.recovery_hold", "%s: want 0..%s", e.RecoveryHold.D(), MaxLatency)
	}
	if e.MaxRecovery != nil && e.MaxRecovery.D() <= 0 {
		return Bad("expect.max_recovery", "%s: want > 0", e.MaxRecovery.D())
	}
	if e.MinDrainRate != nil && !(*e.MinDrainRate > 0 && *e.MinDrainRate <= 1e9) {
		return Bad("expect.min_drain_rate", "%g: want (0, 1e9] records/s", *e.MinDrainRate)
	}
	if e.MinOfferedRatio != nil && (*e.MinOfferedRatio <= 0 || *e.MinOfferedRatio > 1) {
		return Bad("expect.min_offered_ratio", "%g: want (0, 1]", *e.MinOfferedRatio)
	}
	if e.MaxStartDelay != nil && (e.MaxStartDelay.D() <= 0 || e.MaxStartDelay.D() > MaxLatency) {
		return Bad("expect.max_start_delay", "%s: want (0, %s]", e.MaxStartDelay.D(), MaxLatency)
	}
	if e.LagRecovered != nil && !*e.LagRecovered && (e.MaxRecovery != nil || e.MinDrainRate != nil) {
		return Bad("expect.lag_recovered", "false, but max_recovery or min_drain_rate asks for a recovery")
	}
	if e.MinRateRatio != nil && (*e.MinRateRatio <= 0 || *e.MinRateRatio > 1) {
		return Bad("expect.min_rate_ratio", "%g: want (0, 1]", *e.MinRateRatio)
	}
	if e.MaxSendFailRatio != nil && (*e.MaxSendFailRatio < 0 || *e.MaxSendFailRatio > 1) {
		return Bad("expect.max_send_fail_ratio", "%g: want 0..1", *e.MaxSendFailRatio)
	}
	if e.MinLost != nil && *e.MinLost > 0 && e.MaxLost != nil && *e.MaxLost < *e.MinLost {
		return Bad("expect.min_lost", "%d is above expect.max_lost %d", *e.MinLost, *e.MaxLost)
	}
	if e.VerdictOr() == VerdictValid && e.MinLost != nil && *e.MinLost > 0 {
		return Bad("expect.min_lost", "a loss makes the verdict invalid: set expect.verdict: invalid")
	}
	return nil
}

// RecoveryBoundOr is the recovery bound, default 1s.
func (e ExpectSpec) RecoveryBoundOr() time.Duration {
	if e.RecoveryBound == nil {
		return DefaultRecoveryBound
	}
	return e.RecoveryBound.D()
}

// RecoveryHoldOr is the recovery hold, default 2s.
func (e ExpectSpec) RecoveryHoldOr() time.Duration {
	if e.RecoveryHold == nil {
		return DefaultRecoveryHold
	}
	return e.RecoveryHold.D()
}

// MinOfferedRatioOr is the generator's minimum started/intended ratio
// around a burst, default 0.95.
func (e ExpectSpec) MinOfferedRatioOr() float64 {
	if e.MinOfferedRatio == nil {
		return DefaultMinOfferedRatio
	}
	return *e.MinOfferedRatio
}

// MaxStartDelayOr bounds the burst's start delay p99, default 100ms.
func (e ExpectSpec) MaxStartDelayOr() time.Duration {
	if e.MaxStartDelay == nil {
		return DefaultMaxStartDelay
	}
	return e.MaxStartDelay.D()
}

// VerdictOr is the expected verdict, default valid.
func (e ExpectSpec) VerdictOr() string { return Or(e.Verdict, VerdictValid) }
