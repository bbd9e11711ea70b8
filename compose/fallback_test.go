package compose

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFallbackSaysWhyTheInstallerFailed: the machine's real
// mariadb-install-db killed at the start timeout leaves a fallback whose
// cause is the timeout, not the installer's last progress line, in
// Fallbacks, the summary and the warning. The timeout is 200 ms: the
// installer bootstraps the system tables in a second or more on a busy
// host, but in under one on a quiet fast one, where a 1 s bound let it
// finish and the test failed.
func TestFallbackSaysWhyTheInstallerFailed(t *testing.T) {
	requireLocalBinaries(t)
	cfg := testConfig(t, ModeAuto)
	cfg.WithKafka, cfg.WithMongo = false, false
	cfg.StartTimeout = 200 * time.Millisecond
	b, _ := startT(t, cfg)
	want := "the data directory's installer did not finish within 200ms"
	if got := b.Fallbacks[PartMySQL]; got != want {
		t.Fatalf("MySQL's fallback cause %q, want %q (kinds %v)", got, want, b.Kinds)
	}
	if s := b.Summary(); !strings.Contains(s, "mysql=embedded go-mysql-server") || !strings.Contains(s, "(fallback: "+want+")") {
		t.Errorf("summary %q does not say MySQL fell back and why", s)
	}
	w := strings.Join(b.Warnings, "\n")
	if !strings.Contains(w, "local MySQL did not start; MySQL fell back to embedded go-mysql-server: "+want) || strings.Contains(w, "Installing") {
		t.Errorf("warnings %q", w)
	}
}

// TestInstallerCauseIsItsErrorLine: the real installer on a data directory
// it may not change (immutable) prints its progress and a paragraph; the
// cause is the line that says what failed.
func TestInstallerCauseIsItsErrorLine(t *testing.T) {
	requireLocalBinaries(t)
	s, err := findMySQLServer()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.probeVersion(ctx); err != nil {
		t.Fatal(err)
	}
	if !s.mariadb {
		t.Skip("not MariaDB")
	}
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot make a directory immutable here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", dir).Run() })
	err = initMySQLDataDir(ctx, s, dir, filepath.Join(t.TempDir(), "log"))
	var se *startError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a start error", err)
	}
	if !strings.Contains(se.Cause, "Operation not permitted") || strings.Contains(se.Cause, "\n") {
		t.Fatalf("cause %q of %v", se.Cause, err)
	}
	if got := fallbackCause(err); got != se.Cause {
		t.Fatalf("fallbackCause %q, want %q", got, se.Cause)
	}
}

// TestCauseLine: a server log's first [ERROR] line without its timestamp,
// else the first line that reads as an error, else nothing.
func TestCauseLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"2026-12-04  2:01:13 0 [Note] Starting\n2026-12-04  2:01:13 0 [ERROR] InnoDB: Cannot allocate memory for the buffer pool\n2026-12-04  2:01:13 0 [ERROR] Aborting", "InnoDB: Cannot allocate memory for the buffer pool"},
		{"Installing MariaDB/MySQL system tables in '/x' ...\nchown: changing ownership of '/x': Operation not permitted\nCannot change ownership", "chown: changing ownership of '/x': Operation not permitted"},
		{"Installing MariaDB/MySQL system tables in '/x' ...", ""},
		{strings.Repeat("é", 150) + " failed", strings.Repeat("é", 100) + "…"},
	} {
		if got := causeLine(c.in); got != c.want {
			t.Errorf("causeLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
