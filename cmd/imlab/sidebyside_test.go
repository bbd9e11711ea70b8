package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/result"
	"imlab/runner/batch"
)

// sideBySideFile is a target file shaped as the shipped ones, short: a
// kill of the server and a database cut.
const sideBySideFile = `name: sbs
target:
  driver: tinode
  address: 127.0.0.1:6199
  api_key_env: IMLAB_SBS_TEST_APIKEY
  exec:
    binary: ${IMLAB_SBS_TEST_BIN}
    args: [-config, "${IMLAB_SBS_TEST_CONFIG}"]
  database:
    listen: 127.0.0.1:6198
    upstream: 127.0.0.1:5432
load:
  rate: const:20
  duration: 4s
  users: 6
  devices: 1
  online: 1
  crashy: 0
  settle: 1s
  retries: 0
faults:
  - at: 1s
    for: 500ms
    kind: down
    target: database
  - at: 2s
    for: 1s
    kind: kill
    target: server
expect:
  verdict: invalid
  findings: [unexplained-gap]
`

// TestScenarioRunSideBySide: --side-by-side runs a target file and then
// its reference side (the same load and faults against the reference
// server in an exec process, its MySQL behind the proxy), and writes the
// review page of the two. No Tinode here: the target side is skipped,
// saying why (the variables unset), and the reference side runs against
// the real MariaDB and Redis with the database cut on its MySQL and the
// kill on its process, and must be VALID.
func TestScenarioRunSideBySide(t *testing.T) {
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "sbs.yaml")
	if err := os.WriteFile(file, []byte(sideBySideFile), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envSecret, "scenario-sbs-test-secret-0123")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := filepath.Join(dir, "out")
	code, stdout, errOut := runScenarioCmd(t, ctx, "run", "--side-by-side", "--out", out, "--backends", "external",
		"--mysql-dsn", my.DSN, "--redis-addr", rd.Addr, "--redis-prefix", rd.Keys.Prefix, file)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errOut)
	}
	tin, err := result.ReadRun(filepath.Join(out, "sbs"))
	if err != nil || !strings.Contains(tin.Skipped, "IMLAB_SBS_TEST_BIN") {
		t.Fatalf("target side: %+v %v", tin, err)
	}
	ref, err := result.ReadRun(filepath.Join(out, "sbs.reference"))
	if err != nil {
		t.Fatal(err)
	}
	if !ref.Passed || ref.Verdict == nil || !ref.Verdict.Valid || ref.Skipped != "" {
		t.Fatalf("reference side: passed %v skipped %q verdict %+v checks %+v errors %v", ref.Passed, ref.Skipped, ref.Verdict, ref.Checks, ref.Errors)
	}
	var killed, cut bool
	for _, e := range ref.Events {
		killed = killed || e.Action == "inject" && strings.Contains(e.Fault, "kill") && e.Err == ""
		cut = cut || e.Action == "inject" && strings.Contains(e.Fault, "down(mysql)") && e.Err == ""
	}
	if !killed || !cut {
		t.Errorf("reference side's faults: %+v", ref.Events)
	}
	page, err := os.ReadFile(filepath.Join(out, "sbs"+batch.SideBySideSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "sbs.reference") || !strings.Contains(stdout, "side by side sbs and sbs.reference") {
		t.Errorf("page or output does not name both sides:\n%s", stdout)
	}
	code, _, errOut = runScenarioCmd(t, ctx, "run", "--side-by-side", "--out", out, "../../scenarios/burst.yaml")
	if code != 2 || !strings.Contains(errOut, "external server") {
		t.Errorf("a file without a target block: exit %d, %s", code, errOut)
	}
}
