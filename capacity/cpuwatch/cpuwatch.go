// Package cpuwatch follows, across a capacity search, the CPU time of the
// processes the search watches and of the whole machine, read at the
// edges of each step's measured window. It owns those readings and each
// pid's lifetime: a process that could not be read once, or whose pid
// comes to name another process (another start time), is gone for the
// rest of the search, so its figures stay unknown (never 0, never another
// process's). It must not decide what the figures mean (cost per message,
// BUSY): that is the capacity package's.
package cpuwatch

import (
	"fmt"
	"sync"
	"time"

	"imlab/internal/proccpu"
)

// Sample is the CPU time of each watched process and of the machine at
// one instant (a process missing from Used could not be read: Errs says
// why; Machine nil: /proc/stat could not be read).
type Sample struct {
	At      time.Time
	Used    map[int]time.Duration
	Errs    map[int]string
	Machine *proccpu.Machine
}

// Watch follows the watched pids over the whole search. Owned by the
// search; Sample is called from loadgen's reporter goroutine, one step at
// a time, under mu.
type Watch struct {
	mu    sync.Mutex
	pids  []int
	start map[int]uint64 // pid -> start time first seen
	gone  map[int]string // pid -> why it is no longer read
}

// New watches pids.
func New(pids []int) *Watch {
	return &Watch{pids: pids, start: map[int]uint64{}, gone: map[int]string{}}
}

// Sample reads every watched process and the machine now.
func (w *Watch) Sample() Sample {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := Sample{At: time.Now(), Used: map[int]time.Duration{}, Errs: map[int]string{}}
	if m, err := proccpu.ReadMachine(); err == nil {
		s.Machine = &m
	}
	for _, pid := range w.pids {
		if why, ok := w.gone[pid]; ok {
			s.Errs[pid] = why
			continue
		}
		d, start, err := proccpu.Stat(pid)
		switch first, seen := w.start[pid]; {
		case err != nil:
			w.gone[pid] = fmt.Sprintf("gone since %s (%v): unknown for the rest of the search", s.At.UTC().Format(time.TimeOnly), err)
		case seen && first != start:
			w.gone[pid] = fmt.Sprintf("pid %d names another process since %s: unknown for the rest of the search", pid, s.At.UTC().Format(time.TimeOnly))
		default:
			w.start[pid] = start
			s.Used[pid] = d
			continue
		}
		s.Errs[pid] = w.gone[pid]
	}
	return s
}

// Rest is the rest of the machine from s0 to s1: the cores its CPUs were
// busy on average beyond what the watched processes used (floored at 0:
// the two are read a moment apart). ok is false when the machine or a
// watched process was not read at both ends, or no time passed: the rest
// is then unknown, never 0.
func Rest(s0, s1 *Sample) (cores float64, ok bool) {
	if s0 == nil || s1 == nil || s0.Machine == nil || s1.Machine == nil || len(s0.Errs)+len(s1.Errs) > 0 {
		return 0, false
	}
	wall := s1.At.Sub(s0.At)
	if wall <= 0 {
		return 0, false
	}
	busy := s1.Machine.Busy - s0.Machine.Busy
	for pid, d := range s1.Used {
		d0, ok := s0.Used[pid]
		if !ok {
			return 0, false
		}
		busy -= d - d0
	}
	return max(0, busy.Seconds()/wall.Seconds()), true
}
