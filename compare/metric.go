package compare

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Better says which way a metric improves.
type Better int

// Directions.
const (
	Lower Better = iota
	Higher
)

func (b Better) String() string {
	if b == Higher {
		return "higher"
	}
	return "lower"
}

// Rule is how a metric is judged beyond its direction and tolerance.
type Rule int

// Rules.
const (
	// Measured: a noisy measurement (latency, rate, lag): medians, the
	// U test when the runs allow it, and the tolerance.
	Measured Rule = iota
	// Safety: a count of checker findings; any finding in a new run where
	// every base run had none is a regression (never noise).
	Safety
	// MustHold: 1 when a run held it, 0 when not; any new run at 0 fails.
	MustHold
)

// Def describes one metric.
type Def struct {
	Name   string
	Unit   string // ms, s, /s, ratio, count, bool
	Better Better
	Rule   Rule
	// Tol is the default tolerance.
	Tol  Tolerance
	Desc string
}

// Tolerance is an allowed worsening: Rel of the base centre (0.10 = 10%)
// or Abs in the metric's unit, whichever is larger.
type Tolerance struct {
	Rel float64
	Abs float64
}

// Allowed is the worsening tolerated from base.
func (t Tolerance) Allowed(base float64) float64 {
	if base < 0 {
		base = -base
	}
	return max(t.Rel*base, t.Abs)
}

func (t Tolerance) String() string { return t.In("") }

// In writes the tolerance with the metric's unit (a ratio's absolute
// part in percentage points).
func (t Tolerance) In(unit string) string {
	abs := fmt.Sprintf("%g%s", t.Abs, unit)
	if unit == "ratio" {
		abs = fmt.Sprintf("%gpp", t.Abs*100)
	}
	switch {
	case t.Rel > 0 && t.Abs > 0:
		return fmt.Sprintf("%g%% or %s", t.Rel*100, abs)
	case t.Abs > 0:
		return abs
	default:
		return fmt.Sprintf("%g%%", t.Rel*100)
	}
}

// Metric names shared by several formats.
const (
	MRate    = "rate"    // ACKed sends per second over the load phase
	MAckP50  = "ack_p50" // ACK latency from intended send time, ms
	MAckP99  = "ack_p99"
	MAckP999 = "ack_p999"
	ME2EP99  = "e2e_p99" // intended send -> a recipient device stored it, ms
	MErrors  = "errors"  // (fail + unknown) / attempts
	MUnknown = "unknown" // unknown / attempts
	MLag     = "lag"     // largest consumer lag age seen, s
	MVerdict = "verdict" // the scenario's verdict check held
	MPassed  = "passed"  // every check of the scenario held
	// MWithinLoad: the load run was not OVERLOADED (loadgen's outcome:
	// failed + unknown sends within its stated fraction).
	MWithinLoad = "within_load"
	// Recovery outcomes of a scenario with Kafka (recovery):
	// only what the run achieved is compared, never its settings (from_s,
	// bound_s, hold_s, deadline_s) nor its sample counts.
	//
	// MRecovery is the time to recover (s) after a burst or a fault's
	// heal; MRecoveryBacklog the peak records behind on the way (summed
	// over the groups in one sample).
	MRecovery        = "recovery"
	MRecoveryBacklog = "recovery_backlog"
	// MDrainRate is the slowest consumer group's mean drain rate (records
	// per second) over its drain window; MDrainRows the inbox rows written
	// per second over the run's drain window.
	MDrainRate = "recovery_drain_rate"
	MDrainRows = "recovery_drain_rows"
	// MPeakLagAge and MPeakLagRecords: the largest lag age (s) and records
	// behind of any group over the timeline.
	MPeakLagAge     = "recovery_peak_lag_age"
	MPeakLagRecords = "recovery_peak_lag_records"
	// MOutboxPeak is the outbox backlog's peak (rows); MOutboxDrain the
	// time it took to drain (s), policy outbox only.
	MOutboxPeak  = "outbox_peak"
	MOutboxDrain = "outbox_drain"
	// Capacity search results.
	MSustainable = "sustainable_rate"
	MKnee        = "knee_rate"
)

// FindingDef is a checker finding as a Safety metric: a count of distinct
// messages, any where every base run had none a regression.
func FindingDef(name string) Def {
	return Def{Name: name, Unit: "count", Rule: Safety, Tol: Tolerance{Rel: 1}, Desc: "checker finding: distinct messages " + name}
}

// SafetyFindings are the checker's findings every scenario result names
// (the help lists them); any other finding a file names is compared the
// same way (Run.Findings).
var SafetyFindings = []string{"lost", "skipped", "unexpected", "reordered", "duplicated",
	"lost-in-store", "unstored-at-ack", "double-stored", "seq-conflict", "ack-mismatch"}

