package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/ref/auth"
)

func run(t *testing.T, ctx context.Context, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(ctx)
	return out.String(), errb.String(), err
}

func TestToken(t *testing.T) {
	t.Setenv(envSecret, "cmd-test-secret-0123456789")
	out, _, err := run(t, context.Background(), "token", "--uid", "7", "--did", "phone", "--ttl", "1h")
	if err != nil {
		t.Fatal(err)
	}
	cfg := auth.DefaultConfig()
	cfg.Secret = "cmd-test-secret-0123456789"
	a, _ := auth.New(cfg)
	uid, did, err := a.Verify(strings.TrimSpace(out))
	if err != nil || uid != 7 || did != "phone" {
		t.Fatalf("token %q: %d %s %v", out, uid, did, err)
	}
	if _, _, err := run(t, context.Background(), "token", "--uid", "0", "--did", "phone"); err == nil {
		t.Fatal("uid 0 accepted")
	}
	if _, _, err := run(t, context.Background(), "token", "--did", "phone"); err == nil {
		t.Fatal("missing --uid accepted")
	}
	t.Setenv(envSecret, "")
	out, errOut, err := run(t, context.Background(), "token", "--uid", "1", "--did", "p")
	if err != nil || !strings.Contains(errOut, "WARNING") {
		t.Fatalf("dev secret: %v %q", err, errOut)
	}
	cfg.Secret = auth.DevSecret
	a, _ = auth.New(cfg)
	if _, _, err := a.Verify(strings.TrimSpace(out)); err != nil {
		t.Fatalf("dev-secret token: %v", err)
	}
}

func TestRefNeedsSecret(t *testing.T) {
	t.Setenv(envSecret, "")
	if _, _, err := run(t, context.Background(), "ref", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--redis-addr", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), envSecret) {
		t.Fatalf("ref without secret: %v", err)
	}
}

func TestMigrate(t *testing.T) {
	my := testenv.NewMySQL(t) // already migrated: nothing to apply
	out, _, err := run(t, context.Background(), "migrate", "--mysql-dsn", my.DSN)
	if err != nil || !strings.Contains(out, "schema up to date") {
		t.Fatalf("migrate: %v %q", err, out)
	}
	if !strings.Contains(out, " 0 applied now") {
		t.Fatalf("re-migrate applied something: %q", out)
	}
}

func TestUpServesAndStops(t *testing.T) {
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	t.Setenv(envSecret, "cmd-test-secret-0123456789")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	root := newRootCmd()
	root.SetArgs([]string{"up", "--listen", "127.0.0.1:0", "--mysql-dsn", my.DSN, "--redis-addr", rd.Addr,
		"--redis-prefix", rd.Keys.Prefix, "--log-level", "warn", "--shutdown-timeout", "10s"})
	root.SetOut(pw)
	var errb bytes.Buffer
	root.SetErr(&errb)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx); pw.Close() }()
	ready := make(chan string, 1)
	var printed strings.Builder
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			printed.WriteString(line + "\n")
			if strings.HasPrefix(line, "imlab ready: ") {
				ready <- strings.TrimPrefix(line, "imlab ready: ")
			}
		}
	}()
	var base string
	select {
	case base = <-ready:
	case err := <-done:
		t.Fatalf("up ended early: %v %s", err, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("no ready line")
	}
	r, err := http.Get(base + "/healthz")
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", r, err)
	}
	r.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("up: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("up did not stop")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("still serving after stop")
	}
}
