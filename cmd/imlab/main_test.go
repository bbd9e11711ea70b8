package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// TestMain makes the test binary serve the hidden subcommands that up,
// ref and scenario run start from their own executable (embedded-mongo,
// scenario child): under test, that executable is this binary.
func TestMain(m *testing.M) {
	if len(os.Args) >= 2 && (os.Args[1] == "embedded-mongo" || (os.Args[1] == "scenario" && len(os.Args) >= 3 && os.Args[2] == "child")) {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		root := newRootCmd()
		root.SetArgs(os.Args[1:])
		err := root.ExecuteContext(ctx)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "imlab:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
