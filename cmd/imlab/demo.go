package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"imlab/result"
	"imlab/scenario"
)

// newDemoCmd is `imlab demo`: the lab's main job in one command with no
// flags. It runs the shipped default scenario set (scenarios.DefaultSet,
// compiled into the binary) on auto backends, then prints the verdict
// table with the path of each report.html.
func newDemoCmd() *cobra.Command {
	var o scenarioOpts
	cmd := &cobra.Command{
		Use:   "demo [NAME...]",
		Short: "Run the short default scenario set (" + strings.Join(scenario.DefaultSet, ", ") + ") and print the verdict table",
		Long: `Runs shipped scenarios, compiled into the binary: by default ` + strings.Join(scenario.DefaultSet, ", ") + `.
Each starts the backends (auto: a private mariadbd and redis-server when found on PATH or in
the sbin directories, in-process stand-ins otherwise; Kafka in-process), the reference server,
a few seconds of load and its faults (one or two), then checks the ledger. queue-loss-unsafe is the negative
control: the unsafe queue policy must be caught losing messages, so it passes only when the
checker reports loss. Outputs as for 'imlab scenario run' (OUT/NAME/report.html, result.json,
verdict.json, junit.xml, the ledger). Exit status 0 when every scenario passed, 1 when one
failed, 2 when one could not be carried out.

Shipped scenarios: ` + strings.Join(scenario.ShippedNames(), ", ") + `.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			names := args
			if len(names) == 0 {
				names = scenario.DefaultSet
			}
			var files []*scenario.File
			for _, n := range names {
				f, err := scenario.Shipped(strings.TrimSuffix(filepath.Base(n), ".yaml"))
				if err != nil {
					return &exitError{code: scenarioExitBroken, err: err}
				}
				files = append(files, f)
			}
			return runScenarios(cmd, files, o, "demo", false)
		},
	}
	o.flags(cmd, "runs/demo-<UTC time>")
	return cmd
}

// verdictRow is one line of the verdict table printed after a set of
// scenarios.
type verdictRow struct {
	name, expect, verdict, result, lost, report string
	seconds                                     float64
}

func newVerdictRow(f *scenario.File, res *result.Result, err error, dir string) verdictRow {
	r := verdictRow{name: f.Name, expect: f.Expect.VerdictOr(), verdict: "-", result: "NOT CARRIED OUT", lost: "-", report: "-"}
	if res == nil {
		return r
	}
	r.seconds = res.Seconds
	if v := res.Verdict; v != nil {
		r.verdict = "INVALID"
		if v.Valid {
			r.verdict = "VALID"
		}
	}
	for _, f := range res.Findings {
		if f.Name == "lost" && res.Verdict != nil {
			r.lost = fmt.Sprint(f.Count)
		}
	}
	switch {
	case err != nil || res.Incomplete:
	case res.Skipped != "":
		r.result = "SKIPPED"
	case res.Passed:
		r.result = "PASSED"
	default:
		r.result = "FAILED"
	}
	if p := filepath.Join(dir, result.ReportFile); fileExists(p) {
		r.report = p
	}
	return r
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// printVerdictTable prints one line per scenario: what the checker found
// against what the scenario expects, and where its report is.
func printVerdictTable(w io.Writer, rows []verdictRow) {
	fmt.Fprintln(w, "\nverdicts (a scenario passes when the checker's verdict and every expectation match the file; expect invalid: a negative control)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\texpect\tverdict\tlost\tresult\ttime\treport")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.0fs\t%s\n", r.name, r.expect, r.verdict, r.lost, r.result, r.seconds, r.report)
	}
	tw.Flush()
}
