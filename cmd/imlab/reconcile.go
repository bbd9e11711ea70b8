package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"imlab/ref/model"
	"imlab/ref/pushbus"
	"imlab/ref/reconcile"
	"imlab/ref/server"
)

// newReconcileCmd: imlab reconcile --since --until runs forward, reverse
// and push reconciliation once over a time range and prints its report as
// JSON. Safe to re-run: a second run over the same range repairs nothing.
func newReconcileCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "Repair inbox rows the queue lost (forward), report bodies missing (reverse), record unpulled messages for offline push",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			dsn := fromEnv(f, "mysql-dsn", envMySQLDSN)
			raddr := fromEnv(f, "redis-addr", envRedisAddr)
			alloc := fromEnv(f, "allocator", envAllocator)
			if dsn == "" {
				return fmt.Errorf("%w: no database: set --mysql-dsn or %s", model.ErrInvalid, envMySQLDSN)
			}
			sinceS, _ := f.GetString("since")
			untilS, _ := f.GetString("until")
			now := time.Now().UTC()
			since, err := parseWhen(sinceS, now)
			if err != nil {
				return fmt.Errorf("--since: %w", err)
			}
			until, err := parseWhen(untilS, now)
			if err != nil {
				return fmt.Errorf("--until: %w", err)
			}
			if !since.Before(until) {
				return fmt.Errorf("%w: --since must be before --until", model.ErrInvalid)
			}
			rcfg := reconcile.DefaultConfig()
			rcfg.PushAfter, _ = f.GetDuration("push-after")
			rcfg.MaxRepairs, _ = f.GetInt("max-repairs")
			if err := rcfg.Validate(); err != nil {
				return err
			}
			if raddr == "" {
				return fmt.Errorf("%w: no Redis: set --redis-addr or %s (the hot cache, and the redis allocator, live there)", model.ErrInvalid, envRedisAddr)
			}
			timeout, _ := f.GetDuration("timeout")
			if timeout <= 0 {
				return fmt.Errorf("%w: --timeout %s: the bound on the whole run must be positive", model.ErrInvalid, timeout)
			}
			log, err := newLogger(cmd)
			if err != nil {
				return err
			}
			cfg := server.DefaultConfig()
			cfg.Allocator = alloc
			cfg.Redis.KeyPrefix, _ = f.GetString("redis-prefix")
			cfg.PushBus.Mode = fromEnv(f, "push-bus", envPushBus)
			cfg.Reconcile = rcfg
			cfg.Logger = log
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			rep, err := server.ReconcileOnce(ctx, cfg, server.Backends{MySQLDSN: dsn, RedisAddr: raddr}, since, until)
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			if eerr := enc.Encode(rep); eerr != nil && err == nil {
				err = eerr
			}
			return err
		},
	}
	f := cmd.Flags()
	f.String("since", "-1h", "start of the range: RFC 3339 time or a negative duration from now (-1h)")
	f.String("until", "-30s", "end of the range (exclusive): RFC 3339 time, a negative duration from now, or now")
	f.String("mysql-dsn", "", "go-sql-driver DSN with a database ($"+envMySQLDSN+")")
	f.String("redis-addr", "", "Redis host:port: the hot cache and the redis allocator ($"+envRedisAddr+")")
	f.String("redis-prefix", "", "Redis key prefix (as the server's)")
	f.String("allocator", server.AllocatorRedis, "per-user seq allocator: redis or segment ($"+envAllocator+")")
	f.Duration("push-after", reconcile.DefaultConfig().PushAfter, "N of \"unpulled for N minutes\" (push reconciliation)")
	f.Int("max-repairs", reconcile.DefaultConfig().MaxRepairs, "bound on inbox rows written by this run")
	f.String("push-bus", pushbus.ModeLocal, "where repairs are pushed: local (nowhere: this process has no devices) or redis (the servers' push bus, as imlab ref --push-bus redis) ($"+envPushBus+")")
	f.Duration("timeout", 30*time.Minute, "bound on the whole run")
	f.String("log-level", "warn", "debug, info, warn or error, on stderr ($"+envLogLevel+")")
	return cmd
}

// parseWhen reads "now", an RFC 3339 time, or a duration relative to now.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "now" {
		return now, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %q is neither now, an RFC 3339 time nor a duration", model.ErrInvalid, s)
	}
	return now.Add(d), nil
}
