package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"imlab/scenario"
)

// workflowFile is the CI example the repository ships.
const workflowFile = "../../.github/workflows/lab.yml"

type workflow struct {
	On   map[string]any    `yaml:"on"`
	Env  map[string]string `yaml:"env"`
	Jobs map[string]struct {
		Services map[string]struct {
			Image string `yaml:"image"`
		} `yaml:"services"`
		Steps []struct {
			Name string `yaml:"name"`
			Uses string `yaml:"uses"`
			Run  string `yaml:"run"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

var (
	imlabCall = regexp.MustCompile(`(?:^|[\s;&|(])\./imlab\s+([^\n]*)`)
	cmdWord   = regexp.MustCompile(`^[a-z][a-z-]*$`)
)

// TestWorkflowCallsRealCommands parses the CI workflow and checks that
// every imlab command it runs exists, with every flag it passes, and that
// the scenario files it names are valid.
func TestWorkflowCallsRealCommands(t *testing.T) {
	b, err := os.ReadFile(workflowFile)
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatalf("%s: %v", workflowFile, err)
	}
	if _, ok := wf.On["pull_request"]; !ok {
		t.Error("the workflow must run on pull requests")
	}
	job, ok := wf.Jobs["smoke"]
	if !ok {
		t.Fatalf("no smoke job: %v", wf.Jobs)
	}
	images := map[string]bool{}
	for _, s := range job.Services {
		images[strings.SplitN(s.Image, ":", 2)[0]] = true
	}
	if !images["mariadb"] || !images["redis"] {
		t.Errorf("services %v: want mariadb and redis", images)
	}
	root := newRootCmd()
	called := map[string]bool{}
	uploads := 0
	for _, st := range job.Steps {
		if strings.HasPrefix(st.Uses, "actions/upload-artifact") {
			uploads++
		}
		script := strings.ReplaceAll(st.Run, "\\\n", " ")
		for _, m := range imlabCall.FindAllStringSubmatch(script, -1) {
			toks := strings.Fields(m[1])
			var words []string
			for _, tk := range toks {
				if !cmdWord.MatchString(tk) {
					break
				}
				words = append(words, tk)
			}
			c, rest, err := root.Find(words)
			if err != nil || c == root || len(rest) > 0 {
				t.Errorf("step %q: ./imlab %s: no such command (%v, unmatched %v)", st.Name, strings.Join(words, " "), err, rest)
				continue
			}
			called[c.CommandPath()] = true
			for _, tk := range toks[len(words):] {
				if !strings.HasPrefix(tk, "--") {
					continue
				}
				name := strings.SplitN(strings.TrimPrefix(tk, "--"), "=", 2)[0]
				if c.Flags().Lookup(name) == nil {
					t.Errorf("step %q: imlab %s has no flag --%s", st.Name, c.CommandPath(), name)
				}
			}
		}
	}
	for _, want := range []string{"imlab scenario validate", "imlab scenario run", "imlab compare"} {
		if !called[want] {
			t.Errorf("the workflow does not call %s (found %v)", want, called)
		}
	}
	if uploads < 1 {
		t.Error("the workflow must upload its reports")
	}
	for _, f := range strings.Fields(wf.Env["SMOKE"]) {
		if _, err := scenario.ReadFile(filepath.Join("../..", f)); err != nil {
			t.Errorf("SMOKE names %s: %v", f, err)
		}
	}
	if len(strings.Fields(wf.Env["SMOKE"])) == 0 {
		t.Error("no smoke scenarios named")
	}
	// The baseline flag the gate depends on.
	if !strings.Contains(string(b), "--baseline-dir") {
		t.Error("the scenarios are not gated on main's results")
	}
	if run, _, err := root.Find([]string{"scenario", "run"}); err != nil || run.Flags().Lookup("baseline-dir") == nil || run.Flags().Lookup("baseline-tolerance") == nil {
		t.Error("imlab scenario run has no --baseline-dir or --baseline-tolerance (the workflow passes them in a shell array)")
	}
}
