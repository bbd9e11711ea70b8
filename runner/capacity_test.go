package scenarios

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"imlab/capacity"
	"imlab/compare"
)

// TestRunCapacitySmoke runs the shipped capacity file end to end against
// the real MariaDB and Redis: the search runs against the topology the
// file starts (the api in its own OS process), every step is checked,
// the capacity result and page land in the run's directory, the api
// process's CPU is read from its own pid, and the run passes on its
// expectation. compare reads the scenario's result with its capacity
// figures.
func TestRunCapacitySmoke(t *testing.T) {
	f, err := ReadFile("capacity-smoke.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := e2eConfig(t)
	res, err := Run(t.Context(), cfg, f)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Logf("%s\n%s", Table(res.Checks), strings.Join(res.Errors, "\n"))
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
	if _, err := os.Stat(filepath.Join(cfg.OutDir, CapacityDir, capacity.ReportFile)); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{ResultFile, JUnitFile, ReportFile} {
		if _, err := os.Stat(filepath.Join(cfg.OutDir, n)); err != nil {
			t.Fatal(err)
		}
	}
	run, err := compare.Read(cfg.OutDir)
	if err != nil || run.Metrics[compare.MSustainable] != *c.Sustainable || run.Metrics[compare.MPassed] != 1 {
		t.Fatalf("compare.Read: %v %+v", err, run)
	}
}

// TestCapacityFileValidation: a capacity file says its search and nothing
// a search does not do.
func TestCapacityFileValidation(t *testing.T) {
	good := `name: c
kind: capacity
load: {users: 10}
capacity: {slo: 'ack_p99<=1s', from: 10, to: 100}
expect: {min_sustainable: 10}
`
	if _, err := Parse("c.yaml", []byte(good)); err != nil {
		t.Fatalf("good file: %v", err)
	}
	for name, bad := range map[string]string{
		"rate":         strings.Replace(good, "load: {users: 10}", "load: {users: 10, rate: 'const:10', duration: 5s}", 1),
		"no block":     strings.Replace(good, "capacity: {slo: 'ack_p99<=1s', from: 10, to: 100}\n", "", 1),
		"bad slo":      strings.Replace(good, "ack_p99<=1s", "p99<1s", 1),
		"from > to":    strings.Replace(good, "from: 10, to: 100", "from: 100, to: 10", 1),
		"no minimum":   strings.Replace(good, "expect: {min_sustainable: 10}", "expect: {}", 1),
		"other expect": strings.Replace(good, "{min_sustainable: 10}", "{min_sustainable: 10, max_lost: 0}", 1),
		"faults":       good + "faults: [{kind: redis_wipe, at: 1s}]\n",
		"kind":         strings.Replace(good, "kind: capacity", "kind: search", 1),
		"run kind":     "name: r\nload: {rate: 'const:10', duration: 5s, users: 10}\nexpect: {min_sustainable: 10}\n",
	} {
		if _, err := Parse("c.yaml", []byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
