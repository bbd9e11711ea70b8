package scenario

import (
	"reflect"
	"time"

	"imlab/capacity"
	"imlab/loadgen"
	"imlab/loadgen/schedule"
)

// File kinds.
const (
	// KindRun (the default) is one load run with faults, checked and
	// evaluated against expect.
	KindRun = "run"
	// KindCapacity is a capacity search (package capacity) against the
	// topology the file starts: backends, policy and processes as any
	// scenario; the search's steps replace the load's rate and duration.
	KindCapacity = "capacity"
)

// CapacitySpec is the search of a `kind: capacity` file:
//
//	kind: capacity
//	capacity:
//	  slo: 'ack_p99<=500ms,errors<=0.1%'
//	  from: 50          # sends/s
//	  to: 800
//	  step: 3s          # measured, whole seconds
//	  warm_up: 1s       # not counted
//	expect:
//	  min_sustainable: 100
//
// Every step runs the checker on its ledger and counts only with a valid
// verdict (capacity.Config.Check); the search ends with a repeat of the
// highest rate that held, and only a rate that held twice is the
// sustainable rate.
type CapacitySpec struct {
	SLO        string    `yaml:"slo" json:"slo"`
	From       float64   `yaml:"from" json:"from"`
	To         float64   `yaml:"to" json:"to"`
	Growth     float64   `yaml:"growth,omitempty" json:"growth,omitempty"`
	Resolution float64   `yaml:"resolution,omitempty" json:"resolution,omitempty"`
	WarmUp     Duration  `yaml:"warm_up,omitempty" json:"warm_up,omitempty"`
	Step       Duration  `yaml:"step,omitempty" json:"step,omitempty"`
	MaxSteps   int       `yaml:"max_steps,omitempty" json:"max_steps,omitempty"`
	CoolDown   *Duration `yaml:"cool_down,omitempty" json:"cool_down,omitempty"`
	// Ceiling measures the generator's own ceiling this long first
	// (default 2s; 0s: not measured).
	Ceiling *Duration `yaml:"ceiling,omitempty" json:"ceiling,omitempty"`
}

// search is the capacity.Config of the spec over the load template lc
// (everything the spec leaves out is capacity's default).
func (c *CapacitySpec) Search(lc loadgen.Config, outDir string) (capacity.Config, error) {
	cfg := capacity.DefaultConfig(lc.Target, lc.Secret, outDir)
	cfg.Load = lc
	slo, err := capacity.ParseSLO(c.SLO)
	if err != nil {
		return cfg, err
	}
	cfg.SLO, cfg.From, cfg.To = slo, c.From, c.To
	if c.Growth != 0 {
		cfg.Growth = c.Growth
	}
	if c.Resolution != 0 {
		cfg.Resolution = c.Resolution
	}
	if c.WarmUp != 0 {
		cfg.WarmUp = c.WarmUp.D()
	}
	if c.Step != 0 {
		cfg.Step = c.Step.D()
	}
	if c.MaxSteps != 0 {
		cfg.MaxSteps = c.MaxSteps
	}
	if c.CoolDown != nil {
		cfg.CoolDown = c.CoolDown.D()
	}
	if c.Ceiling != nil {
		cfg.CeilingFor = c.Ceiling.D()
	}
	cfg.Check = true
	return cfg, nil
}

// bound is the longest the search can take: every step to its deadline
// (warm-up + step + grace + settle + drain + margin), cool-down and
// the wait for the backlog to drain.
func (c *CapacitySpec) Bound(l LoadSpec) time.Duration {
	cfg, err := c.Search(loadgen.DefaultConfig("", "", ""), "-")
	if err != nil {
		return 0
	}
	perStep := cfg.WarmUp + cfg.Step + loadgen.DefaultConfig("", "", "").Pacer.Grace + l.SettleOr() + l.DrainTimeoutOr() + 15*time.Second + cfg.CoolDown + cfg.SettleMax
	return cfg.CeilingFor + time.Duration(cfg.MaxSteps)*perStep
}

func (c *CapacitySpec) validate(f *File) error {
	if c == nil {
		return Bad("capacity", "kind capacity needs a capacity: block (slo, from, to, ...)")
	}
	lc := loadgen.DefaultConfig("http://127.0.0.1:1", "validate-only-secret-0123456789", "")
	lc.Shape, lc.Duration = schedule.Constant{PerSec: 1}, time.Second
	cfg, err := c.Search(lc, "validate")
	if err != nil {
		return Bad("capacity.slo", "%v", err)
	}
	if err := cfg.Validate(); err != nil {
		return Bad("capacity", "%v", err)
	}
	if len(f.Faults) > 0 {
		return Bad("faults", "a capacity search runs no faults (each step must see the same set-up)")
	}
	if f.Load.Rate != "" || f.Load.Duration != 0 || f.Load.Segments > 1 {
		return Bad("load", "kind capacity: the search sets each step's rate and length: leave out load.rate, load.duration and load.segments")
	}
	if total := c.Bound(f.Load); total > MaxScenarioDuration {
		return Bad("capacity", "max_steps x (warm_up + step + settle + drain_timeout + margin) = %s: at most %s", total, MaxScenarioDuration)
	}
	e := f.Expect
	rest := e
	rest.MinSustainable = nil
	if len(rest.Findings) > 0 {
		return Bad("expect.findings", "kind capacity: only min_sustainable (every step's verdict must be valid)")
	}
	rest.Findings = nil
	if rest.Verdict == VerdictValid {
		rest.Verdict = ""
	}
	if !reflect.DeepEqual(rest, ExpectSpec{}) {
		return Bad("expect", "kind capacity: only min_sustainable (every step's verdict must be valid)")
	}
	if e.MinSustainable == nil {
		return Bad("expect.min_sustainable", "kind capacity needs the lowest sustainable rate it must find (sends/s)")
	}
	if *e.MinSustainable < 0 {
		return Bad("expect.min_sustainable", "%g: want >= 0", *e.MinSustainable)
	}
	return nil
}
