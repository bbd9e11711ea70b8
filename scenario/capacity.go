package scenario

import (
	"reflect"
	"time"

	"gopkg.in/yaml.v3"

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
//
// slo is the file's own key; the others are the search's settings, which
// decode straight into Config through capacity.Settings (the one
// definition each shares with imlab capacity's flags); a key the file
// leaves out keeps its value in CapacityDefaults.
type CapacitySpec struct {
	SLO string `yaml:"slo" json:"slo"`
	// Config holds the search's settings: CapacityDefaults with what the
	// file set. The run adds the load template, the SLO and the output
	// directory.
	Config capacity.Config `yaml:"-" json:"-"`
}

// CapacityDefaults is the search a file's capacity section starts from:
// capacity's defaults without the rates (from and to are the file's to
// give).
func CapacityDefaults() capacity.Config {
	c := capacity.DefaultConfig("", "", "")
	c.From, c.To = 0, 0
	return c
}

// capacityOwn is CapacitySpec's own keys.
type capacityOwn CapacitySpec

// UnmarshalYAML decodes the search's settings into Config over
// CapacityDefaults, the rest into the file's own keys.
func (c *CapacitySpec) UnmarshalYAML(n *yaml.Node) error {
	o := capacityOwn{}
	cfg := CapacityDefaults()
	if err := capacity.Settings().DecodeYAML(n, &cfg, &o); err != nil {
		return err
	}
	o.Config = cfg
	*c = CapacitySpec(o)
	return nil
}

// MarshalJSON writes the slo and every setting that differs from
// CapacityDefaults, as the file writes them.
func (c CapacitySpec) MarshalJSON() ([]byte, error) {
	def := CapacityDefaults()
	o := capacityOwn(c)
	return capacity.Settings().EncodeJSON(&c.Config, &def, &o)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *CapacitySpec) UnmarshalJSON(b []byte) error {
	o := capacityOwn{}
	if err := capacity.Settings().DecodeJSON(b, &o.Config, CapacityDefaults(), &o); err != nil {
		return err
	}
	*c = CapacitySpec(o)
	return nil
}

// yamlKeys are the section's keys with the type each is written as.
func (CapacitySpec) yamlKeys() map[string]reflect.Type {
	keys := yamlFields(reflect.TypeFor[capacityOwn]())
	for k, t := range capacity.Settings().KeyTypes() {
		keys[k] = t
	}
	return keys
}

// Search is the capacity.Config of the spec over the load template lc.
// The pacer's precision is the search's, as with imlab capacity: the
// runtime's timers, late past capacity.DefaultLateAfter (a capacity
// step does not need the kernel sleep before each send that the load
// section's spin_window gives a run: with imlab load's GOMAXPROCS it cost
// a seventh of the generator's CPU per message); the rest of the pacer is
// the file's.
func (c *CapacitySpec) Search(lc loadgen.Config, outDir string) (capacity.Config, error) {
	cfg := c.Config
	lc.Pacer.SpinWindow, lc.Pacer.LateAfter = cfg.Load.Pacer.SpinWindow, cfg.Load.Pacer.LateAfter
	cfg.Load, cfg.OutDir, cfg.Check = lc, outDir, true
	slo, err := capacity.ParseSLO(c.SLO)
	if err != nil {
		return cfg, err
	}
	cfg.SLO = slo
	return cfg, nil
}

// Bound is the longest the search can take: every step to its deadline
// (warm-up + step + grace + settle + drain + margin), cool-down and
// the wait for the backlog to drain.
func (c *CapacitySpec) Bound(l LoadSpec) time.Duration {
	cfg := c.Config
	perStep := cfg.WarmUp + cfg.Step + l.Config.Pacer.Grace + l.Config.Settle + l.Config.DrainTimeout + 15*time.Second + cfg.CoolDown + cfg.SettleMax
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
	if f.Load.Rate != "" || f.Load.Config.Duration != 0 || f.Load.Segments > 1 {
		return Bad("load", "kind capacity: the search sets each step's rate and length: leave out load.rate, load.duration and load.segments")
	}
	if f.Load.Config.Pacer.SpinWindow != schedule.DefaultConfig().SpinWindow {
		return Bad("load.spin_window", "kind capacity: the search paces on the runtime's timers, late past %s: leave load.spin_window out (imlab capacity --spin sets it for a search run by hand)", capacity.DefaultLateAfter)
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
