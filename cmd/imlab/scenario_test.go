package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"imlab/internal/testenv"
	"imlab/scenarios"
)

// runScenarioCmd runs `imlab scenario ARGS` and returns the exit status it
// asked for (-1: none), stdout and stderr.
func runScenarioCmd(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	code := -1
	root := &cobra.Command{Use: "imlab", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(scenarioCmd(func(c int) { code = c }))
	var out, errb bytes.Buffer
	root.SetArgs(append([]string{"scenario"}, args...))
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(ctx)
	if code == -1 && err != nil {
		t.Fatalf("error without an exit status: %v", err)
	}
	return code, out.String(), errb.String()
}

func TestScenarioValidate(t *testing.T) {
	files, err := filepath.Glob("../../scenarios/*.yaml")
	if err != nil || len(files) < 8 {
		t.Fatalf("shipped files: %v %v", files, err)
	}
	code, out, errOut := runScenarioCmd(t, context.Background(), append([]string{"validate"}, files...)...)
	if code != -1 || strings.Count(out, "ok ") != len(files) {
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
	for _, n := range []string{scenarios.ResultFile, scenarios.JUnitFile, scenarios.ReportFile} {
		if _, err := os.Stat(filepath.Join(out, "impossible", n)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, scenarios.JUnitFile)); err != nil {
		t.Errorf("combined junit: %v", err)
	}
	res, err := scenarios.ReadResult(filepath.Join(out, "impossible", scenarios.ResultFile))
	if err != nil || res.Passed {
		t.Fatalf("result: %+v %v", res, err)
	}
}
