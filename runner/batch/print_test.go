package batch

import (
	"bytes"
	"strings"
	"testing"

	"imlab/result"
)

// TestPrintResultSaysFallbackFirst: a run whose MySQL fell back to the
// embedded one says so, with the cause, right under its status line, not
// after the checks.
func TestPrintResultSaysFallbackFirst(t *testing.T) {
	res := &result.Result{Scenario: "s", Passed: true, Backends: "mysql=embedded go-mysql-server (fallback: no mariadbd or mysqld on PATH)",
		Fallbacks: map[string]string{"mysql": "no mariadbd or mysqld on PATH"},
		Checks:    []result.Check{{Name: "verdict", Want: "VALID", Got: "VALID", OK: true}}}
	var b bytes.Buffer
	PrintResult(&b, res, t.TempDir())
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 2 || lines[1] != "    fallback: mysql runs embedded in place of a local server: no mariadbd or mysqld on PATH" {
		t.Fatalf("the line under the status is not the fallback:\n%s", b.String())
	}
}
