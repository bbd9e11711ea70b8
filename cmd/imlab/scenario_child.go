package main

import (
	"io"

	"github.com/spf13/cobra"

	"imlab/runner"
	"imlab/runner/proc"
)

// newScenarioChildCmd is the hidden `imlab scenario child`: the scenario
// runner starts it for every process with exec: true. It reads one
// scenarios.ChildSpec line on stdin, runs that one server process, prints
// its address as one JSON line on stdout and runs until SIGTERM or until
// stdin closes (the runner stopped or died); logs go to stderr. Not meant
// to be run by hand.
func newScenarioChildCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "child",
		Short:  "Run one scenario server process from a spec on stdin (started by scenario run)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, ok := cmd.InOrStdin().(io.ReadCloser)
			if !ok {
				in = io.NopCloser(cmd.InOrStdin())
			}
			return proc.ChildMain(cmd.Context(), in, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
}

// newScenarioLoadChildCmd is the hidden `imlab scenario load-child`: the
// runner starts one per load segment (load.segments > 1). It reads one
// scenarios.LoadChildSpec line on stdin, runs that segment and exits. Not
// meant to be run by hand.
func newScenarioLoadChildCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "load-child",
		Short:  "Run one load segment from a spec on stdin (started by scenario run)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runner.LoadChildMain(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}
