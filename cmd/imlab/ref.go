package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"imlab/compose"
	"imlab/ref/server"
)

// newRefCmd: imlab ref runs the reference server's roles against external
// backends (by default) until SIGINT/SIGTERM.
func newRefCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ref",
		Short: "Run the reference server (roles from --role) against the given backends",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			secret, err := secretFrom(cmd, false, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			cfg, err := serveConfig(cmd, secret)
			if err != nil {
				return err
			}
			be, err := startBackends(ctx, cmd, func(c *compose.Config) { c.Logger = cfg.Logger })
			if err != nil {
				return err
			}
			defer stopBackends(cfg, be)
			return server.RunRoles(ctx, cfg, be.server(), roles(), func(p *server.Process) {
				attrs := []any{"roles", strings.Join(cfg.Roles, ","), "allocator", cfg.Allocator, "policy", cfg.Send.Policy,
					"backends", be.Summary(), "mysql", redactDSN(be.MySQLDSN), "redis", be.RedisAddr}
				if a := p.APIAddr(); a != nil {
					attrs = append(attrs, "listen", "http://"+reachable(a))
				}
				cfg.Logger.Info("imlab ref ready", attrs...)
			})
		},
	}
	addServeFlags(cmd, "external")
	return cmd
}

func stopBackends(cfg server.Config, be *backends) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := be.stop(ctx); err != nil {
		cfg.Logger.Error("stopping backends", "err", err)
	}
}
