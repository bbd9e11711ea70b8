package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"imlab/result"
)

func runReportCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "imlab", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newReportCmd())
	root.SetArgs(append([]string{"report"}, args...))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.Execute()
	return out.String(), err
}

// TestReportCompare: the page is written from result.json files; a
// missing file, one of another format or no -o is an error and writes
// nothing.
func TestReportCompare(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run1")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	res := &result.Result{Format: result.ResultFormat, Scenario: "burst-50k", StartedAt: time.Now().UTC(), Passed: true,
		Settings: []result.Setting{{Name: "policy", Value: "store"}}}
	var b bytes.Buffer
	if err := res.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, result.ResultFile), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "review.html")
	out, err := runReportCmd(t, "compare", run, filepath.Join(run, result.ResultFile), "-o", page)
	if err != nil || !strings.Contains(out, "review of 2 runs") {
		t.Fatalf("compare: %v %s", err, out)
	}
	html, err := os.ReadFile(page)
	if err != nil || !strings.Contains(string(html), "imlab review: 2 runs of burst-50k") {
		t.Fatalf("page: %v", err)
	}

	old := filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte(`{"scenario":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"compare", filepath.Join(dir, "missing"), "-o", filepath.Join(dir, "a.html")}, filepath.Join(dir, "missing")},
		{[]string{"compare", old, "-o", filepath.Join(dir, "b.html")}, old},
		{[]string{"compare", run}, "-o FILE is required"},
	} {
		if _, err := runReportCmd(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %q", c.args, err, c.want)
		}
	}
	for _, f := range []string{"a.html", "b.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s written after an error", f)
		}
	}
}
