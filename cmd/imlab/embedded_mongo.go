package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"imlab/compose"
)

// newEmbeddedMongoCmd is the hidden `imlab embedded-mongo DIR`: up, ref and
// scenario run start it (compose.Config.MongoCommand) to serve the embedded
// FerretDB from a child process at a lower scheduling priority, so that a
// slow history store lags instead of taking CPU from the send path. It
// prints its mongodb:// URI on the first line of stdout and runs until
// SIGTERM or until stdin closes (its parent stopped or died). Not meant to
// be run by hand. With $IMLAB_MONGO_PPROF set to a loopback host:port (the
// child inherits its parent's environment: `IMLAB_MONGO_PPROF=127.0.0.1:6061
// imlab up ...`) it serves net/http/pprof there, so that FerretDB can be
// profiled apart from the server.
func newEmbeddedMongoCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "embedded-mongo DIR",
		Short:  "Serve the embedded FerretDB (SQLite files in DIR) for a parent imlab process",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if addr := os.Getenv(envMongoPprof); addr != "" {
				stop, err := servePprof(cmd.Context(), addr)
				if err != nil {
					return fmt.Errorf("%s: %w", envMongoPprof, err)
				}
				defer stop()
			}
			return compose.ServeEmbeddedMongo(cmd.Context(), args[0], cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}

// embeddedMongoCommand is compose.Config.MongoCommand for this binary: the
// running executable's embedded-mongo subcommand (nil when the executable
// cannot be found: FerretDB then runs in-process).
func embeddedMongoCommand() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{exe, "embedded-mongo"}
}
