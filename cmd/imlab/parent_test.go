package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"imlab/internal/testenv"
)

// TestWatchParentEndsWithTheParent: the middle process (as the go tool of
// `go run`) is SIGKILLed; its child, watching its parent, must notice,
// say so and exit by itself.
func TestWatchParentEndsWithTheParent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mid := exec.Command(exe, "test-middle")
	lines := testenv.StartLines(t, mid)
	next := func(what string) string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("output ended before %s", what)
			}
			return l
		case <-time.After(90 * time.Second): // two -race binaries start on a busy machine
			t.Fatalf("no %s", what)
		}
		return ""
	}
	pid, err := strconv.Atoi(next("pid of the watching child"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if l := next("ready line of the child"); l != "watching" {
		t.Fatalf("child said %q", l)
	}
	if err := mid.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if l := next("notice of the parent's exit"); !strings.Contains(l, "exited; stopping") {
		t.Fatalf("child said %q, want the parent's exit noticed", l)
	}
	deadline := time.Now().Add(10 * time.Second)
	for testenv.ProcAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d still running after its parent was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSelfCommand(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin", "imlab")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other-imlab")
	if err := os.WriteFile(other, []byte("y"), 0o755); err != nil {
		t.Fatal(err)
	}
	notFound := func(string) (string, error) { return "", errors.New("not found") }
	onPath := func(string) (string, error) { return bin, nil }
	elsewhere := func(string) (string, error) { return other, nil }
	cases := []struct {
		name, exe string
		goRun     bool
		look      func(string) (string, error)
		wd, want  string
	}{
		{"go run", "/tmp/go-build1/b001/exe/imlab", true, notFound, dir, "go run ./cmd/imlab"},
		{"on PATH", bin, false, onPath, "/", "imlab"},
		{"another imlab on PATH", bin, false, elsewhere, dir, "./bin/imlab"},
		{"built here", bin, false, notFound, dir, "./bin/imlab"},
		{"built elsewhere", bin, false, notFound, filepath.Join(dir, "bin", "sub"), bin},
	}
	for _, c := range cases {
		if got := selfCommand(c.exe, c.goRun, c.look, c.wd); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
