package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"time"

	"imlab/ref/server"
)

// servePprof serves net/http/pprof of this process on addr, a loopback
// host:port, until stop is called (it waits for the server to end).
func servePprof(ctx context.Context, addr string) (stop func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("pprof address %q: want a loopback IP host:port", addr)
	}
	mux := server.PprofMux()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof listen %s: %w", addr, err)
	}
	// Profiles run up to their "seconds" parameter: no write timeout.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { // owned by stop
		defer close(done)
		_ = srv.Serve(ln) // http.ErrServerClosed once stop closes it
	}()
	return func() { _ = srv.Close(); <-done }, nil
}

// startCPUProfile writes a CPU profile of this process to path (empty:
// none) until stop is called; read it with go tool pprof.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("--cpuprofile %s: %w", path, err)
		}
		return nil
	}, nil
}
