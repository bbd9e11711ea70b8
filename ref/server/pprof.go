package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// PprofMux routes net/http/pprof's handlers under /debug/pprof/, for a
// listener of its own (the server's and the lab runner's).
func PprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// startPprof serves net/http/pprof on cfg.PprofListen, a loopback address
// of its own (never the API listener), until the process stops. Opt-in:
// profiling is for the lab's operators, not for clients.
func (p *Process) startPprof(ctx context.Context) error {
	mux := PprofMux()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", p.Cfg.PprofListen)
	if err != nil {
		return fmt.Errorf("server: pprof listen %s: %w", p.Cfg.PprofListen, err)
	}
	// Profiles run up to their "seconds" parameter: no write timeout.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second}
	p.mu.Lock()
	p.pprofAddr = ln.Addr()
	p.mu.Unlock()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // owned by the "pprof" stop
	p.onStop("pprof", func(ctx context.Context) error {
		err := srv.Close()
		if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	})
	p.Log.Info("server: pprof listener", "addr", ln.Addr().String())
	return nil
}

// PprofAddr is the pprof listener's address (nil when it is off).
func (p *Process) PprofAddr() net.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pprofAddr
}

// loopbackAddr tells whether host:port names a loopback host.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
