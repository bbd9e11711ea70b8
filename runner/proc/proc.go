package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"imlab/ref/server"
	"imlab/result"
	"imlab/scenario"
)

// Named limits of the server processes.
const (
	// ChildReadyTimeout bounds an exec process's start (the ready line).
	ChildReadyTimeout = 60 * time.Second
	// childStopGrace is added to StopTimeout before a child that does not
	// stop on SIGTERM is killed.
	childStopGrace = 5 * time.Second
	// ChildWaitDelay bounds the wait for a dead child's output to end.
	ChildWaitDelay = 5 * time.Second
	// ScrapeTimeout bounds one GET /metrics of an exec process.
	ScrapeTimeout = 2 * time.Second
	// maxMetricsBody bounds a /metrics answer.
	maxMetricsBody = 16 << 20
	// RestartAttempts and RestartBackoff bound the retries of a restart
	// while the old listen address is still taken.
	RestartAttempts = 20
	RestartBackoff  = 250 * time.Millisecond
)

// How an incarnation of a process ended (ProcessRun.End).
const (
	EndStopped = "stopped" // a graceful stop (stop fault, end of the run)
	EndKilled  = "killed"  // SIGKILL (kill fault, or a child that did not stop in time)
	EndExited  = "exited"  // an exec process that ended on its own
)

// incarnation is one running instance of a process.
type incarnation interface {
	// addr serves /metrics and /v1/lab/lag; apiAddr the contract ("" without
	// the api role). Both are "" once the incarnation has ended.
	addr() string
	apiAddr() string
	Pid() int
	Gather(ctx context.Context) ([]*dto.MetricFamily, error)
	// stop stops gracefully; end says how it ended, state the OS's account.
	stop(ctx context.Context) (end, state string, err error)
}

// inProcess is a server.Process inside the runner.
type inProcess struct{ p *server.Process }

func (x inProcess) addr() string {
	if a := x.p.Addr(); a != nil {
		return a.String()
	}
	return ""
}

func (x inProcess) apiAddr() string {
	if a := x.p.APIAddr(); a != nil && x.p.Runs(server.RoleAPI) {
		return a.String()
	}
	return ""
}

func (inProcess) Pid() int { return 0 }

func (x inProcess) Gather(context.Context) ([]*dto.MetricFamily, error) {
	mfs, err := x.p.Registry.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather metrics: %w", err)
	}
	return mfs, nil
}

func (x inProcess) stop(ctx context.Context) (string, string, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StopTimeout)
	defer cancel()
	return EndStopped, "", x.p.Stop(sctx)
}

// childProc is a server process run by the child command. Its wait
// goroutine (started by spawnChild) is the only caller of cmd.Wait and
// closes exited; every path that ends a child waits for exited.
type Child struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *readyWriter
	exited chan struct{}
	hc     *http.Client
	ready  childReady // set by begin

	// set by the wait goroutine before exited is closed
	state *os.ProcessState
}

// spawnChild starts the child command for process name. The child
// initialises and then waits for its spec on stdin (begin).
func spawnChild(command []string, name string, logw *os.File) (*Child, error) {
	cmd := exec.Command(command[0], command[1:]...)
	out := &readyWriter{ready: make(chan struct{}), rest: logw}
	cmd.Stdout = out
	cmd.Stderr = logw
	cmd.SysProcAttr = ChildProcAttr()
	cmd.WaitDelay = ChildWaitDelay
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("scenarios: child %s: stdin: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("scenarios: child %s: start %s: %w", name, command[0], err)
	}
	c := &Child{name: name, cmd: cmd, stdin: stdin, out: out, exited: make(chan struct{}),
		hc: &http.Client{Timeout: ScrapeTimeout, Transport: &http.Transport{DisableKeepAlives: true}}}
	go func() { // owned by c: ends when the process has exited
		_ = cmd.Wait()
		c.state = cmd.ProcessState
		close(c.exited)
	}()
	return c, nil
}

// startChild spawns a child and begins it with spec.
func startChild(ctx context.Context, command []string, spec ChildSpec, logw *os.File) (*Child, error) {
	c, err := spawnChild(command, spec.Process.Name, logw)
	if err != nil {
		return nil, err
	}
	if err := c.begin(ctx, spec); err != nil {
		return nil, err
	}
	return c, nil
}

