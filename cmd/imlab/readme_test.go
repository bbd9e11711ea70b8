package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readme is README.md with its line breaks and runs of spaces as one
// space, so that a quoted line may wrap.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// TestReadmeNamesEveryShippedScenario: README's "Shipped scenarios"
// paragraph names every file the glob scenarios/*.yaml holds, so the list
// cannot fall behind the directory (README gives no count of them).
func TestReadmeNamesEveryShippedScenario(t *testing.T) {
	text := readme(t)
	start := strings.Index(text, "Shipped scenarios (")
	end := strings.Index(text, "### Every option under a fault")
	if start < 0 || end < start {
		t.Fatal(`README has no "Shipped scenarios" paragraph before "### Every option under a fault"`)
	}
	para := text[start:end]
	paths, err := filepath.Glob("../../scenarios/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("scenarios: %v %v", paths, err)
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".yaml")
		if !strings.Contains(para, "`"+name+"`") {
			t.Errorf("README's Shipped scenarios do not name %s (%s)", name, p)
		}
	}
}
