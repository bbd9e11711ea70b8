package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCompareCmd runs `imlab compare ARGS`: its exit status, stdout and
// stderr.
func runCompareCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runImlab(t, context.Background(), append([]string{"compare"}, args...)...)
}

// summaryFile writes a load summary.json with the given ACK p99 (ms).
func summaryFile(t *testing.T, dir, name, shape string, p99ms int64) string {
	t.Helper()
	s := map[string]any{"run_id": name, "shape": shape, "send_via": "http", "duration": "10s", "pacer": map[string]any{},
		"ok": 10000, "fail": 0, "unknown": 0,
		"latency": map[string]any{"response": map[string]int64{"count": 10000, "p50_us": 1000, "p99_us": p99ms * 1000, "p999_us": p99ms * 1000}}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompareExitStatuses(t *testing.T) {
	dir := t.TempDir()
	base := summaryFile(t, dir, "base", "const:1000", 100)
	same := summaryFile(t, dir, "same", "const:1000", 104)
	worse := summaryFile(t, dir, "worse", "const:1000", 150)
	other := summaryFile(t, dir, "other", "const:2000", 100)

	if code, out, _ := runCompareCmd(t, base, same); code != 0 || !strings.Contains(out, "tolerance only") || !strings.Contains(out, "no regression") {
		t.Fatalf("same: exit %d\n%s", code, out)
	}
	md, ju, js := filepath.Join(dir, "r.md"), filepath.Join(dir, "r.xml"), filepath.Join(dir, "r.json")
	code, out, errOut := runCompareCmd(t, "--markdown", md, "--junit", ju, "--json", js, base, worse)
	if code != compareExitRegressed || !strings.Contains(out, "REGRESSED") || !strings.Contains(errOut, "REGRESSION") {
		t.Fatalf("worse: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, p := range []string{md, ju, js} {
		if b, err := os.ReadFile(p); err != nil || !bytes.Contains(b, []byte("ack_p99")) {
			t.Fatalf("%s: %v %q", p, err, b)
		}
	}
	var rep struct {
		Rows []struct {
			Metric string   `json:"metric"`
			P      *float64 `json:"p"`
		} `json:"rows"`
	}
	if b, _ := os.ReadFile(js); json.Unmarshal(b, &rep) != nil || len(rep.Rows) == 0 || rep.Rows[0].P != nil {
		t.Fatalf("json report: no p-value must be null: %+v", rep)
	}
	for name, args := range map[string][]string{
		"missing file": {base, filepath.Join(dir, "absent.json")},
		"mismatch":     {base, other},
		"one arg":      {base},
		"bad tol":      {"--tolerance", "ack_p99:-5%", base, same},
		"empty side":   {base, "--"},
	} {
		if code, _, errOut := runCompareCmd(t, args...); code != compareExitUnusable {
			t.Errorf("%s: exit %d, want 2 (%s)", name, code, errOut)
		}
	}
	if code, _, _ := runCompareCmd(t, "--allow-mismatch", base, other); code != 0 {
		t.Errorf("allowed mismatch: exit %d", code)
	}
}

func TestCompareManyRuns(t *testing.T) {
	dir := t.TempDir()
	var base, nw []string
	for i := range 5 {
		base = append(base, summaryFile(t, dir, fmt.Sprintf("b%d", i), "const:1000", int64(100+i)))
		nw = append(nw, summaryFile(t, dir, fmt.Sprintf("n%d", i), "const:1000", int64(130+i)))
	}
	code, out, _ := runCompareCmd(t, append(append(base, "--"), nw...)...)
	if code != compareExitRegressed || !strings.Contains(out, "U test") {
		t.Fatalf("dash form: exit %d\n%s", code, out)
	}
	code2, out2, _ := runCompareCmd(t, "--base", strings.Join(base, ","), "--new", strings.Join(nw, ","))
	if code2 != code || out2 != out {
		t.Fatalf("flag form differs: exit %d\n%s", code2, out2)
	}
}

func TestCapacityBadFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"slo":    {"--slo", "ack_p99<200ms"},
		"pid":    {"--pid", "ref"},
		"rates":  {"--from", "500", "--to", "100"},
		"step":   {"--step", "1500ms"},
		"mix":    {"--mix", "default", "--mix-revoke", "1.5"},
		"preset": {"--mix", "most"},
	} {
		code, _, errOut := runImlab(t, context.Background(), append([]string{"capacity", "--secret", "imlab-capacity-secret-0123456789", "--out", t.TempDir(), "--ceiling", "0"}, args...)...)
		if code != capacityExitBroken {
			t.Errorf("%s: exit %d, want 2 (%s)", name, code, errOut)
		}
		if name == "mix" && !strings.Contains(errOut, "mix.revoke") {
			t.Errorf("mix: the error does not name the key mix.revoke: %s", errOut)
		}
	}
}
