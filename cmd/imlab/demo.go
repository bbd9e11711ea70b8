package main

import (
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

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
