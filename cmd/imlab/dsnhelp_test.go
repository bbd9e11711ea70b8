package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestScenarioRunHelpSaysTheDatabaseIsReplaced: scenario run --help and
// the README say that --mysql-dsn's database name is replaced by one per
// run, so no one looks for a run's rows under the DSN's name.
func TestScenarioRunHelpSaysTheDatabaseIsReplaced(t *testing.T) {
	cmd := newRootCmd()
	var b bytes.Buffer
	cmd.SetOut(&b)
	cmd.SetErr(&b)
	cmd.SetArgs([]string{"scenario", "run", "--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "database name is replaced by one per run, imlab_scn_<run id>") {
		t.Errorf("scenario run --help does not say the DSN's database is replaced:\n%s", b.String())
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "`imlab_scn_<run id>`") {
		t.Error("the README does not say a scenario run's database is imlab_scn_<run id>")
	}
}
