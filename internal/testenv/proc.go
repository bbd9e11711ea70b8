package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// ProcAlive tells whether process pid exists and is not a zombie (an
// orphan's zombie waits for whoever adopted it to reap it).
func ProcAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// StartLines starts cmd (killed and waited for when the test ends) and
// returns its stdout as a channel of lines, closed at EOF.
func StartLines(t testing.TB, cmd *exec.Cmd) <-chan string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 16)
	go func() { // ends at the command's stdout EOF
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// LockedBuffer is a bytes.Buffer that goroutines write (a logger, a
// command's output) while a test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// SelfCommand is this test binary run with args: the command of a child
// process a test makes of its own binary.
func SelfCommand(t testing.TB, args ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{exe}, args...)
}

// RunOrServe is a TestMain's body for a test binary that is also its own
// child command: when serve takes the arguments (ok), this process is the
// child and its exit code is serve's; otherwise the tests run.
func RunOrServe(m *testing.M, serve func(args []string) (code int, ok bool)) int {
	if code, ok := serve(os.Args[1:]); ok {
		return code
	}
	return m.Run()
}
