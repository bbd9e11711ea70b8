// Package cpuline samples, once a second through a scenario run, the CPU
// each process of the run used and the machine's busy CPU (Linux /proc),
// into the run's CPU timeline (result.CPULine): who had the machine's
// cores in each second of the load and of the recovery after it.
//
// It owns the sampling goroutine's loop and the arithmetic from CPU times
// to cores per second. It must not decide which processes belong to the
// run (its caller's Targets does, at every tick: a restarted process is
// read under its new pid) and must not judge anything: the timeline is
// evidence beside the run's figures, never a check.
//
// A process is measured in a second when it was read at both ends of it
// under the same pid and start time; otherwise (not running, unreadable,
// or first seen in that second) it is missing from the second: unknown,
// never 0.
package cpuline

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"imlab/internal/proccpu"
	"imlab/result"
)

// Target is one process to read at a tick.
type Target struct {
	Name string
	PID  int
	// Found: how it was found when not by its pid ("by name").
	Found string
}

// Config tunes a sampler.
type Config struct {
	// Interval between samples (default 1 s; at least 100 ms).
	Interval time.Duration
	// Targets lists the processes to read, called at every tick from
	// the sampler's goroutine (it must be safe for that).
	Targets func() []Target
	// MaxSeconds bounds the timeline (default result.MaxCPUSeconds).
	MaxSeconds int
	// Notes are carried into the timeline (what is not read, what a line
	// holds besides its process).
	Notes []string
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.Targets == nil:
		return fmt.Errorf("cpuline: no Targets")
	case c.Interval != 0 && c.Interval < 100*time.Millisecond:
		return fmt.Errorf("cpuline: Interval %v: at least 100ms", c.Interval)
	case c.MaxSeconds < 0 || c.MaxSeconds > result.MaxCPUSeconds:
		return fmt.Errorf("cpuline: MaxSeconds %d: want 0..%d", c.MaxSeconds, result.MaxCPUSeconds)
	}
	return nil
}

// reading is one process's CPU time at a tick.
type reading struct {
	cpu   time.Duration
	start uint64
}

// Run samples until ctx ends (or MaxSeconds samples), from the caller's
// goroutine, and returns the timeline; T counts from base.
func Run(ctx context.Context, cfg Config, base time.Time) (*result.CPULine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	interval := cfg.Interval
	if interval == 0 {
		interval = time.Second
	}
	limit := cfg.MaxSeconds
	if limit == 0 {
		limit = result.MaxCPUSeconds
	}
	line := &result.CPULine{CPUs: runtime.NumCPU(), Notes: slices.Clone(cfg.Notes)}
	s := sampler{line: line, last: map[int]reading{}, known: map[string]int{}}
	s.tick(time.Now(), base, cfg.Targets(), false)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return line, nil
		case now := <-t.C:
			if len(line.Seconds) >= limit {
				line.Notes = append(line.Notes, fmt.Sprintf("sampling stopped after %d samples (MaxSeconds)", limit))
				return line, nil
			}
			s.tick(now, base, cfg.Targets(), true)
		}
	}
}

// sampler turns readings at two ticks into a second of the timeline.
type sampler struct {
	line    *result.CPULine
	at      time.Time        // the previous tick
	machine *proccpu.Machine // at the previous tick (nil: not read)
	last    map[int]reading  // pid -> at the previous tick
	known   map[string]int   // name -> index in line.Procs
}

// tick reads every target and the machine; record adds the second that
// ends now (not at the first tick, which only sets the baseline).
func (s *sampler) tick(now, base time.Time, targets []Target, record bool) {
	elapsed := now.Sub(s.at)
	sec := result.CPUSecond{T: now.Sub(base).Seconds(), Cores: map[string]float64{}}
	next := make(map[int]reading, len(targets))
	for _, tg := range targets {
		if tg.PID <= 0 {
			continue
		}
		cpu, start, err := proccpu.Stat(tg.PID)
		if err != nil {
			continue
		}
		next[tg.PID] = reading{cpu, start}
		s.proc(tg)
		if prev, ok := s.last[tg.PID]; ok && prev.start == start && elapsed > 0 {
			sec.Cores[tg.Name] = cores(cpu-prev.cpu, elapsed)
		}
	}
	m, err := proccpu.ReadMachine()
	if err == nil && s.machine != nil && elapsed > 0 {
		busy := cores(m.Busy-s.machine.Busy, elapsed)
		sec.Machine = &busy
	}
	s.machine = nil
	if err == nil {
		s.machine = &m
	}
	s.last, s.at = next, now
	if record {
		s.line.Seconds = append(s.line.Seconds, sec)
	}
}

// cores is CPU time over a wall-clock span in cores, to a thousandth (the
// kernel counts CPU time in 10 ms ticks: finer digits are noise).
func cores(cpu, over time.Duration) float64 {
	return math.Round(cpu.Seconds()/over.Seconds()*1000) / 1000
}

// proc records a target's line (its name once, each of its pids).
func (s *sampler) proc(tg Target) {
	i, ok := s.known[tg.Name]
	if !ok {
		i = len(s.line.Procs)
		s.known[tg.Name] = i
		s.line.Procs = append(s.line.Procs, result.CPUProc{Name: tg.Name, Found: tg.Found})
	}
	if p := &s.line.Procs[i]; !slices.Contains(p.PIDs, tg.PID) {
		p.PIDs = append(p.PIDs, tg.PID)
	}
}
