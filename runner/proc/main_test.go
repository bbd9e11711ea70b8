package proc

import (
	"os"
	"testing"
)

// TestMain makes the test binary its own child command, as imlab is.
func TestMain(m *testing.M) {
	if code, ok := ServeChild(os.Args[1:]); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
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
