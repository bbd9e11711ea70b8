package summary

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// LabCPU is what the generator's own process used of the machine's CPU
// while it sent (the measured window: from the schedule's start to its
// last send), from getrusage(2) of this process: user + system time of
// every thread (the generator's devices, ledger and live line included;
// in a scenario run also whatever else runs inside the runner: InProcess
// names it). A figure the lab could not read is absent (nil), never 0.
type LabCPU struct {
	// CPUSeconds: this process's CPU time in the window.
	CPUSeconds float64 `json:"cpu_s"`
	// WindowSeconds: the window's wall time.
	WindowSeconds float64 `json:"window_s"`
	// CPUs: the machine's CPUs (runtime.NumCPU).
	CPUs int `json:"cpus"`
	// Share: CPUSeconds over CPUs x WindowSeconds, the fraction of the
	// machine's CPU the generator took (1 = every core, the whole window).
	Share float64 `json:"share"`
	// OverHalf: the generator took more than half of the machine's CPU:
	// the target had less than half of the machine.
	OverHalf bool `json:"over_half,omitempty"`
	// InProcess names the other parts of the run inside the generator's
	// process (a scenario run's in-process server processes, embedded
	// backends, in-process Kafka, fault proxies; loadgen.Config.InProcess): the
	// figure is theirs too, and the generator's own share is not
	// separable from it. Empty: the generator was alone in its process.
	InProcess []string `json:"in_process,omitempty"`
}

// String is "generator used N% of the machine's CPU during the measured
// window", labelled when over half. When other parts of the run shared
// the process (InProcess) it says the figure is the whole process's:
// "the runner process (the generator and, inside it, ...) used N%".
func (l *LabCPU) String() string {
	if l == nil {
		return "generator's share of the machine's CPU during the measured window: unknown"
	}
	who := "generator"
	if len(l.InProcess) > 0 {
		who = "the runner process (the generator and, inside it, " + strings.Join(l.InProcess, ", ") + ")"
	}
	s := fmt.Sprintf("%s used %.0f%% of the machine's CPU during the measured window (%.2f CPU-s in %.1f s on %d CPUs)",
		who, l.Share*100, l.CPUSeconds, l.WindowSeconds, l.CPUs)
	if len(l.InProcess) > 0 {
		s += ": the generator's own share is not separable"
	}
	if l.OverHalf {
		s += ": MORE THAN HALF, the target had less than half of the machine"
	}
	return s
}

// CPUMark is this process's CPU time at a moment.
type CPUMark struct {
	at  time.Time
	cpu time.Duration
	ok  bool
}

// MarkCPU reads this process's CPU time now.
func MarkCPU() CPUMark {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return CPUMark{}
	}
	return CPUMark{at: time.Now(), cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ok: true}
}

// CPUShare is the share between two marks; nil when either was not read or
// the window is empty.
func CPUShare(m0, m1 CPUMark) *LabCPU {
	wall := m1.at.Sub(m0.at)
	if !m0.ok || !m1.ok || wall <= 0 {
		return nil
	}
	l := &LabCPU{CPUSeconds: (m1.cpu - m0.cpu).Seconds(), WindowSeconds: wall.Seconds(), CPUs: runtime.NumCPU()}
	l.Share = l.CPUSeconds / (float64(l.CPUs) * l.WindowSeconds)
	l.OverHalf = l.Share > 0.5
	return l
}
