package scenario

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestReferenceSide: a target file's reference side keeps the load and
// the fault schedule, puts the database faults on the reference's MySQL
// proxy and the process faults on its one exec process, expects a valid
// verdict, and leaves the file alone; every shipped target file has one;
// a file without an external target has none.
func TestReferenceSide(t *testing.T) {
	f, err := Parse("t.yaml", []byte(targetFile))
	if err != nil {
		t.Fatal(err)
	}
	g, err := ReferenceSide(f)
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "tt.reference" || g.Target != nil || g.Variant == "" || g.Load.Rate != f.Load.Rate || g.Load.Config.Pop.Users != f.Load.Config.Pop.Users || g.Load.Config.Pop.Users == 0 {
		t.Fatalf("reference side %+v", g)
	}
	if len(g.Faults) != 2 || g.Faults[0].Target != TargetMySQL || g.Faults[1].Target != TargetServerProcess || g.Faults[1].Kind != KindKill {
		t.Fatalf("faults %+v", g.Faults)
	}
	if p := g.Processes(); len(p) != 1 || p[0].Name != TargetServerProcess || !p[0].Exec || g.Server.PolicyOr() != "strict" {
		t.Fatalf("processes %+v", p)
	}
	if g.Expect.VerdictOr() != VerdictValid || len(g.Expect.Findings) != 0 {
		t.Fatalf("expect %+v", g.Expect)
	}
	if f.Faults[0].Target != TargetDatabaseProxy || f.Target == nil || f.Expect.VerdictOr() != VerdictInvalid {
		t.Fatalf("the file changed: %+v", f)
	}
	files, _ := filepath.Glob("../scenarios/targets/tinode-*.yaml")
	for _, p := range files {
		x, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ReferenceSide(x); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	plain, err := Parse("p.yaml", []byte("name: p\nload:\n  rate: const:5\n  duration: 2s\n  users: 5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReferenceSide(plain); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "target") {
		t.Errorf("a file without a target block: %v", err)
	}
}
