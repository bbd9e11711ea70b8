package house

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// rooms are the lab's packages this measure holds to the targets.
var rooms = []string{"scenario", "scenarios", "runner", "expect", "result", "report", "selftest", "faults", "recovery", "compose", "loadgen", "checker"}

// TestHouse prints the tree's shape (run with -v) and holds the rooms to
// the targets: no package over 2,500 lines, no file over 700; and every
// package outside ref/ to no function over MaxFuncLines but those
// longFuncs names.
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
	for _, f := range tree.LongFuncs(MaxFuncLines, "ref") {
		if why, ok := longFuncs[f.Pkg+"."+f.Name]; !ok || why == "" {
			t.Errorf("function over %d lines in the lab's packages: %s/%s %s %d lines (split it by stage, or name it in longFuncs with why)", MaxFuncLines, f.Pkg, f.File, f.Name, f.Lines)
		}
	}
	for name := range longFuncs {
		if !slices.ContainsFunc(tree.LongFuncs(MaxFuncLines, "ref"), func(f Func) bool { return f.Pkg+"."+f.Name == name }) {
			t.Errorf("longFuncs names %s, which is not over %d lines (any more): take it off the list", name, MaxFuncLines)
		}
	}
}

// longFuncs are the functions of the lab's packages (outside ref/) allowed
// over MaxFuncLines, by package path and name, each with why. The list
// only shrinks: a new long function fails TestHouse.
var longFuncs = map[string]string{}
