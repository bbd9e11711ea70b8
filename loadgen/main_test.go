package loadgen

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"imlab/loadgen/noop"
)

// envNoopChild makes the test binary a no-op endpoint (see startNoopProcess).
const envNoopChild = "IMLAB_LOADGEN_NOOP_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envNoopChild) == "1" {
		os.Exit(noopChild())
	}
	os.Exit(m.Run())
}

// noopChild serves the no-op endpoint on a loopback port, prints its URL on
// stdout and stops when stdin closes (the parent ended or closed it).
func noopChild() int {
	srv, err := noop.Start("127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(srv.URL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
	return 0
}

// startNoopProcess runs the no-op endpoint in a child process (this test
// binary again) and returns its URL; the child stops with tb.
func startNoopProcess(tb testing.TB) string {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envNoopChild+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("no-op child: %v", err)
	}
	return strings.TrimSpace(line)
}
