package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/scenario"
)

// validSpec is a spec for a strict api process on the test servers.
func validSpec(t *testing.T) ChildSpec {
	t.Helper()
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	return ChildSpec{Server: scenario.ServerSpec{Policy: "strict"}, Process: scenario.ProcessSpec{Name: "api", Roles: []string{"api"}, Exec: true},
		Node: 1, Listen: "127.0.0.1:0", Secret: "child-test-secret-0123456789", RedisPrefix: rd.Keys.Prefix,
		RunID: RandomID(), Partitions: scenario.DefaultKafkaPartitions, Backends: ChildBackends{MySQLDSN: my.DSN, RedisAddr: rd.Addr}}
}

func specLine(t *testing.T, s ChildSpec) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// TestChildMainBadSpec: a spec that cannot be read or is invalid is
// refused with a clear error, as the one line on stdout too, and nothing
// starts (ChildMain returns at once).
func TestChildMainBadSpec(t *testing.T) {
	good := ChildSpec{Server: scenario.ServerSpec{Policy: "strict"}, Process: scenario.ProcessSpec{Name: "api", Roles: []string{"api"}},
		Node: 1, Listen: "127.0.0.1:0", Secret: "child-test-secret-0123456789", RunID: "abc", Partitions: 16,
		Backends: ChildBackends{MySQLDSN: "root@tcp(127.0.0.1:3306)/x", RedisAddr: "127.0.0.1:6379"}}
	mut := func(f func(*ChildSpec)) string {
		s := good
		f(&s)
		return specLine(t, s)
	}
	for _, c := range []struct{ name, in, want string }{
		{"empty", "", "empty"},
		{"blank line", "\n", "empty"},
		{"not json", "not json\n", "not a ChildSpec JSON line"},
		{"truncated", `{"server":{`, "not a ChildSpec JSON line"},
		{"unknown field", `{"colour":"red"}` + "\n", `unknown field "colour"`},
		{"two values", `{} {}` + "\n", "more than one JSON value"},
		{"too long", strings.Repeat(" ", MaxChildLine+10) + "\n", "longer than"},
		{"no roles", mut(func(s *ChildSpec) { s.Process.Roles = nil }), "process.roles"},
		{"bad role", mut(func(s *ChildSpec) { s.Process.Roles = []string{"chef"} }), "process.roles"},
		{"policy", mut(func(s *ChildSpec) { s.Server.Policy = "yolo" }), "server.policy"},
		{"processes", mut(func(s *ChildSpec) { s.Server.Processes = []scenario.ProcessSpec{{Name: "a", Roles: []string{"api"}}} }), "server.processes"},
		{"node", mut(func(s *ChildSpec) { s.Node = 0 }), "node"},
		{"listen remote", mut(func(s *ChildSpec) { s.Listen = "10.0.0.1:80" }), "loopback"},
		{"listen bad", mut(func(s *ChildSpec) { s.Listen = "nowhere" }), "listen"},
		{"secret", mut(func(s *ChildSpec) { s.Secret = "short" }), "secret"},
		{"prefix", mut(func(s *ChildSpec) { s.RedisPrefix = "a*" }), "redis_prefix"},
		{"run id", mut(func(s *ChildSpec) { s.RunID = "A B" }), "run_id"},
		{"partitions", mut(func(s *ChildSpec) { s.Partitions = 3 }), "partitions"},
		{"no backends", mut(func(s *ChildSpec) { s.Backends = ChildBackends{} }), "backends"},
		{"bad dsn", mut(func(s *ChildSpec) { s.Backends.MySQLDSN = "::" }), "mysql_dsn"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var out, logs bytes.Buffer
			err := ChildMain(ctx, io.NopCloser(strings.NewReader(c.in)), &out, &logs)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v: want one naming %q", err, c.want)
			}
			if !errors.Is(err, scenario.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			var r childReady
			if jerr := json.Unmarshal(out.Bytes(), &r); jerr != nil || r.Error == "" || r.Addr != "" || r.AddrInUse {
				t.Fatalf("stdout %q: want one error line (%v)", out.String(), jerr)
			}
			if strings.Count(out.String(), "\n") != 1 {
				t.Fatalf("stdout %q: want exactly one line", out.String())
			}
		})
	}
}

