// Package refproc starts, for a test, the reference server inside the
// test's process and the backends compose runs beside it (the in-process
// Kafka, MongoDB's stand-in), each stopped when the test ends; a start
// or a stop that does not finish in its bound fails the test.
//
// It must not be imported by non-test code, or by the tests of compose
// and ref/server themselves (it imports both).
package refproc

import (
	"context"
	"testing"
	"time"

	"imlab/compose"
	"imlab/ref/server"
)

// Bounds of a start and of a stop.
const (
	startBound = 40 * time.Second
	stopBound  = 20 * time.Second
)

// Backends starts what cc names (its own start and stop timeouts 20 s and
// 10 s) until t ends.
func Backends(t testing.TB, cc compose.Config) *compose.Backends {
	t.Helper()
	cc.StartTimeout, cc.StopTimeout = 20*time.Second, 10*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), startBound)
	defer cancel()
	b, stop, err := compose.Start(ctx, cc)
	if err != nil {
		t.Fatalf("backends: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopBound)
		defer cancel()
		if err := stop(ctx); err != nil {
			t.Errorf("stop backends: %v", err)
		}
	})
	return b
}

// Start starts a reference server process of cfg on b with roles until t
// ends.
func Start(t testing.TB, cfg server.Config, b server.Backends, roles server.Roles) *server.Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startBound)
	defer cancel()
	p, err := server.Start(ctx, cfg, b, roles)
	if err != nil {
		t.Fatalf("start the reference server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopBound)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("stop the reference server: %v", err)
		}
	})
	return p
}
