package runner

import (
	"os"
	"testing"

	"imlab/internal/testenv"
	"imlab/runner/proc"
)

// TestMain makes the test binary its own child command, as imlab is.
func TestMain(m *testing.M) { os.Exit(testenv.RunOrServe(m, ServeChild)) }

// testChildCommand is the child command of the tests: this test binary.
func testChildCommand(t testing.TB) []string {
	return testenv.SelfCommand(t, proc.DefaultChildArgs()...)
}

// testLoadChildCommand is the load segments' command of the tests: this
// test binary.
func testLoadChildCommand(t testing.TB) []string {
	return testenv.SelfCommand(t, DefaultLoadChildArgs()...)
}
