package runner

import (
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"imlab/capacity"
	"imlab/compare"
	"imlab/expect"
	"imlab/result"
	"imlab/scenario"
)

// TestRunCapacitySmoke runs the shipped capacity file end to end against
// the real MariaDB and Redis: the search runs against the topology the
// file starts (the api in its own OS process), every step is checked,
// the capacity result and page land in the run's directory, the api
// process's CPU is read from its own pid, and the run passes on its
// expectation. compare reads the scenario's result with its capacity
// figures.
func TestRunCapacitySmoke(t *testing.T) {
	f, err := scenario.ReadFile("../scenarios/capacity-smoke.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := e2eConfig(t)
	res, err := Run(t.Context(), cfg, f)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Logf("%s\n%s", expect.Table(res.Checks), strings.Join(res.Errors, "\n"))
	c := res.Capacity
	if c == nil || !res.Passed || res.Incomplete {
		t.Fatalf("capacity-smoke did not pass: %+v", c)
	}
	if c.Sustainable == nil || *c.Sustainable < *f.Expect.MinSustainable || c.Checked == 0 || c.Invalid != 0 {
		t.Fatalf("capacity summary %+v", c)
	}
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, CapacityDir, capacity.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	var cr capacity.Result
	if err := json.Unmarshal(b, &cr); err != nil {
		t.Fatal(err)
	}
	api := -1
	for i, p := range cr.Procs {
		if p.Name == "api[api]" {
			api = i
		}
	}
	if api < 0 || cr.Procs[api].PID == os.Getpid() {
		t.Fatalf("the exec api process must be watched by its own pid: %+v", cr.Procs)
	}
	for _, st := range cr.Steps {
		if st.Held && (st.Valid == nil || !*st.Valid) {
			t.Fatalf("a step held without a valid verdict: %+v", st)
		}
		if st.Held && st.CPU[api].Err == "" && st.CPU[api].USPerMsg == nil {
			t.Fatalf("the api's CPU per message is missing without a reason: %+v", st.CPU[api])
		}
	}
	// The run's generator setting is what the search's steps ran with (its
	// own pacer, as its result.json records), not the load section's spin.
	if got := settingOf(res.Settings, "generator"); strings.Contains(got, "pacer spin") || !strings.Contains(got, "the capacity search's steps: "+cr.Generator.Text()) {
		t.Fatalf("generator setting %q, the search's generator %+v", got, cr.Generator)
	}
	// The run's backends, as compose named them, are the search's and its
	// page's: the page says what served the target beside what it watched.
	if cr.Backends == "" || !strings.Contains(cr.Backends, "mysql=") || cr.Backends != res.Backends {
		t.Fatalf("capacity result backends %q, the run's %q", cr.Backends, res.Backends)
	}
	page, err := os.ReadFile(filepath.Join(cfg.OutDir, CapacityDir, capacity.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if text := html.UnescapeString(string(page)); !strings.Contains(text, cr.Backends) || !strings.Contains(text, fmt.Sprintf("api[api] pid %d", cr.Procs[api].PID)) {
		t.Errorf("capacity report.html's header lacks the backends %q or the api's pid", cr.Backends)
	}
	for _, n := range []string{result.ResultFile, result.JUnitFile, result.ReportFile} {
		if _, err := os.Stat(filepath.Join(cfg.OutDir, n)); err != nil {
			t.Fatal(err)
		}
	}
	run, err := compare.Read(cfg.OutDir)
	if err != nil || run.Metrics[compare.MSustainable] != *c.Sustainable || run.Metrics[compare.MPassed] != 1 {
		t.Fatalf("compare.Read: %v %+v", err, run)
	}
}
