package house

import (
	"path/filepath"
	"strings"
	"testing"
)

// rooms are the lab's packages this measure holds to the targets.
var rooms = []string{"scenario", "scenarios", "runner", "expect", "result", "report", "selftest", "faults", "recovery"}

// TestHouse prints the tree's shape (run with -v) and holds the rooms to
// the targets: no package over 2,500 lines, no file over 700.
func TestHouse(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tree, err := Measure(root, "imlab")
	if err != nil {
		t.Fatal(err)
	}
	if tree.Pkgs["runner"] == nil || tree.Pkgs["internal/house"] == nil {
		t.Fatalf("the measure missed packages: %d found", len(tree.Pkgs))
	}
	t.Logf("packages:\n%s", tree.Table())
	pkgs, files, funcs := tree.Over(2500, 700, 100)
	t.Logf("over 2,500 lines: %s", strings.Join(pkgs, ", "))
	t.Logf("files over 700 lines: %s", strings.Join(files, ", "))
	for _, f := range funcs {
		t.Logf("func over 100 lines: %s/%s %s %d", f.Pkg, f.File, f.Name, f.Lines)
	}
	pkgs, files, _ = tree.Over(2500, 700, 100, rooms...)
	for _, p := range pkgs {
		t.Errorf("room over 2,500 lines: %s", p)
	}
	for _, f := range files {
		t.Errorf("file of a room over 700 lines: %s", f)
	}
}
