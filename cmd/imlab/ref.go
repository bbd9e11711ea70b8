package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"imlab/ref/defect"
	"imlab/ref/fanout"
	"imlab/ref/pushbus"
	"imlab/ref/server"
)

// newRefCmd: imlab ref runs the reference server's roles against external
// backends (by default) until SIGINT/SIGTERM.
func newRefCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ref",
		Short: "Run the reference server (roles from --role) against the given backends",
		Long: `Runs the roles named by --role in this process: api (HTTP), relay (outbox relay),
consumer (inbox tier, and the history tier unless the history role runs here),
history (the history tier alone), reconciler (reconciliation and retention), or all.
"all" leaves out the roles whose backends are not given (relay, consumer and history
need Kafka; history needs MongoDB). A process without the api role serves /metrics,
/healthz and ` + server.LagPath + ` on --listen.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if list, _ := cmd.Flags().GetBool("list-defects"); list {
				printDefects(cmd.OutOrStdout())
				return nil
			}
			secret, err := lookupSecret(cmd, false)
			if err != nil {
				return err
			}
			cfg, err := serveConfig(cmd, secret.value)
			if err != nil {
				return err
			}
			be, err := startBackends(ctx, cmd, cfg, false)
			if err != nil {
				return err
			}
			defer stopBackends(cfg, be)
			return server.RunRoles(ctx, cfg, be.server(), roles(), func(p *server.Process) {
				attrs := []any{"roles", strings.Join(p.RoleNames(), ","), "allocator", cfg.Allocator, "policy", cfg.Send.Policy,
					"push_bus", cfg.PushBus.Mode,
					"backends", be.Summary(), "mysql", redactDSN(be.MySQLDSN), "redis", be.RedisAddr}
				if len(be.KafkaBrokers) > 0 {
					attrs = append(attrs, "kafka", strings.Join(be.KafkaBrokers, ","), "dedup", cfg.Fanout.Dedup, "topic", cfg.Fanout.Topics.Fanout)
				}
				if be.MongoURI != "" {
					attrs = append(attrs, "mongo_db", cfg.Mongo.Database)
				}
				if a := p.Addr(); a != nil {
					attrs = append(attrs, "listen", "http://"+reachable(a))
				}
				cfg.Logger.Info("imlab ref ready", attrs...)
				for _, w := range be.Warnings {
					cfg.Logger.Warn(w)
				}
				if len(be.Embedded) > 0 {
					cfg.Logger.Warn(embeddedWarning(be.Embedded))
				}
				if cfg.Send.Policy == fanout.PolicyQueue {
					cfg.Logger.Warn(fanout.UnsafeWarning)
				}
			})
		},
	}
	addServeFlags(cmd, "external", false)
	cmd.Flags().Bool("list-defects", false, "list the shipped defects (--defect NAME --lab-defects), one line each, and exit")
	cmd.Flags().String("push-bus", pushbus.ModeLocal, "push transport between processes: local (devices of this process only) or redis (pub/sub: an api process pushes what a consumer process wrote; best-effort, pull fills gaps) ($"+envPushBus+")")
	return cmd
}

// printDefects writes one line per shipped defect: name, where it lives,
// what it does.
func printDefects(w io.Writer) {
	for _, d := range defect.List() {
		fmt.Fprintf(w, "%-26s %-22s %s\n", d.Name, d.Where, d.What)
	}
}

func stopBackends(cfg server.Config, be *backends) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := be.stop(ctx); err != nil {
		cfg.Logger.Error("stopping backends", "err", err)
	}
}
