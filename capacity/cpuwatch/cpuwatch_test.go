package cpuwatch

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"imlab/internal/proccpu"
)

// TestRestArithmetic: the rest is the machine's busy time beyond the
// watched processes' over the wall time, floored at 0, and unknown (not
// 0) when the machine or a process was not read at both ends.
func TestRestArithmetic(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s0 := &Sample{At: t0, Used: map[int]time.Duration{1: time.Second, 2: 0}, Errs: map[int]string{}, Machine: &proccpu.Machine{Busy: 10 * time.Second}}
	s1 := &Sample{At: t0.Add(2 * time.Second), Used: map[int]time.Duration{1: 2 * time.Second, 2: 500 * time.Millisecond}, Errs: map[int]string{},
		Machine: &proccpu.Machine{Busy: 13 * time.Second}}
	if r, ok := Rest(s0, s1); !ok || r != 0.75 {
		t.Fatalf("rest %v %v, want (3 s - 1.5 s) / 2 s = 0.75 cores", r, ok)
	}
	s1.Machine.Busy = 11 * time.Second // read a moment before the processes
	if r, ok := Rest(s0, s1); !ok || r != 0 {
		t.Fatalf("rest %v %v, want floored at 0", r, ok)
	}
	noMachine := *s1
	noMachine.Machine = nil
	gone := *s1
	gone.Errs = map[int]string{2: "gone"}
	missing := *s1
	missing.Used = map[int]time.Duration{1: 2 * time.Second, 3: time.Second}
	for name, s := range map[string]*Sample{"no machine": &noMachine, "a process gone": &gone, "a process not read at the start": &missing} {
		if r, ok := Rest(s0, s); ok {
			t.Errorf("%s: rest %v known, want unknown", name, r)
		}
	}
	if _, ok := Rest(s1, s1); ok {
		t.Error("no time passed: the rest must be unknown")
	}
}

// TestRestSeesAnUnwatchedBusyProcess (real /proc): a child that spins,
// not watched, shows in the rest of the machine; watched, it is one of the
// processes and the samples read it.
func TestRestSeesAnUnwatchedBusyProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	spin := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = spin.Process.Kill(); _ = spin.Wait() }()
	w := New([]int{os.Getpid()})
	s0 := w.Sample()
	time.Sleep(time.Second)
	s1 := w.Sample()
	r, ok := Rest(&s0, &s1)
	if !ok || r < 0.2 {
		t.Fatalf("rest %v %v: a process spinning for a second outside the watched ones must show (at least 0.2 cores)", r, ok)
	}
	both := New([]int{os.Getpid(), spin.Process.Pid})
	b0 := both.Sample()
	time.Sleep(200 * time.Millisecond)
	b1 := both.Sample()
	if d := b1.Used[spin.Process.Pid] - b0.Used[spin.Process.Pid]; d <= 0 {
		t.Fatalf("the watched spinner used %v in 200 ms", d)
	}
}