// begin writes spec on the child's stdin and waits for its ready line. On
// any error the child is killed and waited for; a start refused because
// the address is still taken wraps errAddrInUse.
func (c *Child) begin(ctx context.Context, spec ChildSpec) error {
	abort := func(err error) error {
		_ = c.cmd.Process.Kill()
		<-c.exited
		return err
	}
	line, err := json.Marshal(spec)
	if err != nil {
		return abort(fmt.Errorf("scenarios: child spec: %w", err))
	}
	if _, err := c.stdin.Write(append(line, '\n')); err != nil {
		return abort(fmt.Errorf("scenarios: child %s: write spec: %w", c.name, err))
	}
	timer := time.NewTimer(ChildReadyTimeout)
	defer timer.Stop()
	select {
	case <-c.out.ready:
	case <-c.exited:
		// The line may have been written just before the exit.
		select {
		case <-c.out.ready:
		default:
			return fmt.Errorf("scenarios: child %s exited before it was ready (%s): %s", c.name, c.state, c.out.partial())
		}
	case <-ctx.Done():
		return abort(fmt.Errorf("scenarios: child %s: start: %w", c.name, ctx.Err()))
	case <-timer.C:
		return abort(fmt.Errorf("scenarios: child %s: no ready line within %s", c.name, ChildReadyTimeout))
	}
	var r childReady
	if err := json.Unmarshal(c.out.line, &r); err != nil {
		return abort(fmt.Errorf("scenarios: child %s: bad ready line %q: %w", c.name, c.out.line, err))
	}
	if r.Error != "" {
		err := fmt.Errorf("scenarios: child %s: %s", c.name, r.Error)
		if r.AddrInUse {
			err = fmt.Errorf("%w: %w", errAddrInUse, err)
		}
		// It exits by itself after the error line; do not wait on it
		// longer than it takes to stop.
		select {
		case <-c.exited:
			return err
		case <-time.After(childStopGrace):
			return abort(err)
		}
	}
	if r.Addr == "" || r.PID != c.cmd.Process.Pid {
		return abort(fmt.Errorf("scenarios: child %s: ready line %q: want its pid %d and an address", c.name, c.out.line, c.cmd.Process.Pid))
	}
	c.ready = r
	return nil
}

func (c *Child) alive() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

func (c *Child) addr() string {
	if !c.alive() {
		return ""
	}
	return c.ready.Addr
}

func (c *Child) apiAddr() string {
	if !c.alive() {
		return ""
	}
	return c.ready.APIAddr
}

func (c *Child) Pid() int { return c.cmd.Process.Pid }

// gather scrapes the child's GET /metrics.
func (c *Child) Gather(ctx context.Context) ([]*dto.MetricFamily, error) {
	if !c.alive() {
		return nil, fmt.Errorf("scrape metrics: process exited (%s)", c.state)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.ready.Addr+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape metrics: status %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, maxMetricsBody))
	if err != nil {
		return nil, fmt.Errorf("scrape metrics: %w", err)
	}
	out := make([]*dto.MetricFamily, 0, len(fams))
	for _, f := range fams {
		out = append(out, f)
	}
	return out, nil
}

// stop sends SIGTERM (where there is none, it closes stdin: either makes
// the child stop gracefully); a child still running after StopTimeout +
// childStopGrace, or when ctx ends, is killed.
func (c *Child) stop(ctx context.Context) (string, string, error) {
	if !c.alive() {
		_ = c.stdin.Close()
		return EndExited, c.state.String(), fmt.Errorf("scenarios: process %s (pid %d) had exited on its own: %s", c.name, c.Pid(), c.state)
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		_ = c.stdin.Close()
	}
	timer := time.NewTimer(StopTimeout + childStopGrace)
	defer timer.Stop()
	select {
	case <-c.exited:
		_ = c.stdin.Close()
		if !c.state.Success() {
			return EndStopped, c.state.String(), fmt.Errorf("scenarios: process %s (pid %d) stopped with %s (see its log)", c.name, c.Pid(), c.state)
		}
		return EndStopped, c.state.String(), nil
	case <-timer.C:
	case <-ctx.Done():
	}
	state, err := c.kill()
	if err == nil {
		err = fmt.Errorf("scenarios: process %s (pid %d) did not stop on SIGTERM in time: killed", c.name, c.Pid())
	}
	return EndKilled, state, err
}

