package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/reconcile"
	"imlab/ref/rkeys"
	"imlab/ref/send"
	"imlab/ref/seqalloc"
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
			timeout, _ := f.GetDuration("timeout")
			ctx := cmd.Context()
			scfg := server.DefaultConfig()
			db, err := server.OpenMySQL(ctx, dsn, scfg.MySQL)
			if err != nil {
				return err
			}
			defer db.Close()
			var allocator seqalloc.Allocator
			switch alloc {
			case server.AllocatorSegment:
				allocator = seqalloc.NewSegment(db, seqalloc.DefaultSegmentConfig())
			case server.AllocatorRedis:
				if raddr == "" {
					return fmt.Errorf("%w: the redis allocator needs --redis-addr or %s", model.ErrInvalid, envRedisAddr)
				}
				rdb, err := server.OpenRedis(ctx, raddr, scfg.Redis)
				if err != nil {
					return err
				}
				defer rdb.Close()
				prefix, _ := f.GetString("redis-prefix")
				allocator = seqalloc.NewRedis(rdb, rkeys.Keys{Prefix: prefix})
			default:
				return fmt.Errorf("%w: --allocator %q (want redis or segment)", model.ErrInvalid, alloc)
			}
			w, err := inbox.NewWriter(allocator, inbox.DefaultConfig(), nil)
			if err != nil {
				return err
			}
			// The send service is used for group membership only (no sends).
			svc, err := send.New(ctx, send.DefaultConfig(), db, w, nil)
			if err != nil {
				return err
			}
			defer svc.Close()
			r, err := reconcile.New(rcfg, db, w, svc.Members, nil, nil)
			if err != nil {
				return err
			}
			rctx, cancel := contextWithTimeout(ctx, timeout)
			defer cancel()
			rep, err := r.Run(rctx, since, until)
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
	f.String("redis-addr", "", "Redis host:port for the redis allocator ($"+envRedisAddr+")")
	f.String("redis-prefix", "", "Redis key prefix (as the server's)")
	f.String("allocator", server.AllocatorRedis, "per-user seq allocator: redis or segment ($"+envAllocator+")")
	f.Duration("push-after", reconcile.DefaultConfig().PushAfter, "N of \"unpulled for N minutes\" (push reconciliation)")
	f.Int("max-repairs", reconcile.DefaultConfig().MaxRepairs, "bound on inbox rows written by this run")
	f.Duration("timeout", 30*time.Minute, "bound on the whole run")
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

func contextWithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
