package ref

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A target that answers 503 before it is ready is waited for, and the
// wait is said; one that never answers 200 is an error naming its last
// answer.
func TestWaitHealthy(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	var out bytes.Buffer
	if err := WaitHealthy(context.Background(), srv.URL, 10*time.Second, &out); err != nil {
		t.Fatalf("WaitHealthy: %v", err)
	}
	if calls.Load() != 3 || !strings.Contains(out.String(), "waiting up to") || !strings.Contains(out.String(), "ready after") {
		t.Fatalf("%d calls, said %q", calls.Load(), out.String())
	}

	never := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer never.Close()
	out.Reset()
	err := WaitHealthy(context.Background(), never.URL, 600*time.Millisecond, &out)
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("never ready: %v", err)
	}
}
