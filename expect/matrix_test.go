package expect

import (
	"os"
	"strings"
	"testing"

	"imlab/result"
	"imlab/result/resulttest"
	"imlab/scenario"
)

func TestMatrixTable(t *testing.T) {
	matrixFile, err := os.ReadFile("../scenario/testdata/matrix.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := scenario.Parse("m.yaml", append(matrixFile, "matrix:\n  consumers: [1, 2]\n"...))
	runs, _ := scenario.Expand(f)
	lag := resulttest.LagTimeline(0, 0, 3, 2, 0.5, 0.1, 0, 0)
	fig, err := RecoveryFigures(RecoveryConfig(scenario.ExpectSpec{}, 2, 10e9), "end of the burst", lag)
	if err != nil {
		t.Fatal(err)
	}
	res := []*result.Result{{Scenario: runs[0].Name, Spec: runs[0], Recovery: fig, Passed: true}, {Scenario: runs[1].Name, Spec: runs[1]}}
	out := result.MatrixTable(res)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "m.consumers-1") || !strings.Contains(lines[1], " 2s ") || !strings.Contains(lines[1], "5000") ||
		!strings.Contains(lines[2], "m.consumers-2") || !strings.Contains(lines[2], "n/a") || !strings.Contains(lines[2], "not checked") {
		t.Fatalf("table:\n%s", out)
	}
	for i, want := range []string{"1", "2"} {
		if fields := strings.Fields(lines[i+1]); fields[1] != want {
			t.Fatalf("consumers column of line %d: %v", i+1, fields)
		}
	}
}
