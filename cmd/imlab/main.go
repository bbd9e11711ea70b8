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
	}
	os.Exit(exitCode(err))
}

// Exit statuses, the same for every command (README, "Exit status"): 0 the
// command did what it was asked and what it judged passed; 1 what it
// judged failed (a check, a verdict, a comparison); 2 it could not be
// carried out (a bad flag or argument, a bad or missing file, a server it
// could not reach); 3 imlab check only: VALID but OVERLOADED.
const (
	exitFailed          = 1
	exitUnusable        = 2
	checkExitOverloaded = 3
)

// exitError carries an exit status other than exitUnusable out of a
// command: an error without one means the command could not be carried
// out.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// ExitCode is the process exit status the error asks for.
func (e *exitError) ExitCode() int { return e.code }

// failed is a judgement that failed: exit status 1.
func failed(err error) error { return &exitError{code: exitFailed, err: err} }

// usageError is an error of the command line: exit status 2, as every
// error without a status of its own.
func usageError(err error) error { return &exitError{code: exitUnusable, err: err} }

// exitCode is the process exit status of a command's error: 0 for none,
// the exitError's own, else exitUnusable (flag and argument errors,
// unreadable files, anything that kept the command from its work).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitUnusable
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
