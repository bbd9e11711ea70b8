package scenario

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const targetFile = `
name: tt
target:
  driver: tinode
  address: 127.0.0.1:6170
  exec:
    binary: ${IMLAB_TEST_TINODE_BIN}
    args: [-config, "${IMLAB_TEST_TINODE_CONF}"]
  database:
    listen: 127.0.0.1:6171
    upstream: 127.0.0.1:5432
  ready:
    path: /v0/channels
load:
  rate: const:50
  duration: 10s
  users: 10
faults:
  - at: 2s
    for: 2s
    kind: down
    target: database
  - at: 5s
    for: 1s
    kind: kill
    target: server
expect:
  verdict: invalid
  findings: [unexplained-gap]
`

// TestTargetGood: the shipped tinode files and a hand-made one parse, with
// their defaults.
func TestTargetGood(t *testing.T) {
	f, err := Parse("t.yaml", []byte(targetFile))
	if err != nil {
		t.Fatal(err)
	}
	tg := f.Target
	if !tg.External() || tg.URL() != "tinode+ws://127.0.0.1:6170" || tg.APIKeyEnvOr() != DefaultAPIKeyEnv || tg.LivenessBoundOr() != DefaultLivenessBound {
		t.Fatalf("target %+v url %s", tg, tg.URL())
	}
	files, _ := filepath.Glob("../scenarios/targets/*.yaml")
	if len(files) < 4 {
		t.Fatalf("shipped target files: %v", files)
	}
	for _, p := range files {
		if _, err := ReadFile(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestTargetBad: each bad target block is refused naming its key.
func TestTargetBad(t *testing.T) {
	cases := []struct{ from, to, key string }{
		{"driver: tinode", "driver: nats", "target.driver"},
		{"address: 127.0.0.1:6170", "address: 10.0.0.1:6170", "target.address"},
		{"address: 127.0.0.1:6170", "address: 127.0.0.1:0", "target.address"},
		{"    binary: ${IMLAB_TEST_TINODE_BIN}\n", "    binary: \"\"\n", "target.exec.binary"},
		{"listen: 127.0.0.1:6171", "listen: 127.0.0.1:5432", "target.database.listen"},
		{"upstream: 127.0.0.1:5432", "upstream: db.example:5432", "target.database.upstream"},
		{"path: /v0/channels", "path: v0", "target.ready.path"},
		{"target: database", "target: mysql", "faults[0].target"},
		{"target: server", "target: api", "faults[1].target"},
		{"kind: down", "kind: redis_wipe", "faults[0].kind"},
		{"findings: [unexplained-gap]", "findings: [nope]", "expect.findings[0]"},
		{"verdict: invalid", "verdict: valid", "expect.findings"},
		{"  driver: tinode\n", "  driver: tinode\n  api_key_env: \"AQE-key\"\n", "target.api_key_env"},
		{"users: 10", "users: 10\n  segments: 2", "load.segments"},
	}
	for _, c := range cases {
		src := strings.Replace(targetFile, c.from, c.to, 1)
		if src == targetFile {
			t.Fatalf("case %q does not apply", c.from)
		}
		_, err := Parse("t.yaml", []byte(src))
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s -> %s: %v, want an error naming %s", c.from, c.to, err, c.key)
		}
	}
	// A database fault without a database block.
	src := strings.Replace(targetFile, "  database:\n    listen: 127.0.0.1:6171\n    upstream: 127.0.0.1:5432\n", "", 1)
	if _, err := Parse("t.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "target.database") {
		t.Errorf("no database block: %v", err)
	}
}

// TestResolveExec: variables come from the environment; an unset one or
// a binary that is not an executable file is a reason to skip, naming it.
func TestResolveExec(t *testing.T) {
	f, err := Parse("t.yaml", []byte(targetFile))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if _, _, _, skip := f.Target.ResolveExec(lookup); !strings.Contains(skip, "IMLAB_TEST_TINODE_BIN, IMLAB_TEST_TINODE_CONF") {
		t.Fatalf("skip %q", skip)
	}
	dir := t.TempDir()
	env["IMLAB_TEST_TINODE_BIN"], env["IMLAB_TEST_TINODE_CONF"] = filepath.Join(dir, "tinode"), "/etc/t.conf"
	if _, _, _, skip := f.Target.ResolveExec(lookup); !strings.Contains(skip, "not an executable file") {
		t.Fatalf("skip %q", skip)
	}
	if err := os.WriteFile(filepath.Join(dir, "tinode"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin, args, _, skip := f.Target.ResolveExec(lookup)
	if skip != "" || bin != filepath.Join(dir, "tinode") || strings.Join(args, " ") != "-config /etc/t.conf" {
		t.Fatalf("bin %q args %v skip %q", bin, args, skip)
	}
}
