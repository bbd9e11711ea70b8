package scenario

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// matrixFile is a file with one consumer process, ready for a matrix
// block (the expect package's tests read it too).
var matrixFile = mustRead("testdata/matrix.yaml")

// mustRead is the test file at path, or a panic: the tests cannot run
// without it.
func mustRead(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestExpandMatrix(t *testing.T) {
	f, err := Parse("m.yaml", []byte(matrixFile+"matrix:\n  consumers: [1, 2, 4]\n"))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Expand(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Fatalf("%d runs", len(runs))
	}
	for i, want := range []int{1, 2, 4} {
		g := runs[i]
		ps := g.Processes()
		var names []string
		for _, p := range ps {
			names = append(names, p.Name)
			if p.Count != 0 {
				t.Fatalf("expanded process %+v keeps its count", p)
			}
		}
		if g.Matrix != nil || g.ConsumerProcesses() != want || len(ps) != want+1 || g.Variant == "" || !strings.HasSuffix(g.Name, ".consumers-"+string(rune('0'+want))) {
			t.Fatalf("run %d: %s %q processes %v", i, g.Name, g.Variant, names)
		}
		if want > 1 && (names[1] != "consumer-1" || names[want] != "consumer-"+string(rune('0'+want)) || !ps[want].Exec) {
			t.Fatalf("run %d: names %v", i, names)
		}
		if want == 1 && names[1] != "consumer" {
			t.Fatalf("one consumer is named %v", names)
		}
	}
	if f.Server.Processes[1].Count != 0 || f.Matrix == nil {
		t.Fatal("Expand changed its input")
	}
	// without a matrix: the file itself.
	g, _ := Parse("m.yaml", []byte(matrixFile))
	if runs, err := Expand(g); err != nil || len(runs) != 1 || runs[0] != g {
		t.Fatalf("no matrix: %v %v", runs, err)
	}
}

func TestMatrixBad(t *testing.T) {
	for name, c := range map[string]struct{ body, want string }{
		"empty":         {matrixFile + "matrix:\n  consumers: []\n", "matrix.consumers"},
		"zero":          {matrixFile + "matrix:\n  consumers: [0]\n", "matrix.consumers[0]"},
		"above parts":   {matrixFile + "matrix:\n  consumers: [1, 17]\n", "matrix.consumers[1]: 17"},
		"twice":         {matrixFile + "matrix:\n  consumers: [2, 2]\n", "given twice"},
		"no consumer":   {strings.Replace(matrixFile, "roles: [consumer]", "roles: [relay]", 1) + "matrix:\n  consumers: [2]\n", "exactly one process"},
		"fault target":  {matrixFile + "faults:\n  - {at: 1s, for: 1s, kind: kill, target: consumer}\nmatrix:\n  consumers: [2]\n", "a fault targets"},
		"api count":     {strings.Replace(matrixFile, "roles: [api, reconciler]", "roles: [api, reconciler]\n      count: 2", 1), "only the first would serve"},
		"count clashes": {strings.Replace(matrixFile, "      exec: true\n", "      exec: true\n      count: 2\n    - name: consumer-1\n      roles: [relay]\n", 1), "used twice once the counts are expanded"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(c.body))
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v: want %q", err, c.want)
			}
		})
	}
	// a count of its own is refused under a matrix; a kill fault may
	// target one copy of a counted process.
	body := strings.Replace(matrixFile, "      exec: true\n", "      exec: true\n      count: 2\n", 1)
	if _, err := Parse("bad.yaml", []byte(body+"matrix:\n  consumers: [1]\n")); err == nil || !strings.Contains(err.Error(), "count of its own") {
		t.Fatalf("count under a matrix: %v", err)
	}
	if _, err := Parse("ok.yaml", []byte(body+"faults:\n  - {at: 1s, for: 1s, kind: kill, target: consumer-2}\n")); err != nil {
		t.Fatalf("kill of a copy: %v", err)
	}
}
