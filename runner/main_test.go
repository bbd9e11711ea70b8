package runner

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// TestMain makes the test binary its own child command: run with the
// arguments "scenario child" (what the runner appends to this executable,
// see DefaultChildArgs) it is an exec server process, as imlab is.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "scenario" && os.Args[2] == "child" {
		os.Exit(testChild())
	}
	if len(os.Args) == 3 && os.Args[1] == "scenario" && os.Args[2] == "load-child" {
		if err := LoadChildMain(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "scenario load-child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := ChildMain(ctx, os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scenario child:", err)
		return 1
	}
	return 0
}

// testChildCommand is the child command of the tests: this test binary.
func testChildCommand(t testing.TB) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{exe}, DefaultChildArgs()...)
}

// testLoadChildCommand is the load segments' command of the tests: this
// test binary.
func testLoadChildCommand(t testing.TB) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{exe}, DefaultLoadChildArgs()...)
}