// kill sends SIGKILL and waits for the child; state is the OS's account.
func (c *Child) kill() (string, error) {
	if !c.alive() {
		return c.state.String(), fmt.Errorf("scenarios: process %s (pid %d) had already exited: %s", c.name, c.Pid(), c.state)
	}
	if err := c.cmd.Process.Kill(); err != nil && c.alive() {
		return "", fmt.Errorf("scenarios: kill process %s (pid %d): %w", c.name, c.Pid(), err)
	}
	<-c.exited
	_ = c.stdin.Close()
	return c.state.String(), nil
}

// signal is the signal that ended the child ("" if it exited).
func (c *Child) signal() string {
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}

// readyWriter is a child's stdout: the first line is the ready line
// (ready is closed when it is complete), the rest goes to the log.
type readyWriter struct {
	mu    sync.Mutex
	buf   []byte
	line  []byte // set before ready is closed
	ready chan struct{}
	rest  io.Writer
}

func (w *readyWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(b)
	if w.line == nil {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(w.buf)+len(b) > MaxChildLine {
				return n, nil // not a ready line; the start fails on the exit or the timeout
			}
			w.buf = append(w.buf, b...)
			return n, nil
		}
		w.line = append(w.buf, b[:i]...)
		w.buf = nil
		close(w.ready)
		b = b[i+1:]
	}
	if len(b) > 0 {
		_, _ = w.rest.Write(b)
	}
	return n, nil
}

// partial is what the child printed before it exited without a line.
func (w *readyWriter) partial() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) == 0 {
		return "no output on stdout (see its log)"
	}
	return strings.TrimSpace(string(w.buf))
}

// procCounts are what the runner reads from a process's metrics.
type procCounts struct {
	truncated uint64 // imlab_pull_latency_seconds{kind="sync",source="truncated"} count
	consumed  uint64 // imlab_consumer_records_total{result="ok"}
}

func countsOf(mfs []*dto.MetricFamily) procCounts {
	var c procCounts
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "imlab_pull_latency_seconds":
			for _, m := range mf.GetMetric() {
				if label(m, "source") == "truncated" && label(m, "kind") == "sync" && m.GetHistogram() != nil {
					c.truncated += m.GetHistogram().GetSampleCount()
				}
			}
		case "imlab_consumer_records_total":
			for _, m := range mf.GetMetric() {
				if label(m, "result") == "ok" && m.GetCounter() != nil {
					c.consumed += uint64(m.GetCounter().GetValue())
				}
			}
		}
	}
	return c
}

// procSlot is one server process that stop and kill faults take down and
// start again on the same address. Its methods are called from Run's
// goroutine, the schedule's and the lag poller's; mu guards the fields
// below it. Starting and ending an incarnation happen outside mu (only
// the schedule and, after it, Run do that, never at the same time).
//
// An exec process that faults target gets spares: a start spawns the
// next OS process along with the one it starts, as long as a stop or kill
// fault of the schedule is still to come; the spare initialises and waits
// for its spec, which the restart after that fault writes. So a restart costs
// only the server's start, not the executable's (seconds for a large
// binary built with -race), and the process is down for about the fault's
// duration. A spare never started is killed and waited for by stop.
type Slot struct {
	Name    string
	exec    bool
	command []string // exec: the child command
	logw    *os.File // exec: the process log (every incarnation's stderr)
	logPath string
	marks   *slog.Logger // exec: the runner's own lines in the process log
	log     *slog.Logger
	Cfg     server.Config // the in-process config of the first start (settings)

	mu       sync.Mutex
	spec     ChildSpec // Listen and Migrate change after the first start
	cur      incarnation
	spare    *Child // exec: spawned, not yet begun
	spares   int    // exec: spares still to spawn (stop and kill faults to come)
	run      int    // index in runs of cur
	runs     []result.ProcessRun
	repaired result.RepairSummary // the ended incarnations' repairs, read when each ended
	notes    []string
}

