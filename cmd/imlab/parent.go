package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// parentPollInterval is how often watchParent looks at the parent pid.
const parentPollInterval = 500 * time.Millisecond

// startedByGoRun tells whether this process's parent is the go tool (`go
// run ./cmd/imlab ...`). The go tool does not pass SIGTERM on: `kill %1`
// of a backgrounded `go run` ends the go tool and leaves this process
// running, with its private backends and its port.
func startedByGoRun() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", os.Getppid()))
	return err == nil && strings.TrimSpace(string(b)) == "go"
}

// watchParent returns a context that is cancelled when this process's
// parent exits (the process is re-parented), noticed within
// parentPollInterval, and a stop function that ends the watch and waits
// for its goroutine. The cancellation takes the same graceful path as
// SIGTERM: roles stop, then private backends.
func watchParent(ctx context.Context, warn io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	parent := os.Getppid()
	done := make(chan struct{})
	go func() { // owned by the returned stop: ends when ctx ends
		defer close(done)
		t := time.NewTicker(parentPollInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if os.Getppid() != parent {
					fmt.Fprintf(warn, "imlab: parent process %d exited; stopping\n", parent)
					cancel()
					return
				}
			}
		}
	}()
	return ctx, func() { cancel(); <-done }
}

// selfCommand is how a user runs this binary again from the current
// directory, for hints such as the banner's token command: "go run
// ./cmd/imlab" under go run, "imlab" when PATH finds this very binary,
// else its path.
func selfCommand(exe string, goRun bool, lookPath func(string) (string, error), wd string) string {
	if goRun {
		return "go run ./cmd/imlab"
	}
	if exe == "" {
		return "imlab"
	}
	if p, err := lookPath(filepath.Base(exe)); err == nil && sameFile(p, exe) {
		return filepath.Base(exe)
	}
	if wd != "" {
		if rel, err := filepath.Rel(wd, exe); err == nil && !strings.HasPrefix(rel, "..") {
			return "./" + rel
		}
	}
	return exe
}

func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// thisCommand is selfCommand for the running process.
func thisCommand() string {
	exe, _ := os.Executable()
	wd, _ := os.Getwd()
	return selfCommand(exe, startedByGoRun(), exec.LookPath, wd)
}
