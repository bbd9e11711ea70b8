package cpuline

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"
)

func start(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Skip("no sh:", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// TestCoresPerProcess: a process that spins shows about a core, one that
// sleeps about none; the machine's figure is at least the spinner's; a
// process replaced under the same name (a restart: a new pid) is missing
// from the second it first appears in, never 0 there, and both pids are
// listed under its line.
func TestCoresPerProcess(t *testing.T) {
	spin := start(t, "while :; do :; done")
	idle := start(t, "sleep 30")
	var mu sync.Mutex
	second := idle
	targets := func() []Target {
		mu.Lock()
		defer mu.Unlock()
		return []Target{{Name: "spin", PID: spin.Process.Pid}, {Name: "idle", PID: second.Process.Pid}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(1100 * time.Millisecond)
		mu.Lock()
		second = start(t, "sleep 30") // the "restart"
		mu.Unlock()
		time.Sleep(1200 * time.Millisecond)
		cancel()
	}()
	line, err := Run(ctx, Config{Interval: 200 * time.Millisecond, Targets: targets}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(line.Seconds) < 8 || len(line.Procs) != 2 || line.CPUs < 1 {
		t.Fatalf("%d samples, procs %+v, cpus %d", len(line.Seconds), line.Procs, line.CPUs)
	}
	var spun, missing int
	for _, s := range line.Seconds {
		if c, ok := s.Cores["spin"]; ok && c > 0.3 {
			spun++
			if s.Machine != nil && *s.Machine < c*0.8 {
				t.Errorf("machine %.2f cores under the spinner's %.2f", *s.Machine, c)
			}
		}
		if c, ok := s.Cores["idle"]; ok && c > 0.1 {
			t.Errorf("the sleeper used %.2f cores", c)
		} else if !ok {
			missing++
		}
	}
	if spun < len(line.Seconds)/2 {
		t.Errorf("the spinner shows a core in %d of %d samples", spun, len(line.Seconds))
	}
	if missing != 1 {
		t.Errorf("the restarted process is missing from %d samples, want the one it first appeared in", missing)
	}
	if line.Procs[1].Name != "idle" || len(line.Procs[1].PIDs) != 2 {
		t.Errorf("idle's line %+v: want both incarnations' pids", line.Procs[1])
	}
}

// TestConfigRefused: a bad configuration is an error before any sample.
func TestConfigRefused(t *testing.T) {
	for name, c := range map[string]Config{
		"no targets": {},
		"too fast":   {Targets: func() []Target { return nil }, Interval: time.Millisecond},
		"too long":   {Targets: func() []Target { return nil }, MaxSeconds: 1 << 20},
	} {
		if _, err := Run(context.Background(), c, time.Now()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestMaxSeconds: the timeline stops at its bound and says so.
func TestMaxSeconds(t *testing.T) {
	line, err := Run(context.Background(), Config{Interval: 100 * time.Millisecond, MaxSeconds: 3, Targets: func() []Target { return nil }}, time.Now())
	if err != nil || len(line.Seconds) != 3 || len(line.Notes) != 1 {
		t.Fatalf("%+v, %v", line, err)
	}
}
