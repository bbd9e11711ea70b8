package runner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"imlab/result"
	"imlab/scenario"
)

// A run whose local MySQL does not start (a mariadbd that logs why and
// exits) falls back to the embedded one: the run says so with the cause
// where it starts (the progress writer), result.json marks it
// (fallbacks, backends) and the report's Backends row says
// "(fallback: CAUSE)", not among the warnings at the end.
func TestRunSaysMySQLFellBack(t *testing.T) {
	bin := t.TempDir()
	const cause = `mariadbd: Can't create/write to file './ibdata1' (Errcode: 28 "No space left on device")`
	scripts := map[string]string{
		"mariadbd": "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'mariadbd  Ver 10.11.0-MariaDB for test'; exit 0; fi\n" +
			"for a; do case $a in --log-error=*) log=${a#--log-error=};; esac; done\n" +
			"echo '2026-12-04  2:01:13 0 [Note] Starting' >> \"$log\"\n" +
			"echo '2026-12-04  2:01:13 0 [ERROR] " + strings.ReplaceAll(cause, "'", `'"'"'`) + "' >> \"$log\"\n" +
			"echo '2026-12-04  2:01:13 0 [ERROR] Aborting' >> \"$log\"\nexit 1\n",
		"mariadb-install-db": "#!/bin/sh\nexit 0\n",
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	f, err := scenario.ReadFile("../scenarios/capacity-smoke.yaml") // skipped on the embedded MySQL: nothing runs after the backends
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(t.TempDir())
	cfg.Mode = "auto"
	cfg.DataDir = t.TempDir()
	var progress bytes.Buffer
	cfg.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := Run(ctx, cfg, f); err != nil {
		t.Fatal(err)
	}
	want := "fallback: mysql runs embedded in place of a local server: " + cause
	if !strings.Contains(progress.String(), want) {
		t.Errorf("the run's start does not say %q:\n%s", want, progress.String())
	}
	back, err := result.ReadResult(filepath.Join(cfg.OutDir, result.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if back.Fallbacks["mysql"] != cause || !strings.Contains(back.Backends, "mysql=embedded go-mysql-server") || !strings.Contains(back.Backends, "(fallback: "+cause+")") {
		t.Errorf("result.json: fallbacks %q, backends %q", back.Fallbacks, back.Backends)
	}
	for _, e := range back.Errors {
		if strings.Contains(e, "fell back") {
			t.Errorf("the fallback is also among the warnings at the end: %q", e)
		}
	}
	html, err := os.ReadFile(filepath.Join(cfg.OutDir, result.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	row := `<tr><th>Backends</th><td>mysql=embedded go-mysql-server`
	at := bytes.Index(html, []byte(row))
	if at < 0 {
		t.Fatal("report.html has no Backends row naming the embedded MySQL")
	}
	end := bytes.Index(html[at:], []byte("</tr>"))
	if got := string(html[at : at+end]); !strings.Contains(got, "(fallback: mariadbd: Can&#39;t create/write to file") {
		t.Errorf("report's Backends row %q does not say it was a fallback and why", got)
	}
}