// newProcSlot is the slot of the process spec describes; faults is how
// many stop and kill faults target it.
func NewSlot(spec ChildSpec, log *slog.Logger, command []string, logw *os.File, logPath string, faults int) *Slot {
	s := &Slot{Name: spec.Process.Name, exec: spec.Process.Exec, command: command, logw: logw, logPath: logPath,
		log: log, Cfg: serverConfig(spec, log), spec: spec}
	if s.exec {
		s.spares = faults
		s.marks = slog.New(slog.NewTextHandler(logw, nil))
	}
	return s
}

// start starts an incarnation if none runs.
func (s *Slot) Start(ctx context.Context) error {
	s.mu.Lock()
	spec, running := s.spec, s.cur != nil
	s.mu.Unlock()
	if running {
		return nil
	}
	var inc incarnation
	if s.exec {
		s.mu.Lock()
		c := s.spare
		s.spare = nil
		s.mu.Unlock()
		if c == nil || !c.alive() {
			var err error
			if c, err = spawnChild(s.command, s.Name, s.logw); err != nil {
				return err
			}
		}
		s.mu.Lock()
		warm := s.spares > 0
		s.spares = max(0, s.spares-1)
		s.mu.Unlock()
		if warm {
			// The next one initialises alongside this one.
			spare, err := spawnChild(s.command, s.Name, s.logw)
			s.mu.Lock()
			if err != nil {
				s.notes = append(s.notes, fmt.Sprintf("process %s: spare not spawned: %v", s.Name, err))
			}
			s.spare = spare
			s.mu.Unlock()
		}
		if err := c.begin(ctx, spec); err != nil {
			return err
		}
		inc = c
	} else {
		p, err := server.Start(ctx, serverConfig(spec, s.log), spec.Backends.server(), server.DefaultRoles())
		if err != nil {
			return err
		}
		inc = inProcess{p}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = inc
	// A restart listens where the first start did: the load keeps its target.
	s.spec.Listen = inc.addr()
	s.spec.Migrate = false
	s.run = len(s.runs)
	s.runs = append(s.runs, result.ProcessRun{Name: s.Name, Exec: s.exec, PID: inc.Pid(), Addr: inc.addr(),
		StartedAt: time.Now().UTC(), Log: s.logPath})
	return nil
}

// end takes the running incarnation down with how (after reading its
// counters); must says whether a slot without one is an error.
func (s *Slot) end(ctx context.Context, must bool, how func(incarnation) (end, state string, err error)) error {
	s.mu.Lock()
	inc, i := s.cur, s.run
	s.cur = nil
	s.mu.Unlock()
	if inc == nil {
		if must {
			return fmt.Errorf("scenarios: process %s is not running", s.Name)
		}
		return nil
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ScrapeTimeout)
	mfs, gerr := inc.Gather(gctx)
	var rep server.Repairs
	var rerr error
	if s.reconciles() {
		rep, rerr = fetchRepairs(gctx, inc.addr())
	}
	cancel()
	c := countsOf(mfs)
	end, state, err := how(inc)
	if s.marks != nil {
		s.marks.Info("scenarios: runner: process ended", "process", s.Name, "pid", inc.Pid(), "end", end, "state", state)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.runs[i]
	r.EndedAt, r.End, r.State = time.Now().UTC(), end, state
	r.TruncatedPulls, r.ConsumerRecords = c.truncated, c.consumed
	r.Repaired = rep.Rows
	s.repaired.Add(rep)
	if rerr != nil {
		s.repaired.Errors = append(s.repaired.Errors, fmt.Sprintf("process %s (pid %d): repairs before it ended not read: %v", s.Name, inc.Pid(), rerr))
	}
	if cp, ok := inc.(*Child); ok {
		r.Signal = cp.signal()
		if st := cp.state; st != nil {
			cpu := (st.UserTime() + st.SystemTime()).Seconds()
			r.CPUSeconds = &cpu
		}
	}
	if gerr != nil {
		s.notes = append(s.notes, fmt.Sprintf("process %s (pid %d): counters before it ended not read: %v", s.Name, inc.Pid(), gerr))
	}
	if err != nil {
		return fmt.Errorf("scenarios: stop process %s: %w", s.Name, err)
	}
	return nil
}

// stop stops the process gracefully if it runs, and kills a spare (end of
// the run).
func (s *Slot) Stop(ctx context.Context) error {
	s.mu.Lock()
	spare := s.spare
	s.spare = nil
	s.mu.Unlock()
	if spare != nil {
		_, _ = spare.kill()
	}
	return s.end(ctx, false, func(inc incarnation) (string, string, error) { return inc.stop(ctx) })
}

// stopFault is the inject of a stop fault: a graceful stop.
func (s *Slot) StopFault(ctx context.Context) error {
	return s.end(ctx, true, func(inc incarnation) (string, string, error) { return inc.stop(ctx) })
}

// kill is the inject of a kill fault: SIGKILL of the exec process (its
// counters are read just before).
func (s *Slot) Kill(ctx context.Context) error {
	if !s.exec {
		return fmt.Errorf("%w: process %s runs inside the runner: only an exec process can be killed", scenario.ErrInvalid, s.Name)
	}
	return s.end(ctx, true, func(inc incarnation) (string, string, error) {
		state, err := inc.(*Child).kill()
		return EndKilled, state, err
	})
}

// restart starts the process again, retrying (bounded) while its old
// address is still being released.
func (s *Slot) Restart(ctx context.Context) error {
	var err error
	for range RestartAttempts {
		if err = s.Start(ctx); err == nil {
			return nil
		}
		if !errors.Is(err, errAddrInUse) && !errors.Is(err, syscall.EADDRINUSE) {
			return err
		}
		select {
		case <-time.After(RestartBackoff):
		case <-ctx.Done():
			return fmt.Errorf("scenarios: restart process %s: %w (last: %w)", s.Name, ctx.Err(), err)
		}
	}
	return fmt.Errorf("scenarios: restart process %s: %d attempts: %w", s.Name, RestartAttempts, err)
}

func (s *Slot) Current() incarnation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// apiAddr is the running process's contract address ("" while it is
// down or without the api role).
func (s *Slot) APIAddr() string {
	if inc := s.Current(); inc != nil {
		return inc.apiAddr()
	}
	return ""
}

// addr is the running process's address ("" while it is down).
func (s *Slot) Addr() string {
	if inc := s.Current(); inc != nil {
		return inc.addr()
	}
	return ""
}

// truncatedPulls counts the truncated sync pulls every incarnation served
// (a killed one: up to the scrape just before its SIGKILL).
func (s *Slot) TruncatedPulls(ctx context.Context) uint64 {
	s.mu.Lock()
	var n uint64 // the ended incarnations' (the running one's is 0 until it ends)
	for _, r := range s.runs {
		n += r.TruncatedPulls
	}
	inc := s.cur
	s.mu.Unlock()
	if inc == nil {
		return n
	}
	gctx, cancel := context.WithTimeout(ctx, ScrapeTimeout)
	defer cancel()
	mfs, err := inc.Gather(gctx)
	if err != nil {
		s.mu.Lock()
		s.notes = append(s.notes, fmt.Sprintf("process %s: truncated pulls not read: %v", s.Name, err))
		s.mu.Unlock()
	}
	return n + countsOf(mfs).truncated
}

// reconciles tells whether the process runs the reconciler role.
func (s *Slot) reconciles() bool {
	for _, r := range s.spec.Process.Roles {
		if r == server.RoleAll || r == "reconciler" {
			return true
		}
	}
	return false
}

// repairs is what the process's reconciler repaired: every ended
// incarnation's, read when it ended, and the running one's now. Known is
// false when one of them could not be read.
func (s *Slot) Repairs(ctx context.Context) result.RepairSummary {
	s.mu.Lock()
	out := s.repaired
	out.MsgIDs = append([]uint64(nil), s.repaired.MsgIDs...)
	out.Errors = append([]string(nil), s.repaired.Errors...)
	inc := s.cur
	s.mu.Unlock()
	if !s.reconciles() {
		out.Known = true
		return out
	}
	if inc != nil {
		gctx, cancel := context.WithTimeout(ctx, ScrapeTimeout)
		rep, err := fetchRepairs(gctx, inc.addr())
		cancel()
		if err != nil {
			out.Errors = append(out.Errors, fmt.Sprintf("process %s: repairs not read: %v", s.Name, err))
		}
		out.Add(rep)
	}
	out.Known = len(out.Errors) == 0
	return out
}

// history is every incarnation so far, and the notes.
func (s *Slot) History() ([]result.ProcessRun, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]result.ProcessRun(nil), s.runs...), append([]string(nil), s.notes...)
}
