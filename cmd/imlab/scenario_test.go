package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"imlab/checker"
	"imlab/internal/testenv"
	"imlab/result"
	"imlab/runner/batch"
	"imlab/runner/proc"
	"imlab/scenario"
)

// runScenarioCmd runs `imlab scenario ARGS` and returns its exit status,
// stdout and stderr.
func runScenarioCmd(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	return runImlab(t, ctx, append([]string{"scenario"}, args...)...)
}

func TestScenarioValidate(t *testing.T) {
	files, err := filepath.Glob("../../scenarios/*.yaml")
	if err != nil || len(files) < 8 {
		t.Fatalf("shipped files: %v %v", files, err)
	}
	code, out, errOut := runScenarioCmd(t, context.Background(), append([]string{"validate"}, files...)...)
	if code != 0 || strings.Count(out, "ok ") != len(files) {
		t.Fatalf("validate shipped: exit %d\n%s\n%s", code, out, errOut)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\nload:\n  rate: const:1\n  duration: 1s\n  users: 5\n  colour: red\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runScenarioCmd(t, context.Background(), "validate", files[0], bad)
	if code != 2 || !strings.Contains(errOut, "bad.yaml") || !strings.Contains(errOut, "colour") {
		t.Fatalf("bad file: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = runScenarioCmd(t, context.Background(), "run", "--out", t.TempDir(), filepath.Join(t.TempDir(), "missing.yaml"))
	if code != 2 || !strings.Contains(errOut, "missing.yaml") {
		t.Fatalf("missing file: exit %d, stderr %q", code, errOut)
	}
}

// TestScenarioRunFails runs a scenario whose threshold cannot hold against
// the real MariaDB and Redis: exit status 1, the checks table and the
// files written.
func TestScenarioRunFails(t *testing.T) {
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "impossible.yaml")
	body := "name: impossible\nload:\n  rate: const:50\n  duration: 2s\n  users: 10\n  settle: 500ms\nexpect:\n  max_ack_p99: 1us\n"
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envSecret, "scenario-cmd-test-secret-0123")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out := filepath.Join(dir, "out")
	code, stdout, errOut := runScenarioCmd(t, ctx, "run", "--out", out, "--backends", "external",
		"--mysql-dsn", my.DSN, "--redis-addr", rd.Addr, "--redis-prefix", rd.Keys.Prefix, file)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, stdout, errOut)
	}
	if !strings.Contains(stdout, "FAIL  max_ack_p99") || !strings.Contains(stdout, "ok    verdict") {
		t.Fatalf("no checks table:\n%s", stdout)
	}
	for _, n := range []string{result.ResultFile, result.JUnitFile, result.ReportFile} {
		if _, err := os.Stat(filepath.Join(out, "impossible", n)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, result.JUnitFile)); err != nil {
		t.Errorf("combined junit: %v", err)
	}
	res, err := result.ReadResult(filepath.Join(out, "impossible", result.ResultFile))
	if err != nil || res.Passed {
		t.Fatalf("result: %+v %v", res, err)
	}
}

// childCmd is `imlab scenario child` with the given stdin and stdout.
func childCmd(ctx context.Context, stdin io.Reader, stdout io.Writer) *cobra.Command {
	root := newRootCmd()
	root.SetArgs([]string{"scenario", "child"})
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(io.Discard)
	root.SetContext(ctx)
	return root
}

