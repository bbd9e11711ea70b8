package scenarios

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
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

// CapacityDir is where a capacity scenario's search writes its own
// result.json, report.html and steps/ (inside the run's directory).
const CapacityDir = "capacity"

// CapacityCheck and StepsVerdictCheck are the checks of a capacity run.
const (
	CapacityCheck     = "min_sustainable"
	StepsVerdictCheck = "verdict"
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
func (c *CapacitySpec) search(lc loadgen.Config, outDir string) (capacity.Config, error) {
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
// (warm-up + step + grace + settle + drain + margin) and cool-down.
func (c *CapacitySpec) bound(l LoadSpec) time.Duration {
	cfg, err := c.search(loadgen.DefaultConfig("", "", ""), "-")
	if err != nil {
		return 0
	}
	perStep := cfg.WarmUp + cfg.Step + loadgen.DefaultConfig("", "", "").Pacer.Grace + l.SettleOr() + l.DrainTimeoutOr() + 15*time.Second + cfg.CoolDown
	return cfg.CeilingFor + time.Duration(cfg.MaxSteps)*perStep
}

func (c *CapacitySpec) validate(f *File) error {
	if c == nil {
		return bad("capacity", "kind capacity needs a capacity: block (slo, from, to, ...)")
	}
	lc := loadgen.DefaultConfig("http://127.0.0.1:1", "validate-only-secret-0123456789", "")
	lc.Shape, lc.Duration = schedule.Constant{PerSec: 1}, time.Second
	cfg, err := c.search(lc, "validate")
	if err != nil {
		return bad("capacity.slo", "%v", err)
	}
	if err := cfg.Validate(); err != nil {
		return bad("capacity", "%v", err)
	}
	if len(f.Faults) > 0 {
		return bad("faults", "a capacity search runs no faults (each step must see the same set-up)")
	}
	if f.Load.Rate != "" || f.Load.Duration != 0 || f.Load.Segments > 1 {
		return bad("load", "kind capacity: the search sets each step's rate and length: leave out load.rate, load.duration and load.segments")
	}
	if total := c.bound(f.Load); total > MaxScenarioDuration {
		return bad("capacity", "max_steps x (warm_up + step + settle + drain_timeout + margin) = %s: at most %s", total, MaxScenarioDuration)
	}
	e := f.Expect
	rest := e
	rest.MinSustainable = nil
	if rest.Verdict == VerdictValid {
		rest.Verdict = ""
	}
	if rest != (ExpectSpec{}) {
		return bad("expect", "kind capacity: only min_sustainable (every step's verdict must be valid)")
	}
	if e.MinSustainable == nil {
		return bad("expect.min_sustainable", "kind capacity needs the lowest sustainable rate it must find (sends/s)")
	}
	if *e.MinSustainable < 0 {
		return bad("expect.min_sustainable", "%g: want >= 0", *e.MinSustainable)
	}
	return nil
}

// CapacitySummary is what a capacity run found (the whole search is in
// CAPACITY_DIR/result.json).
type CapacitySummary struct {
	Result      string   `json:"result"`
	Answer      string   `json:"answer"`
	SLO         string   `json:"slo"`
	Sustainable *float64 `json:"sustainable_per_sec"`
	Broke       *float64 `json:"broke_per_sec"`
	Knee        *float64 `json:"knee_per_sec"`
	Limit       string   `json:"limit,omitempty"`
	Steps       int      `json:"steps"`
	// Checked and Invalid count the steps the checker judged and those it
	// found INVALID (messages lost, duplicated, ...).
	Checked int                `json:"checked_steps"`
	Invalid int                `json:"invalid_steps"`
	Cost    map[string]float64 `json:"cpu_us_per_msg_at_sustainable,omitempty"`
}

// watched are the processes of the run whose CPU the search reads: every
// exec process (its own OS process); an in-process one runs inside the
// runner, which is the generator too, so its CPU is the generator's (a
// note says so).
func (r *run) watched() ([]capacity.Proc, []string) {
	var ps []capacity.Proc
	var in []string
	for _, s := range r.procs {
		if pid := s.current().pid(); pid > 0 {
			ps = append(ps, capacity.Proc{Name: s.name + "[" + strings.Join(s.roles(), ",") + "]", PID: pid})
		} else {
			in = append(in, s.name)
		}
	}
	var notes []string
	if len(in) > 0 {
		notes = append(notes, fmt.Sprintf("processes %s run inside the runner: their CPU is counted with the generator's (exec: true gives a process its own figures)", strings.Join(in, ", ")))
	}
	if r.f.Backends.Mode != "local" {
		notes = append(notes, "the databases' CPU is not watched: the run's MySQL and Redis are shared with other clients (or embedded in the runner); imlab capacity --proc reads them by name")
	}
	return ps, notes
}

// executeCapacity runs the file's capacity search against the started
// topology and evaluates it.
func (r *run) executeCapacity(ctx context.Context, lc loadgen.Config) error {
	out := filepath.Join(r.cfg.OutDir, CapacityDir)
	cfg, err := r.f.Capacity.search(lc, out)
	if err != nil {
		return fmt.Errorf("%w: capacity: %w", ErrInvalid, err)
	}
	cfg.Procs, cfg.Notes = r.watched()
	cfg.Progress = r.cfg.Progress
	r.res.TimeBase = time.Now().UTC()
	res, err := capacity.Search(ctx, cfg)
	if res == nil {
		return fmt.Errorf("scenarios: capacity: %w", err)
	}
	r.res.Errors = append(r.res.Errors, res.Errors...)
	r.res.Errors = append(r.res.Errors, res.Notes...)
	sum := &CapacitySummary{Result: filepath.Join(out, capacity.ResultFile), Answer: res.Answer, SLO: res.SLO,
		Sustainable: res.Sustainable, Broke: res.Broke, Knee: res.Knee, Limit: res.Limit, Steps: len(res.Steps), Cost: res.Cost}
	for _, st := range res.Steps {
		if st.Valid != nil {
			sum.Checked++
			if !*st.Valid {
				sum.Invalid++
			}
		}
	}
	r.res.Capacity = sum
	r.setting("capacity_answer", res.Answer)
	r.setting("capacity_report", filepath.Join(CapacityDir, capacity.ReportFile)+" (the curves, every step, the cost per message)")
	if err != nil {
		return fmt.Errorf("scenarios: capacity: %w", err)
	}
	r.res.Checks = evaluateCapacity(r.f.Expect, sum)
	return nil
}

// evaluateCapacity: the sustainable rate reached min_sustainable, and no
// step the checker judged was INVALID (a rate at which messages were lost
// is a failure of the set-up, whether or not the search went past it).
func evaluateCapacity(e ExpectSpec, s *CapacitySummary) []Check {
	got := "no rate held the SLO twice"
	if s.Sustainable != nil {
		got = fmt.Sprintf("%.0f/s", *s.Sustainable)
	}
	switch s.Limit {
	case "":
	case "to":
		got += " (the search's upper bound held)"
	default:
		got += " (" + s.Limit + "'s limit)"
	}
	checks := []Check{{Name: CapacityCheck, Want: fmt.Sprintf(">= %g/s within %s", *e.MinSustainable, s.SLO), Got: got,
		OK: s.Sustainable != nil && *s.Sustainable >= *e.MinSustainable}}
	checks = append(checks, Check{Name: StepsVerdictCheck, Want: "VALID on every step the checker judged (at least one)",
		Got: fmt.Sprintf("%d of %d checked steps INVALID", s.Invalid, s.Checked), OK: s.Invalid == 0 && s.Checked > 0})
	return checks
}

// roles are the slot's process's roles as the file names them.
func (s *procSlot) roles() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.spec.Process.Roles)
}
