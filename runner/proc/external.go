package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"imlab/result"
)

// External is the process of an external target (scenario.TargetSpec): the
// user's binary and arguments, started by the runner, stopped (SIGTERM),
// killed (SIGKILL) and started again on the same command by the fault
// schedule. Its stdout and stderr go to its log. Each incarnation's wait
// goroutine is owned by the incarnation and ends when the process exits;
// stopAll waits for the last incarnation.
type External struct {
	Name        string
	Bin         string
	Args        []string
	Dir         string
	Addr        string // the address its readiness check dials
	ReadyPath   string // "": TCP connect
	ReadyFor    time.Duration
	StopTimeout time.Duration
	LogW        *os.File
	LogPath     string

	mu    sync.Mutex
	cur   *extInc
	runs  []result.ProcessRun
	notes []string
}

// extInc is one incarnation.
type extInc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	state  *os.ProcessState // set before exited is closed
	run    int              // index in runs
}

// start starts an incarnation and waits for its readiness check. The
// address must be free first: a previous incarnation's port held by the
// kernel, or someone else's server on it, is an error naming the address.
func (p *External) Start(ctx context.Context) error {
	p.mu.Lock()
	running := p.cur != nil
	p.mu.Unlock()
	if running {
		return nil
	}
	if c, err := net.DialTimeout("tcp", p.Addr, 500*time.Millisecond); err == nil {
		c.Close()
		return fmt.Errorf("scenarios: target address %s is already served by another process: stop it, or give this run's server its own address", p.Addr)
	}
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Dir = p.Dir
	cmd.Stdout, cmd.Stderr = p.LogW, p.LogW
	cmd.SysProcAttr = ChildProcAttr()
	cmd.WaitDelay = ChildWaitDelay
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("scenarios: start %s: %w", p.Bin, err)
	}
	inc := &extInc{cmd: cmd, exited: make(chan struct{})}
	go func() { // owned by inc: ends when the process has exited
		_ = cmd.Wait()
		inc.state = cmd.ProcessState
		close(inc.exited)
	}()
	p.mu.Lock()
	inc.run = len(p.runs)
	p.runs = append(p.runs, result.ProcessRun{Name: p.Name, Exec: true, PID: cmd.Process.Pid, Addr: p.Addr, StartedAt: time.Now().UTC(), Log: p.LogPath})
	p.cur = inc
	p.mu.Unlock()
	if err := p.awaitReady(ctx, inc); err != nil {
		_, _ = p.end(EndKilled, syscall.SIGKILL, 0)
		return err
	}
	return nil
}

// awaitReady runs the readiness check until it passes, the process exits
// or readyFor passes.
func (p *External) awaitReady(ctx context.Context, inc *extInc) error {
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(p.ReadyFor)
	for {
		var err error
		if p.ReadyPath == "" {
			var c net.Conn
			if c, err = net.DialTimeout("tcp", p.Addr, time.Second); err == nil {
				c.Close()
			}
		} else {
			var resp *http.Response
			if resp, err = hc.Get("http://" + p.Addr + p.ReadyPath); err == nil {
				resp.Body.Close()
			}
		}
		if err == nil {
			return nil
		}
		select {
		case <-inc.exited:
			return fmt.Errorf("scenarios: target process %s exited before it was ready (%s): see %s", p.Name, inc.state, p.LogPath)
		case <-ctx.Done():
			return fmt.Errorf("scenarios: target process %s not ready: %w", p.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scenarios: target process %s not ready after %s (readiness check on %s: %v): see %s", p.Name, p.ReadyFor, p.Addr, err, p.LogPath)
		}
	}
}

// end takes the running incarnation down with sig, waiting up to wait
// before SIGKILL (0: sig is SIGKILL). It records the end and the process's
// CPU time (user + system, from the OS's account of the exited process).
func (p *External) end(how string, sig syscall.Signal, wait time.Duration) (string, error) {
	p.mu.Lock()
	inc := p.cur
	p.cur = nil
	p.mu.Unlock()
	if inc == nil {
		return "", errors.New("scenarios: target process is not running")
	}
	var err error
	select {
	case <-inc.exited:
		how, err = EndExited, fmt.Errorf("scenarios: target process %s (pid %d) had exited on its own: %s", p.Name, inc.cmd.Process.Pid, inc.state)
	default:
		_ = inc.cmd.Process.Signal(sig)
		if wait > 0 {
			select {
			case <-inc.exited:
			case <-time.After(wait):
				_ = inc.cmd.Process.Kill()
				how, err = EndKilled, fmt.Errorf("scenarios: target process %s (pid %d) did not stop on SIGTERM within %s: killed", p.Name, inc.cmd.Process.Pid, wait)
			}
		}
		<-inc.exited
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := &p.runs[inc.run]
	r.EndedAt, r.End, r.State = time.Now().UTC(), how, inc.state.String()
	if ws, ok := inc.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Signal = ws.Signal().String()
	}
	cpu := (inc.state.UserTime() + inc.state.SystemTime()).Seconds()
	r.CPUSeconds = &cpu
	return how, err
}

// kill is the kill fault's inject: SIGKILL.
func (p *External) Kill(context.Context) error {
	_, err := p.end(EndKilled, syscall.SIGKILL, 0)
	return err
}

// stop is the stop fault's inject and the end of the run: SIGTERM, then
// SIGKILL after stopTimeout.
func (p *External) Stop(context.Context) error {
	_, err := p.end(EndStopped, syscall.SIGTERM, p.StopTimeout)
	return err
}

// restart is the heal of stop and kill: the same command again.
func (p *External) Restart(ctx context.Context) error { return p.Start(ctx) }

// running tells whether an incarnation is up.
func (p *External) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur != nil
}

// history is every incarnation, and the notes.
func (p *External) History() ([]result.ProcessRun, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]result.ProcessRun(nil), p.runs...), append([]string(nil), p.notes...)
}
