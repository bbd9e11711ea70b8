package selftest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"imlab/runner"
)

// TestFilesAndRunRefusals: with no file named, the shipped glob is read
// and a capacity search left out (said on the writer); named, it is
// included; no match, a bad file and an unknown defect are errors that
// are not a matrix's problems, and nothing is written for them.
func TestFilesAndRunRefusals(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "scenarios"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"capacity-smoke.yaml", "redis-wipe.yaml"} {
		b, err := os.ReadFile(filepath.Join("../scenarios", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "scenarios", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	var w strings.Builder
	files, err := Files(nil, &w)
	if err != nil || len(files) != 1 || files[0].Name != "redis-wipe" {
		t.Fatalf("globbed: %v %v", files, err)
	}
	if !strings.Contains(w.String(), "skipped scenarios/capacity-smoke.yaml: a capacity search") {
		t.Fatalf("the skip is not said: %q", w.String())
	}
	if files, err := Files([]string{"scenarios/capacity-smoke.yaml"}, &w); err != nil || len(files) != 1 {
		t.Fatalf("named: %v %v", files, err)
	}
	if _, err := Files([]string{"scenarios/none.yaml"}, &w); err == nil {
		t.Fatal("a missing file was read")
	}
	out := filepath.Join(dir, "out")
	var probs *ProblemsError
	_, err = Run(context.Background(), SelftestConfig{Base: runner.DefaultConfig(out), Defects: []string{"no-such"}}, nil, &w)
	if err == nil || errors.As(err, &probs) {
		t.Fatalf("an unknown defect: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(out, MatrixFile)); serr == nil {
		t.Fatal("a matrix was written for a selftest that did not run")
	}
	if err := os.Remove(filepath.Join(dir, "scenarios", "redis-wipe.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "scenarios", "capacity-smoke.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := Files(nil, &w); err == nil || !strings.Contains(err.Error(), "none match "+DefaultGlob) {
		t.Fatalf("no match: %v", err)
	}
}

// TestProblemsError is the matrix's problems joined, as the command
// prints them.
func TestProblemsError(t *testing.T) {
	err := error(&ProblemsError{Problems: []string{"defect b was missed", "the unmodified server did not pass s2"}})
	if got := err.Error(); got != "defect b was missed; the unmodified server did not pass s2" {
		t.Fatalf("%q", got)
	}
}
