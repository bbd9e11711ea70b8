package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"imlab/ref/model"
)

// startOps serves /metrics, /healthz, the lag routes, RepairsPath and
// RetentionPath on cfg.Listen for a process without the api role (relay, consumer, history, reconciler run
// as their own processes and are scraped like the api).
func (p *Process) startOps(ctx context.Context) error {
	var closing atomic.Bool
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(p.Registry, promhttp.HandlerOpts{Registry: p.Registry}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if closing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"shutting_down"}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	for path, answer := range map[string]func(context.Context) (any, error){LagPath: p.lagAnswer, LagNowPath: p.lagNowAnswer} {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if r.URL.RawQuery != "" {
				writeOpsError(w, http.StatusBadRequest, model.ErrInvalid.Error(), "no query parameters allowed")
				return
			}
			v, err := answer(r.Context())
			if err != nil {
				writeOpsError(w, http.StatusNotFound, model.ErrNotFound.Error(), err.Error())
				return
			}
			_ = json.NewEncoder(w).Encode(v)
		})
	}
	for path, answer := range map[string]func() any{RepairsPath: func() any { return p.Repairs() }, RetentionPath: func() any { return p.Retention() }} {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if r.URL.RawQuery != "" {
				writeOpsError(w, http.StatusBadRequest, model.ErrInvalid.Error(), "no query parameters allowed")
				return
			}
			_ = json.NewEncoder(w).Encode(answer())
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeOpsError(w, http.StatusNotFound, model.ErrNotFound.Error(),
			"this process runs no api role: only /metrics, /healthz, "+LagPath+", "+LagNowPath+", "+RepairsPath+" and "+RetentionPath)
	})
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", p.Cfg.Listen)
	if err != nil {
		return fmt.Errorf("server: ops listen %s: %w", p.Cfg.Listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
	p.mu.Lock()
	p.opsAddr = ln.Addr()
	p.mu.Unlock()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }() // owned by the "ops" stop
	p.onStop("ops", func(ctx context.Context) error {
		closing.Store(true)
		err := srv.Shutdown(ctx)
		if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	})
	p.Log.Info("server: ops listener", "addr", ln.Addr().String())
	return nil
}

func writeOpsError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	_, _ = w.Write(b)
}
