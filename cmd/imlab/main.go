// Command imlab is the lab's one binary: the reference server (ref, up),
// its tools (migrate, token) and the lab's subcommands. Each subcommand
// lives in its own file; main only assembles them.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if startedByGoRun() {
		// go run does not pass SIGTERM on: end with the go tool instead.
		var unwatch func()
		ctx, unwatch = watchParent(ctx, os.Stderr)
		defer unwatch()
	}
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "imlab:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

// subcommands lists every subcommand constructor; a new subcommand adds
// its file and one line here.
var subcommands = []func() *cobra.Command{
	newRefCmd,
	newUpCmd,
	newMigrateCmd,
	newTokenCmd,
	newLoadCmd,
	newCheckCmd,
	newReconcileCmd,
	newScenarioCmd,
	newCompareCmd,
	newReportCmd,
	newCapacityCmd,
	newEmbeddedMongoCmd,
	newDemoCmd,
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "imlab",
		Short:         "Performance lab and chaos harness around a reference IM message pipeline",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, c := range subcommands {
		root.AddCommand(c())
	}
	return root
}
