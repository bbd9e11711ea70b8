package compose

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sbinDirs are searched after PATH: server binaries live there and a
// non-root PATH often lacks them.
var sbinDirs = [...]string{"/usr/sbin", "/usr/local/sbin", "/sbin"}

// lookBinary finds name on PATH, then in the sbin directories.
func lookBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range sbinDirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found on PATH or in %s", name, strings.Join(sbinDirs[:], ", "))
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// Callers that hand it to another process retry on a bind failure.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	return port, nil
}

// proc is a private server process owned by a run.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when Wait returned
	waitErr error         // valid after exited is closed
}

// startProc starts bin with args, its stdout and stderr appended to
// logPath (see launch).
func startProc(name, bin string, args []string, logPath string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Stdin = nil
	p, err := launch(name, cmd, logPath)
	logf.Close() // the child holds its own copy
	return p, err
}

// launch starts cmd in a process group of its own (a terminal's Ctrl-C
// reaches only imlab, which then stops it in order) that gets SIGTERM when
// imlab dies first, however it dies (SIGKILL included): the kernel sends
// the parent-death signal when the thread that forked the child ends, so
// the fork happens on a goroutine locked to its OS thread, and that
// goroutine holds the thread until the child has exited (Go ends a
// thread whose goroutine returns while locked; the thread is never reused
// by other goroutines).
func launch(name string, cmd *exec.Cmd, logPath string) (*proc, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	p := &proc{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() { // owned by p: ends when the process exits (or did not start)
		runtime.LockOSThread() // never unlocked: see above
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("%s: start %s: %w", name, cmd.Path, err)
			return
		}
		started <- nil
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// renice sets the nice value of every thread of process pid (Linux's nice
// is per thread; a new thread inherits its creator's), passing over the
// thread list until a pass finds no thread it had not set, so that a
// thread created during a pass is not missed. Used once a helper such as
// the embedded FerretDB is ready: it starts at full priority (a start at
// low priority on a busy machine can take minutes), then takes only the
// CPU the server leaves over.
func renice(pid, nice int) error {
	done := map[int]bool{}
	for pass := 0; pass < 10; pass++ {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return fmt.Errorf("renice %d: %w", pid, err)
		}
		fresh := 0
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("renice %d thread %d to %d: %w", pid, tid, nice, err)
			}
			done[tid] = true
			fresh++
		}
		if fresh == 0 {
			return nil
		}
	}
	return fmt.Errorf("renice %d: its threads kept changing", pid)
}

// stop sends SIGTERM, waits up to grace, then kills. It returns once the
// process is gone.
func (p *proc) stop(ctx context.Context, grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: SIGTERM: %w", p.name, err)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	// Past the grace period or the caller's deadline: kill the whole group.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	return fmt.Errorf("%s: did not exit after SIGTERM within %s; killed", p.name, grace)
}

// logTail returns the last lines of the process log, for error messages.
func (p *proc) logTail() string {
	return tailFile(p.logPath, 2048)
}

func tailFile(path string, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := int64(0)
	if st.Size() > max {
		off = st.Size() - max
	}
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return ""
	}
	return strings.TrimSpace(string(buf))
}