// TestScenarioChild: the hidden `imlab scenario child` refuses bad JSON on
// stdin with a clear error (and the error line on stdout), is not listed in
// the help, and with a good spec serves until its context ends (SIGTERM
// in the binary: main's signal context).
func TestScenarioChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := childCmd(ctx, strings.NewReader("{\"server\": nope}\n"), &out).ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "child spec on stdin: not a ChildSpec JSON line") {
		t.Fatalf("bad JSON: %v", err)
	}
	if !strings.Contains(out.String(), `"error":`) || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("stdout %q: want one error line", out.String())
	}
	_, help, _ := runScenarioCmd(t, ctx, "--help")
	if strings.Contains(help, "child") || !strings.Contains(help, "validate") {
		t.Fatalf("help lists the hidden child command or not the others:\n%s", help)
	}

	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	spec := proc.ChildSpec{Server: scenario.ServerSpec{Policy: "strict"},
		Process: scenario.ProcessSpec{Name: "api", Roles: []string{"api"}, Exec: true}, Node: 1, Listen: "127.0.0.1:0",
		Secret: "scenario-child-secret-0123456789", RedisPrefix: rd.Keys.Prefix, RunID: "cmdtest", Partitions: 16,
		Backends: proc.ChildBackends{MySQLDSN: my.DSN, RedisAddr: rd.Addr}}
	line, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		err := childCmd(cctx, inR, outW).ExecuteContext(cctx)
		outW.Close()
		done <- err
	}()
	exited := false
	defer func() {
		if !exited {
			stop()
			inW.Close()
			<-done
		}
	}()
	go func() { _, _ = inW.Write(append(line, '\n')) }()
	ready, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("no ready line: %v", err)
	}
	var r struct {
		PID     int    `json:"pid"`
		APIAddr string `json:"api_addr"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal([]byte(ready), &r); err != nil || r.Error != "" || r.PID != os.Getpid() || r.APIAddr == "" {
		t.Fatalf("ready line %q: %v", ready, err)
	}
	resp, err := http.Get("http://" + r.APIAddr + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	stop()
	select {
	case err := <-done:
		exited = true
		if err != nil {
			t.Fatalf("child after its context ended: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the child did not stop when its context ended")
	}
}

// runDemoCmd runs `imlab demo ARGS` like runScenarioCmd.
func runDemoCmd(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	return runImlab(t, ctx, append([]string{"demo"}, args...)...)
}

// TestDemo runs `imlab demo` with one shipped scenario, shortened, against
// the real MariaDB and Redis: the verdict table names the scenario, its
// verdict and its report.html, which exists; an unknown name exits 2.
func TestDemo(t *testing.T) {
	code, _, errOut := runDemoCmd(t, context.Background(), "no-such-scenario")
	if code != 2 || !strings.Contains(errOut, "redis-wipe") {
		t.Fatalf("unknown scenario: exit %d, stderr %q", code, errOut)
	}
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	t.Setenv(envSecret, "demo-cmd-test-secret-0123456")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, errOut := runDemoCmd(t, ctx, "--out", out, "--duration", "3s", "--backends", "external",
		"--mysql-dsn", my.DSN, "--redis-addr", rd.Addr, "--redis-prefix", rd.Keys.Prefix, "redis-wipe")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errOut)
	}
	report := filepath.Join(out, "redis-wipe", result.ReportFile)
	var row string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "redis-wipe ") {
			row = l
		}
	}
	// Cells are at least two spaces apart; the load cell has spaces in it.
	f := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(row), -1)
	if len(f) != 8 || f[1] != "valid" || f[2] != "VALID" || (f[3] != "within load" && !strings.HasPrefix(f[3], "OVERLOADED")) ||
		f[4] != "0" || f[5] != "PASSED" || f[7] != report {
		t.Fatalf("verdict table row %q, want redis-wipe valid VALID LOAD 0 PASSED TIME %s\n%s", row, report, stdout)
	}
	if _, err := os.Stat(report); err != nil {
		t.Fatal(err)
	}
}

// TestPrintRepairs: the verdict block says that a repaired row was missing
// when the reconciler looked (not that it was lost), and tells the repaired
// messages delivered in the end from those still lost.
func TestPrintRepairs(t *testing.T) {
	r := &result.Result{Scenario: "s", Passed: true, Repairs: result.RepairSummary{Known: true, Rows: 4, MsgIDs: []uint64{1, 2, 3},
		Fate: &checker.Fate{Messages: 3, Delivered: 3, Lost: []uint64{}}}}
	var b bytes.Buffer
	batch.PrintResult(&b, r, t.TempDir())
	want := "repairs: 4 inbox rows of 3 messages written by forward reconciliation (missing when the reconciler looked); 3 messages repaired late by reconciliation and delivered in the end, 0 repaired but still lost"
	if !strings.Contains(b.String(), want) {
		t.Fatalf("output %q lacks %q", b.String(), want)
	}
}
