package runner

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"imlab/compose"
	"imlab/internal/proccpu"
	"imlab/result"
	"imlab/runner/cpuline"
	"imlab/runner/proc"
)

// sharedServers are the command names of a database server the run may
// share with other clients (external backends): read by name, and said so.
func sharedServers() []string { return []string{"mariadbd", "mysqld", "redis-server"} }

// cpuWatch starts the run's CPU timeline (runner/cpuline) on its own
// goroutine, owned by the load phase: stop ends it and returns the
// timeline (nil when it could not run; why goes to the run's notes).
func (r *run) cpuWatch(ctx context.Context, base time.Time) (stop func() *result.CPULine) {
	shared, notes := r.cpuShared()
	self := r.runnerLine() // named once: its line keeps its name through faults
	cfg := cpuline.Config{Targets: func() []cpuline.Target { return r.cpuTargets(self, shared) }, Notes: notes}
	cctx, cancel := context.WithCancel(ctx)
	type out struct {
		line *result.CPULine
		err  error
	}
	done := make(chan out, 1)
	go func() {
		line, err := cpuline.Run(cctx, cfg, base)
		done <- out{line, err}
	}()
	return func() *result.CPULine {
		cancel()
		o := <-done
		if o.err != nil {
			r.res.Errors = append(r.res.Errors, fmt.Sprintf("CPU timeline not recorded: %v", o.err))
		}
		return o.line
	}
}

// procLine names a server process of the run wherever its CPU is said
// (the CPU timeline, a capacity search's watched processes, the runner's
// line): its name and roles, "api[api,reconciler]".
func procLine(s *proc.Slot) string {
	return s.Name + "[" + strings.Join(s.Roles(), ",") + "]"
}

// runnerLine names the runner's own line: the generator and every part of
// the run inside the runner.
func (r *run) runnerLine() string {
	return "runner (" + strings.Join(append([]string{"generator"}, r.inRunner()...), ", ") + ")"
}

// inRunner names the parts of the run inside the runner's process beside
// the generator: the in-process server processes, the embedded backends,
// the in-process Kafka and the fault proxies (none: the generator is alone
// in its process).
func (r *run) inRunner() []string {
	var in []string
	for _, s := range r.procs {
		if inc := s.Current(); inc == nil || inc.Pid() <= 0 {
			in = append(in, procLine(s)) // as an exec process's line is named
		}
	}
	if r.cb != nil {
		for _, part := range r.cb.Embedded {
			in = append(in, "embedded "+part)
		}
	}
	if r.kafka != nil {
		in = append(in, "in-process kafka")
	}
	if r.px != nil && len(r.px.Names()) > 0 {
		in = append(in, "fault proxies")
	}
	return in
}

// cpuTargets are the processes read at a tick: the runner, each exec
// process's current incarnation, the run's private database servers and
// the shared ones found by name at the start.
func (r *run) cpuTargets(self string, shared []cpuline.Target) []cpuline.Target {
	ts := []cpuline.Target{{Name: self, PID: os.Getpid()}}
	for _, s := range r.procs {
		if inc := s.Current(); inc != nil && inc.Pid() > 0 {
			ts = append(ts, cpuline.Target{Name: procLine(s), PID: inc.Pid()})
		}
	}
	if r.cb != nil {
		for _, part := range []string{compose.PartMySQL, compose.PartRedis} {
			if pid := r.cb.PIDs[part]; pid > 0 {
				ts = append(ts, cpuline.Target{Name: part + " (private)", PID: pid})
			}
		}
	}
	return append(ts, shared...)
}

// cpuShared finds, once, the database servers of the machine that are not
// the run's own (external backends): read by name, their CPU may be other
// clients' too; the notes say so, and what is not read.
func (r *run) cpuShared() ([]cpuline.Target, []string) {
	private := 0
	if r.cb != nil {
		for _, part := range []string{compose.PartMySQL, compose.PartRedis} {
			if r.cb.PIDs[part] > 0 {
				private++
			}
		}
	}
	notes := []string{"the runner's line holds the generator and every part of the run inside the runner (in-process server processes, embedded backends)"}
	if private == 2 {
		return nil, notes
	}
	found, err := proccpu.ByComm(sharedServers())
	if err != nil {
		return nil, append(notes, fmt.Sprintf("shared database servers not read: %v", err))
	}
	var ts []cpuline.Target
	for _, name := range sharedServers() {
		for _, pid := range found[name] {
			if r.cb != nil && (pid == r.cb.PIDs[compose.PartMySQL] || pid == r.cb.PIDs[compose.PartRedis]) {
				continue
			}
			n := name
			if len(found[name]) > 1 {
				n = fmt.Sprintf("%s:%d", name, pid)
			}
			ts = append(ts, cpuline.Target{Name: n + " (by name)", PID: pid, Found: "by name"})
		}
	}
	if len(ts) > 0 {
		notes = append(notes, "a line marked (by name) is a server found by its command name, not started by the run: its CPU may be other clients' too")
	}
	return ts, notes
}
