package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"imlab/capacity"
	"imlab/compose"
	"imlab/expect"
	"imlab/loadgen"
	"imlab/result"
	"imlab/scenario"
)

// CapacityDir is where a capacity scenario's search writes its own
// result.json, report.html and steps/ (inside the run's directory).
const CapacityDir = "capacity"

// watched are the processes of the run whose CPU the search reads: every
// exec process (its own OS process); an in-process one runs inside the
// runner, which is the generator too, so its CPU is the generator's (a
// note says so).
func (r *run) watched() ([]capacity.Proc, []string) {
	var ps []capacity.Proc
	var in []string
	for _, s := range r.procs {
		if pid := s.Current().Pid(); pid > 0 {
			ps = append(ps, capacity.Proc{Name: procLine(s), PID: pid})
		} else {
			in = append(in, s.Name)
		}
	}
	var notes []string
	if len(in) > 0 {
		notes = append(notes, fmt.Sprintf("processes %s run inside the runner: their CPU is counted with the generator's (exec: true gives a process its own figures)", strings.Join(in, ", ")))
	}
	// The run's private mariadbd and redis-server are its own: watched.
	// A shared or embedded one is not (its CPU is other clients' too, or
	// the runner's).
	var shared []string
	var pids map[string]int // none known: both are noted as not watched
	if r.cb != nil {
		pids = r.cb.PIDs
	}
	for _, part := range []string{compose.PartMySQL, compose.PartRedis} {
		if pid := pids[part]; pid > 0 {
			ps = append(ps, capacity.Proc{Name: part + " (private)", PID: pid})
		} else {
			shared = append(shared, part)
		}
	}
	if len(shared) > 0 {
		notes = append(notes, fmt.Sprintf("the CPU of %s is not watched: shared with other clients or embedded in the runner (backends.mode local gives the run private ones, which are watched; imlab capacity --proc reads processes by name)", strings.Join(shared, " and ")))
	}
	return ps, notes
}

// executeCapacity runs the file's capacity search against the started
// topology and evaluates it.
func (r *run) executeCapacity(ctx context.Context, lc loadgen.Config) error {
	out := filepath.Join(r.cfg.OutDir, CapacityDir)
	cfg, err := r.f.Capacity.Search(lc, out)
	if err != nil {
		return fmt.Errorf("%w: capacity: %w", scenario.ErrInvalid, err)
	}
	cfg.Procs, cfg.Notes = r.watched()
	if r.cb != nil {
		cfg.Backends = r.cb.Summary()
	}
	cfg.Progress = r.cfg.Progress
	r.res.TimeBase = time.Now().UTC()
	res, err := capacity.Search(ctx, cfg)
	if res == nil {
		return fmt.Errorf("scenarios: capacity: %w", err)
	}
	r.res.Errors = append(r.res.Errors, res.Errors...)
	r.res.Errors = append(r.res.Errors, res.Notes...)
	for i := range r.res.Settings { // what the steps really ran with, not the load section's pacer
		if r.res.Settings[i].Name == "generator" {
			r.res.Settings[i].Value = generatorSetting(cfg.Load, true, &res.Generator)
		}
	}
	sum := &result.CapacitySummary{Result: filepath.Join(out, capacity.ResultFile), Answer: res.Answer, SLO: res.SLO,
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
	r.res.Checks = expect.EvaluateCapacity(r.f.Expect, sum)
	return nil
}
