package server

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"imlab/ref/model"
)

// pprof is served only when asked, on a loopback listener of its own; the
// API listener does not serve it.
func TestPprofListener(t *testing.T) {
	bad := DefaultConfig()
	bad.Auth.Secret = e2eSecret
	bad.PprofListen = "0.0.0.0:6060"
	if err := bad.Validate(); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("non-loopback pprof address: %v", err)
	}
	off := startE2E(t, nil)
	if off.p.PprofAddr() != nil {
		t.Fatal("pprof listener without PprofListen")
	}
	e := startE2E(t, func(c *Config) { c.PprofListen = "127.0.0.1:0" })
	get := func(url string) (int, string) {
		r, err := e.client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	if code, body := get("http://" + e.p.PprofAddr().String() + "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("pprof goroutine: %d %.200s", code, body)
	}
	if code, _ := get(e.base + "/debug/pprof/"); code == http.StatusOK {
		t.Fatal("the API listener serves pprof")
	}
}
