package proccpu

import (
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestParseMachine: busy is user, nice, system, irq and softirq; idle,
// iowait and steal count in the total only; guest time (already in user)
// is not counted twice; a malformed line is an error, never zeros.
func TestParseMachine(t *testing.T) {
	m, err := parseMachine("cpu  100 20 30 1000 40 5 6 7 50 60\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	if err != nil {
		t.Fatal(err)
	}
	if m.Busy != 161*ClockTick || m.Total != 1208*ClockTick {
		t.Fatalf("busy %v total %v, want %v and %v", m.Busy, m.Total, 161*ClockTick, 1208*ClockTick)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 x 4 5", "cpu 1 2"} {
		if _, err := parseMachine(bad); !errors.Is(err, ErrUnreadable) {
			t.Errorf("%q: err %v, want ErrUnreadable", bad, err)
		}
	}
	if m, err := ReadMachine(); err != nil || m.Total <= 0 || m.Busy > m.Total {
		t.Fatalf("this machine: %+v, %v", m, err)
	}
}

// TestStatAndParents: this process's CPU time grows with work, a child
// descends from it and not from another pid, and a pid that does not exist
// is an error.
func TestStatAndParents(t *testing.T) {
	before, start, err := Stat(os.Getpid())
	if err != nil || start == 0 {
		t.Fatalf("stat: %v, start %d", err, start)
	}
	for end := time.Now().Add(60 * time.Millisecond); time.Now().Before(end); {
	}
	after, start2, err := Stat(os.Getpid())
	if err != nil || after <= before || start2 != start {
		t.Fatalf("cpu %v -> %v, start %d -> %d, %v", before, after, start, start2, err)
	}
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if p, err := Parent(cmd.Process.Pid); err != nil || p != os.Getpid() {
		t.Fatalf("parent of the child: %d, %v", p, err)
	}
	if !Descends(cmd.Process.Pid, []int{os.Getpid()}) || Descends(cmd.Process.Pid, []int{1 << 30}) {
		t.Fatal("Descends: the child is not this process's, or is another's")
	}
	got, err := ByComm([]string{"sleep"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range got["sleep"] {
		found = found || p == cmd.Process.Pid
	}
	if !found {
		t.Fatalf("ByComm(sleep) = %v, lacks %d", got, cmd.Process.Pid)
	}
	if _, _, err := Stat(1 << 30); err == nil {
		t.Fatal("a pid that does not exist read without error")
	}
}