var (
	latencyTol = Tolerance{Rel: 0.10, Abs: 1}
	defs       = map[string]Def{
		MRate:            {Name: MRate, Unit: "/s", Better: Higher, Tol: Tolerance{Rel: 0.05}, Desc: "ACKed sends per second"},
		MAckP50:          {Name: MAckP50, Unit: "ms", Tol: latencyTol, Desc: "ACK latency p50 from intended send time"},
		MAckP99:          {Name: MAckP99, Unit: "ms", Tol: latencyTol, Desc: "ACK latency p99 from intended send time"},
		MAckP999:         {Name: MAckP999, Unit: "ms", Tol: latencyTol, Desc: "ACK latency p99.9 from intended send time"},
		ME2EP99:          {Name: ME2EP99, Unit: "ms", Tol: latencyTol, Desc: "intended send to a recipient's device, p99"},
		MErrors:          {Name: MErrors, Unit: "ratio", Tol: Tolerance{Abs: 0.001}, Desc: "failed + unknown sends / attempts"},
		MUnknown:         {Name: MUnknown, Unit: "ratio", Tol: Tolerance{Abs: 0.001}, Desc: "unknown sends / attempts"},
		MLag:             {Name: MLag, Unit: "s", Tol: Tolerance{Rel: 0.20, Abs: 0.1}, Desc: "largest consumer lag age seen"},
		MVerdict:         {Name: MVerdict, Unit: "bool", Better: Higher, Rule: MustHold, Desc: "the checker's verdict is the expected one"},
		MPassed:          {Name: MPassed, Unit: "bool", Better: Higher, Rule: MustHold, Desc: "every check of the scenario held"},
		MWithinLoad:      {Name: MWithinLoad, Unit: "bool", Better: Higher, Rule: MustHold, Desc: "the load run was not OVERLOADED"},
		MRecovery:        {Name: MRecovery, Unit: "s", Tol: Tolerance{Rel: 0.20, Abs: 0.1}, Desc: "time to recover after the burst or the last heal"},
		MRecoveryBacklog: {Name: MRecoveryBacklog, Unit: "count", Tol: Tolerance{Rel: 0.20}, Desc: "peak records behind during the recovery"},
		MDrainRate:       {Name: MDrainRate, Unit: "/s", Better: Higher, Tol: Tolerance{Rel: 0.20}, Desc: "slowest consumer group's mean drain rate (records/s)"},
		MDrainRows:       {Name: MDrainRows, Unit: "/s", Better: Higher, Tol: Tolerance{Rel: 0.20}, Desc: "inbox rows written per second while draining"},
		MPeakLagAge:      {Name: MPeakLagAge, Unit: "s", Tol: Tolerance{Rel: 0.20, Abs: 0.1}, Desc: "largest lag age of any group over the run"},
		MPeakLagRecords:  {Name: MPeakLagRecords, Unit: "count", Tol: Tolerance{Rel: 0.20}, Desc: "largest records behind of any group over the run"},
		MOutboxPeak:      {Name: MOutboxPeak, Unit: "count", Tol: Tolerance{Rel: 0.20}, Desc: "outbox backlog peak (rows)"},
		MOutboxDrain:     {Name: MOutboxDrain, Unit: "s", Tol: Tolerance{Rel: 0.20, Abs: 0.1}, Desc: "time the outbox backlog took to drain"},
		MSustainable:     {Name: MSustainable, Unit: "/s", Better: Higher, Tol: Tolerance{Rel: 0.05}, Desc: "highest rate that held the SLO (confirmed)"},
		MKnee:            {Name: MKnee, Unit: "/s", Better: Higher, Tol: Tolerance{Rel: 0.10}, Desc: "rate where ACK p99 starts to climb"},
	}
)

// Lookup returns the definition of a metric name (recovery.* and the
// safety findings included) and whether it is known.
func Lookup(name string) (Def, bool) {
	if d, ok := defs[name]; ok {
		return d, true
	}
	if slices.Contains(SafetyFindings, name) {
		return FindingDef(name), true
	}
	if name == "cpu_us_per_msg" || strings.HasPrefix(name, "cpu_us_per_msg.") {
		return Def{Name: name, Unit: "µs", Tol: Tolerance{Rel: 0.15, Abs: 1}, Desc: "CPU-µs per ACKed message at the sustainable rate"}, true
	}
	return Def{}, false
}

// Names lists the fixed metric names (cpu_us_per_msg.* and the findings
// aside), sorted.
func Names() []string {
	var out []string
	for n := range defs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// group is the tolerance key a metric answers to besides its own name
// (cpu_us_per_msg.generator answers to "cpu_us_per_msg").
func group(name string) string {
	if i := strings.IndexByte(name, '.'); i > 0 {
		return name[:i]
	}
	return ""
}
