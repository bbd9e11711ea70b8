package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"imlab/ref/model"
	"imlab/ref/reconcile"
)

// roleReconcileOnce is the one role of ReconcileOnce's process: it starts
// nothing; ReconcileOnce runs one pass of the process's Reconciler.
const roleReconcileOnce = "reconcile-once"

// ReconcileOnce runs one pass of reconciliation (forward, reverse, push)
// over [since, until) in a process wired as the reconciler role's
// (Process.Reconciler: allocator, inbox config, commit hooks into the hot
// cache, the push hub and the push bus), which serves nothing but a
// loopback ops listener, runs no role and does not migrate: cfg's Listen,
// Roles and Migrate are set here, and an empty Auth.Secret is filled with
// a random one (nothing verifies a token). cfg.Reconcile configures the
// pass; ctx bounds all of it. The report is returned as far as the pass
// got, also with an error; the process is stopped before it returns.
func ReconcileOnce(ctx context.Context, cfg Config, b Backends, since, until time.Time) (reconcile.Report, error) {
	if !since.Before(until) {
		return reconcile.Report{}, fmt.Errorf("%w: reconcile: since %s is not before until %s", model.ErrInvalid, since, until)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.Roles = []string{roleReconcileOnce}
	cfg.Migrate = false
	if cfg.Auth.Secret == "" {
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return reconcile.Report{}, fmt.Errorf("server: reconcile secret: %w", err)
		}
		cfg.Auth.Secret = hex.EncodeToString(secret)
	}
	if err := cfg.Validate(); err != nil {
		return reconcile.Report{}, err
	}
	roles := Roles{{Name: roleReconcileOnce, Start: func(context.Context, *Process) (func(context.Context) error, error) {
		return nil, nil
	}}}
	p, err := Start(ctx, cfg, b, roles)
	if err != nil {
		return reconcile.Report{}, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		if err := p.Stop(sctx); err != nil {
			p.Log.Error("reconcile: stop", "err", err)
		}
	}()
	r, err := p.Reconciler(ctx)
	if err != nil {
		return reconcile.Report{}, err
	}
	return r.Run(ctx, since, until)
}