// TestChildProcessBadSpec: the child command (this test binary, as imlab
// scenario child) given bad JSON on stdin prints the error line, says why
// on stderr and exits with status 1.
func TestChildProcessBadSpec(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	argv := testChildCommand(t)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader("{not json\n")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit %v: want status 1\nstderr: %s", err, errb.String())
	}
	if !strings.Contains(errb.String(), "child spec on stdin: not a ChildSpec JSON line") {
		t.Fatalf("stderr does not say why: %q", errb.String())
	}
	var r childReady
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || !strings.Contains(r.Error, "not a ChildSpec") {
		t.Fatalf("stdout %q: want the error line (%v)", out.String(), err)
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestChildLifecycle runs an exec process against the real servers: it
// serves, its metrics are scraped, a kill is a SIGKILL, a restart is a new
// pid (the spare) on the same address, a child whose stdin closes stops by
// itself, and the final stop kills the spare left over.
func TestChildLifecycle(t *testing.T) {
	t.Parallel()
	spec := validSpec(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "process-api.log")
	logw, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logw.Close()
	// Two faults to come: the first start and the restart each spawn a spare.
	s := NewSlot(spec, nil, testChildCommand(t), logw, logPath, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	defer func() { _ = s.Stop(context.Background()) }()
	spareOf := func() *Child {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.spare
	}

	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	first := s.Current().Pid()
	addr := s.APIAddr()
	if first == os.Getpid() || first == 0 || addr == "" || addr != s.Addr() {
		t.Fatalf("pid %d, api %q, addr %q", first, addr, s.Addr())
	}
	if code := get(t, "http://"+addr+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz %d", code)
	}
	mfs, err := s.Current().Gather(ctx)
	if err != nil || len(mfs) == 0 {
		t.Fatalf("scrape: %d families, %v", len(mfs), err)
	}
	if s.TruncatedPulls(ctx) != 0 {
		t.Fatal("truncated pulls without pulls")
	}
	spare := spareOf()
	if spare == nil || !spare.alive() {
		t.Fatal("no spare process for the restart")
	}

	if err := s.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != "" {
		t.Fatal("a killed process still has an address")
	}
	if err := s.Kill(ctx); err == nil {
		t.Fatal("a kill of a process that is down was accepted")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	second := s.Current().Pid()
	if second == first || second != spare.Pid() || s.APIAddr() != addr {
		t.Fatalf("restart: pid %d (was %d, spare %d), addr %q (was %q)", second, first, spare.Pid(), s.APIAddr(), addr)
	}
	if code := get(t, "http://"+addr+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz after the restart %d", code)
	}
	next := spareOf()
	if next == nil || next == spare {
		t.Fatal("the restart spawned no spare for the second fault")
	}

	// stdin closing (the runner gone) stops a child by itself.
	c := s.Current().(*Child)
	_ = c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(StopTimeout):
		t.Fatal("a child whose stdin closed did not stop")
	}
	if !c.state.Success() || s.Addr() != "" {
		t.Fatalf("child after stdin closed: %s, addr %q", c.state, s.Addr())
	}
	if err := s.Stop(ctx); err == nil || !strings.Contains(err.Error(), "had exited on its own") {
		t.Fatalf("stop of a process that had exited: %v", err)
	}
	if next.alive() || spareOf() != nil {
		t.Fatal("the spare outlived the stop")
	}
	runs, notes := s.History()
	if len(runs) != 2 {
		t.Fatalf("runs %+v", runs)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "counters before it ended not read") {
		t.Fatalf("notes %q: want the one about the exited process's counters", notes)
	}
	if r := runs[0]; r.PID != first || r.End != EndKilled || r.Signal != "killed" || r.State != "signal: killed" {
		t.Fatalf("first incarnation %+v: want killed by SIGKILL", r)
	}
	if r := runs[1]; r.PID != second || r.End != EndExited || r.Signal != "" || r.State != "exit status 0" || r.StartedAt.Before(runs[0].EndedAt) {
		t.Fatalf("second incarnation %+v: want a clean exit of its own", r)
	}
	b, err := os.ReadFile(logPath)
	if err != nil || !bytes.Contains(b, []byte("child ready")) || !bytes.Contains(b, []byte("stopping: stdin closed")) {
		t.Fatalf("process log: %v\n%s", err, b)
	}
}

// TestChildStartFails: a child that cannot start (its listen address taken
// by another) is reported as such, with errAddrInUse, and is gone.
func TestChildStartFails(t *testing.T) {
	t.Parallel()
	spec := validSpec(t)
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	spec.Listen = ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logw, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logw.Close()
	c, err := startChild(ctx, testChildCommand(t), spec, logw)
	if err == nil {
		_, _ = c.kill()
		t.Fatal("a child on a taken address started")
	}
	if !errors.Is(err, errAddrInUse) {
		t.Fatalf("error %v: want errAddrInUse", err)
	}
}

// TestKillNeedsExec: the runner refuses to kill a process that runs inside
// it (the file validation refuses it first), and changes nothing.
func TestKillNeedsExec(t *testing.T) {
	spec := ChildSpec{Server: scenario.ServerSpec{Policy: "strict"}, Process: scenario.ProcessSpec{Name: "api", Roles: []string{"api"}},
		Node: 1, Listen: "127.0.0.1:0", RunID: "abc", Partitions: 16}
	s := NewSlot(spec, nil, nil, nil, "", 1)
	if err := s.Kill(context.Background()); !errors.Is(err, scenario.ErrInvalid) || !strings.Contains(err.Error(), "only an exec process") {
		t.Fatalf("kill of an in-process process: %v", err)
	}
	if runs, notes := s.History(); len(runs) != 0 || len(notes) != 0 || s.spares != 0 {
		t.Fatalf("the refused kill changed the slot: %+v %v", runs, notes)
	}
}
