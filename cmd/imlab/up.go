package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"imlab/ref/fanout"
	"imlab/ref/server"
)

// newUpCmd: imlab up starts the backends (Kafka and MongoDB included), runs
// every role in one process, prints where everything is, then "imlab
// ready: http://HOST:PORT", and runs until SIGINT/SIGTERM.
func newUpCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start backends and the whole reference server (every role) in one process (the laptop mode)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
			secret, err := lookupSecret(cmd, true)
			if err != nil {
				return err
			}
			cfg, err := serveConfig(cmd, secret.value)
			if err != nil {
				return err
			}
			secret.warn(errw)
			fmt.Fprintln(out, "imlab up: starting backends...")
			be, err := startBackends(ctx, cmd, cfg, true)
			if err != nil {
				return err
			}
			defer stopBackends(cfg, be)
			return server.RunRoles(ctx, cfg, be.server(), roles(), func(p *server.Process) {
				mode := be.Mode
				if be.Asked != "" && be.Asked != be.Mode {
					mode = be.Asked + ", here " + be.Mode
				}
				fmt.Fprintf(out, "backends (--backends %s; each part says where it runs): %s\n", mode, be.Summary())
				parts := make([]string, 0, len(be.Kinds))
				for k := range be.Kinds {
					parts = append(parts, k)
				}
				sort.Strings(parts)
				where := map[string]string{"mysql": redactDSN(be.MySQLDSN), "redis": be.RedisAddr,
					"kafka": strings.Join(be.KafkaBrokers, ","), "mongo": be.MongoURI}
				for _, k := range parts {
					fmt.Fprintf(out, "  %-8s %-40s %s\n", k, be.Kinds[k], where[k])
				}
				for _, w := range be.Warnings {
					fmt.Fprintf(out, "WARNING: %s\n", w)
				}
				if len(be.Embedded) > 0 {
					fmt.Fprintf(out, "WARNING: %s\n", embeddedWarning(be.Embedded))
				}
				if cfg.Send.Policy == fanout.PolicyQueue {
					fmt.Fprintf(out, "WARNING: %s\n", fanout.UnsafeWarning)
				}
				addr := reachable(p.Addr())
				fmt.Fprintln(out, "endpoints:")
				for _, e := range endpointLines(addr, p.Runs(server.RoleAPI), p.HistoryService() != nil) {
					fmt.Fprintf(out, "  %-8s %s\n", e[0], e[1])
				}
				fmt.Fprintf(out, "roles: %s  allocator: %s  policy: %s", strings.Join(p.RoleNames(), ","), cfg.Allocator, cfg.Send.Policy)
				if len(be.KafkaBrokers) > 0 {
					fmt.Fprintf(out, "  dedup: %s  topic: %s (%d partitions)", cfg.Fanout.Dedup, cfg.Fanout.Topics.Fanout, cfg.Fanout.Topics.Partitions)
				}
				fmt.Fprintln(out)
				fmt.Fprintf(out, "token:  %s token --uid 1 --did phone\n", thisCommand())
				fmt.Fprintf(out, "imlab ready: http://%s\n", addr)
			})
		},
	}
	addServeFlags(cmd, "auto", true)
	return cmd
}

// embeddedWarning says which parts run on stand-ins.
func embeddedWarning(parts []string) string {
	return "embedded stand-ins serve " + strings.Join(parts, ", ") + ": correct but slow; figures from this run are not capacity figures"
}
