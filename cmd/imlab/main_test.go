package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
)

// TestMain makes the test binary serve the hidden subcommands that up,
// ref and scenario run start from their own executable (embedded-mongo,
// scenario child): under test, that executable is this binary.
func TestMain(m *testing.M) {
	if len(os.Args) >= 2 && (os.Args[1] == "embedded-mongo" || (os.Args[1] == "scenario" && len(os.Args) >= 3 && os.Args[2] == "child")) {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		root := newRootCmd()
		root.SetArgs(os.Args[1:])
		err := root.ExecuteContext(ctx)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "imlab:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(os.Args) == 2 && os.Args[1] == "test-middle" {
		os.Exit(testMiddle())
	}
	if len(os.Args) == 2 && os.Args[1] == "test-watch" {
		ctx, unwatch := watchParent(context.Background(), os.Stdout)
		fmt.Println("watching")
		<-ctx.Done()
		unwatch()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testMiddle stands for the go tool of `go run`: it starts a child that
// watches its parent, prints the child's pid and waits to be killed.
func testMiddle() int {
	exe, err := os.Executable()
	if err != nil {
		return 1
	}
	c := exec.Command(exe, "test-watch")
	c.Stdout = os.Stdout
	if err := c.Start(); err != nil {
		return 1
	}
	fmt.Println(c.Process.Pid)
	_ = c.Wait()
	return 0
}

// runImlab runs the imlab command line ARGS in this process as the binary
// does: its exit status (main's exitCode), its stdout, and its stderr with
// the error line main prints.
func runImlab(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	out, errs, err := run(t, ctx, args...)
	if err != nil {
		errs += fmt.Sprintln("imlab:", err)
	}
	return exitCode(err), out, errs
}
