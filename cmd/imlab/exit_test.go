package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"imlab/capacity"
	"imlab/loadgen"
	"imlab/loadgen/faketarget"
	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
)

const exitTestSecret = "exit-status-secret-0123456789"

// fakeRun runs a short load against a fake target with faults (and
// segment seg, the whole run when zero) into dir and returns dir.
func fakeRun(t *testing.T, srv *faketarget.Server, dir string, seg summary.Segment) string {
	t.Helper()
	if err := runFake(srv, dir, seg); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runFake(srv *faketarget.Server, dir string, seg summary.Segment) error {
	cfg := loadgen.DefaultConfig(srv.URL(), exitTestSecret, dir)
	cfg.Shape, cfg.Duration = schedule.Constant{PerSec: 100}, time.Second
	cfg.Pop.Users, cfg.Pop.Groups, cfg.Pop.GroupShare = 10, 0, 0
	cfg.Settle, cfg.CeilingFor, cfg.Timeout = 200*time.Millisecond, 0, 30*time.Second
	cfg.Segment = seg
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := loadgen.Run(ctx, cfg)
	return err
}

func fakeTarget(t *testing.T, faults faketarget.Faults) *faketarget.Server {
	t.Helper()
	c := faketarget.DefaultConfig(exitTestSecret)
	c.Faults = faults
	srv, err := faketarget.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// overloaded copies a valid run and says in its summary that a fifth of
// its sends stayed unknown.
func overloaded(t *testing.T, valid string) string {
	t.Helper()
	dir := t.TempDir()
	ents, err := os.ReadDir(valid)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(valid, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := summary.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Unknown = s.OK / 5
	b, _ := json.Marshal(s)
	if err := os.WriteFile(filepath.Join(dir, summary.File), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExitStatuses: every command answers 0 when it did what it was asked
// and what it judged passed, 1 when what it judged failed, 2 when it could
// not be carried out (a bad flag or argument, a bad or missing file, a
// target that is not there), and imlab check 3 when the run is VALID but
// OVERLOADED (README, "Exit status"). The long-running outcomes are in
// their own tests: scenario run 1 (TestScenarioRunFails) and 0 (TestDemo),
// compare and report compare on real scenario runs (TestReadersOfRealRuns).
func TestExitStatuses(t *testing.T) {
	t.Setenv(envSecret, "")
	valid := fakeRun(t, fakeTarget(t, faketarget.Faults{}), t.TempDir(), summary.Segment{})
	lossy := fakeRun(t, fakeTarget(t, faketarget.Faults{DropEvery: 7}), t.TempDir(), summary.Segment{})
	over := overloaded(t, valid)
	empty := t.TempDir()
	fake := fakeTarget(t, faketarget.Faults{}).URL()

	sumFile := filepath.Join(valid, summary.File)
	worse := filepath.Join(t.TempDir(), "worse.json")
	s, err := summary.Read(valid)
	if err != nil {
		t.Fatal(err)
	}
	s.Latency["response"] = summary.Quantiles{Count: s.Latency["response"].Count, P50: 10_000_000, P99: 20_000_000, P999: 20_000_000}
	b, _ := json.Marshal(s)
	if err := os.WriteFile(worse, b, 0o644); err != nil {
		t.Fatal(err)
	}
	badYAML := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(badYAML, []byte("name: x\nload:\n  rate: const:1\n  duraton: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	// Bad values of the load's mix, the target block and the expectations,
	// each in a shipped file otherwise valid.
	badFile := func(name, from, to, src string) string {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), from) {
			t.Fatalf("%s: no %q", src, from)
		}
		p := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const wipe, tinode = "../../scenarios/redis-wipe.yaml", "../../scenarios/targets/tinode-kill.yaml"
	badMix := badFile("mix", "  settle: 2s\n", "  settle: 2s\n  mix:\n    revoke: 1.5\n", wipe)
	negMix := badFile("negmix", "  settle: 2s\n", "  settle: 2s\n  mix:\n    read: -0.2\n", wipe)
	badTarget := badFile("target", "driver: tinode", "driver: nats", tinode)
	badDead := badFile("dead", "expect:\n", "expect:\n  dead_letters: {min: -1}\n", wipe)
	badFindings := badFile("findings", "expect:\n", "expect:\n  findings: [nope]\n", wipe)

	for _, c := range []struct {
		name string
		args []string
		want int
		says string // what stderr must name (the key), when set
	}{
		{"help", []string{"--help"}, 0, ""},
		{"unknown command", []string{"chek", valid}, 2, ""},

		{"token", []string{"token", "--uid", "1", "--did", "phone"}, 0, ""},
		{"token: bad uid", []string{"token", "--uid", "0", "--did", "phone"}, 2, ""},
		{"token: flag typo", []string{"token", "--uid", "1", "--dod", "phone"}, 2, ""},

		{"check: valid", []string{"check", valid}, 0, ""},
		{"check: invalid", []string{"check", lossy}, 1, ""},
		{"check: overloaded", []string{"check", over}, 3, ""},
		{"check --json: invalid", []string{"check", "--json", lossy}, 1, ""},
		{"check: missing directory", []string{"check", filepath.Join(empty, "none")}, 2, ""},
		{"check: empty directory", []string{"check", empty}, 2, ""},
		{"check: flag typo", []string{"check", "--jsn", valid}, 2, ""},
		{"check: no directory", []string{"check"}, 2, ""},

		{"compare: same", []string{"compare", sumFile, sumFile}, 0, ""},
		{"compare: regression", []string{"compare", sumFile, worse}, 1, ""},
		{"compare: flag typo", []string{"compare", "--tolernce", "ack_p99:+10%", sumFile, worse}, 2, ""},
		{"compare: missing file", []string{"compare", sumFile, filepath.Join(empty, "none.json")}, 2, ""},

		{"report compare: no -o", []string{"report", "compare", valid}, 2, ""},
		{"report compare: missing run", []string{"report", "compare", filepath.Join(empty, "none"), "-o", filepath.Join(out, "r.html")}, 2, ""},
		{"report compare: not a scenario result", []string{"report", "compare", sumFile, "-o", filepath.Join(out, "r.html")}, 2, ""},
		{"report compare: flag typo", []string{"report", "compare", "--ot", "x.html", valid}, 2, ""},

		{"scenario validate: shipped", []string{"scenario", "validate", "../../scenarios/redis-wipe.yaml"}, 0, ""},
		{"scenario validate: bad file", []string{"scenario", "validate", badYAML}, 2, ""},
		{"scenario run: flag typo", []string{"scenario", "run", "--duraton", "3s", "../../scenarios/redis-wipe.yaml"}, 2, ""},
		{"scenario run: bad file", []string{"scenario", "run", "--out", out, badYAML}, 2, ""},
		{"scenario selftest: flag typo", []string{"scenario", "selftest", "--paralel", "2"}, 2, ""},
		{"demo: unknown scenario", []string{"demo", "no-such-scenario"}, 2, ""},

		{"load: valid", []string{"load", "--secret", exitTestSecret, "--target", fake, "--rate", "const:50", "--duration", "1s", "--users", "5", "--groups", "0",
			"--ceiling", "0", "--settle", "200ms", "--run-dir", filepath.Join(out, "load-ok")}, 0, ""},
		{"load --check: invalid", []string{"load", "--secret", exitTestSecret, "--target", fakeTarget(t, faketarget.Faults{DropEvery: 5}).URL(), "--rate", "const:50", "--duration", "1s",
			"--users", "5", "--groups", "0", "--ceiling", "0", "--settle", "200ms", "--run-dir", filepath.Join(out, "load-lossy"), "--check"}, 1, ""},
		{"load: bad rate", []string{"load", "--rate", "garbage"}, 2, ""},
		{"load: flag typo", []string{"load", "--duraton", "3s"}, 2, ""},
		{"load: target not ready", []string{"load", "--target", "http://127.0.0.1:1", "--wait-ready", "500ms", "--run-dir", filepath.Join(out, "load-none")}, 2, ""},

		{"load: mix probability > 1", []string{"load", "--secret", exitTestSecret, "--target", fake, "--mix-revoke", "1.5", "--run-dir", filepath.Join(out, "load-mix")}, 2, "mix.revoke"},
		{"load: negative mix probability", []string{"load", "--secret", exitTestSecret, "--target", fake, "--mix", "default", "--mix-read", "-0.1", "--run-dir", filepath.Join(out, "load-mix")}, 2, "mix.read"},
		{"scenario validate: mix probability > 1", []string{"scenario", "validate", badMix}, 2, "mix.revoke"},
		{"scenario run: negative mix probability", []string{"scenario", "run", "--out", out, negMix}, 2, "mix.read"},
		{"scenario validate: bad target block", []string{"scenario", "validate", badTarget}, 2, "target.driver"},
		{"scenario validate: bad dead_letters", []string{"scenario", "validate", badDead}, 2, "expect.dead_letters"},
		{"scenario validate: bad findings", []string{"scenario", "validate", badFindings}, 2, "expect.findings"},
		{"scenario validate: load key typo", []string{"scenario", "validate", badYAML}, 2, `did you mean "duration"`},

		{"capacity: bad slo", []string{"capacity", "--slo", "ack_p99<2", "--out", out}, 2, ""},
		{"capacity: target not ready", []string{"capacity", "--secret", exitTestSecret, "--target", "http://127.0.0.1:1", "--wait-ready", "500ms", "--out", filepath.Join(out, "cap-none")}, 2, "not ready"},
		{"capacity: mix probability > 1", []string{"capacity", "--secret", exitTestSecret, "--target", fake, "--no-target-procs", "--proc", "", "--mix-delete", "2", "--out", out}, 2, "mix.delete"},
		{"up: bad flag", []string{"up", "--push-bus", "redis"}, 2, ""},
		{"ref: no secret", []string{"ref", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--redis-addr", "127.0.0.1:1"}, 2, ""},
		{"migrate: no database", []string{"migrate"}, 2, ""},
		{"reconcile: no database", []string{"reconcile"}, 2, ""},
		{"reconcile: no time to run", []string{"reconcile", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--redis-addr", "127.0.0.1:1", "--timeout", "0s"}, 2, "must be positive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code, stdout, stderr := runImlab(t, ctx, c.args...)
			if code != c.want {
				t.Errorf("imlab %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(c.args, " "), code, c.want, tail(stdout), tail(stderr))
			}
			if c.says != "" && !strings.Contains(stderr, c.says) {
				t.Errorf("imlab %s: stderr does not name %s:\n%s\nstdout: %s", strings.Join(c.args, " "), c.says, tail(stderr), tail(stdout))
			}
		})
	}
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}

// TestCheckJSONIsOnlyJSON: imlab check --json prints one JSON object and
// nothing else on stdout, for one run directory and for the segments of
// one run judged together, with the load's outcome and the result beside
// the verdict; what it wrote to verdict.json is the checker's verdict.
func TestCheckJSONIsOnlyJSON(t *testing.T) {
	one := fakeRun(t, fakeTarget(t, faketarget.Faults{}), t.TempDir(), summary.Segment{})
	parent := t.TempDir()
	split := fakeTarget(t, faketarget.Faults{}) // a server of their own: the uids are the same
	seg1, seg2 := filepath.Join(parent, "s1"), filepath.Join(parent, "s2")
	// The segments of one run run at once (each sends to the other's users).
	errs := make(chan error, 2)
	go func() { errs <- runFake(split, seg1, summary.Segment{Index: 1, Count: 2}) }()
	go func() { errs <- runFake(split, seg2, summary.Segment{Index: 2, Count: 2}) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, dirs := range [][]string{{one}, {seg1, seg2}} {
		code, stdout, stderr := runImlab(t, context.Background(), append([]string{"check", "--json"}, dirs...)...)
		if code != 0 {
			t.Fatalf("check --json %v: exit %d\n%s\n%s", dirs, code, stdout, stderr)
		}
		dec := json.NewDecoder(strings.NewReader(stdout))
		var rep struct {
			Format string `json:"format"`
			Valid  *bool  `json:"valid"`
			Result string `json:"result"`
			Load   *struct {
				AckedPerSec float64  `json:"acked_per_sec"`
				Unknown     *float64 `json:"unknown_fraction"`
				Failed      *float64 `json:"fail_fraction"`
				Retried     *float64 `json:"retried_fraction"`
				Overloaded  *bool    `json:"overloaded"`
			} `json:"load"`
			Segments *struct {
				Judged int `json:"judged"`
			} `json:"segments"`
			Findings map[string]any `json:"findings"`
		}
		if err := dec.Decode(&rep); err != nil {
			t.Fatalf("check --json %v: stdout is not JSON: %v\n%s", dirs, err, stdout)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			t.Fatalf("check --json %v: more than one JSON value on stdout:\n%s", dirs, stdout)
		}
		if rep.Valid == nil || !*rep.Valid || rep.Result != "VALID" || rep.Format == "" || len(rep.Findings) == 0 {
			t.Fatalf("check --json %v: %+v", dirs, rep)
		}
		if l := rep.Load; l == nil || l.AckedPerSec <= 0 || l.Unknown == nil || l.Failed == nil || l.Retried == nil || l.Overloaded == nil || *l.Overloaded {
			t.Fatalf("check --json %v: load %+v", dirs, rep.Load)
		}
		if (len(dirs) > 1) != (rep.Segments != nil) || (rep.Segments != nil && rep.Segments.Judged != 2) {
			t.Fatalf("check --json %v: segments %+v", dirs, rep.Segments)
		}
	}
}

// TestSecretWarningOnce: the lab secret's warning is printed once by a
// command that signs with it, and not at all for --help or a bad flag.
func TestSecretWarningOnce(t *testing.T) {
	t.Setenv(envSecret, "")
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"load", "--help"}, 0},
		{[]string{"load", "--rate", "garbage"}, 0},
		{[]string{"load", "--duraton", "1s"}, 0},
		{[]string{"scenario", "run", "--help"}, 0},
		{[]string{"capacity", "--slo", "nonsense"}, 0},
		{[]string{"token", "--uid", "0", "--did", "phone"}, 0},
		{[]string{"token", "--uid", "1", "--did", "phone"}, 1},
	} {
		_, stdout, stderr := runImlab(t, context.Background(), c.args...)
		if n := strings.Count(stdout+stderr, envSecret+" is not set"); n != c.want {
			t.Errorf("imlab %s: the secret's warning %d times, want %d\n%s", strings.Join(c.args, " "), n, c.want, stderr)
		}
	}
	// --rate garbage says which shapes there are.
	if _, _, stderr := runImlab(t, context.Background(), "load", "--rate", "garbage"); !strings.Contains(stderr, "const") || !strings.Contains(stderr, "burst") || !strings.Contains(stderr, "sine") {
		t.Errorf("load --rate garbage: %q does not list the shapes", stderr)
	}
	// report compare without -o: one prefix.
	if _, _, stderr := runImlab(t, context.Background(), "report", "compare", t.TempDir()); strings.Count(stderr, "imlab") != 1 {
		t.Errorf("report compare without -o: %q", stderr)
	}
}

// TestLoadWaitsForTheTarget: the README's lab block starts imlab up in the
// background and imlab load right after it: load waits for the target's
// /healthz (connection refused while the server starts), says that it
// waits, and runs once the server answers.
func TestLoadWaitsForTheTarget(t *testing.T) {
	fake := fakeTarget(t, faketarget.Faults{})
	up, err := url.Parse(fake.URL())
	if err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t) // nothing listens there yet: the server is still starting
	srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(up), ReadHeaderTimeout: 10 * time.Second}
	started := make(chan error, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		started <- err
		if err == nil {
			_ = srv.Serve(ln)
		}
	}()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, stdout, stderr := runImlab(t, ctx, "load", "--secret", exitTestSecret, "--target", "http://"+addr, "--wait-ready", "30s",
		"--rate", "const:50", "--duration", "1s", "--users", "5", "--groups", "0", "--online", "0", "--ceiling", "0", "--settle", "200ms",
		"--run-dir", filepath.Join(t.TempDir(), "run"))
	if err := <-started; err != nil {
		t.Skipf("the reserved port was taken meanwhile: %v", err)
	}
	if code != 0 || !strings.Contains(stdout, "waiting up to 30s for http://"+addr+"/healthz") || !strings.Contains(stdout, "/healthz ready after") {
		t.Fatalf("exit %d\n%s\n%s", code, tail(stdout), stderr)
	}
	if !strings.Contains(stdout, "ok 50, fail 0, unknown 0") {
		t.Fatalf("the load did not run whole once the target was up:\n%s", tail(stdout))
	}
}

// freeLoopbackAddr is a loopback address nothing listens on: a port the
// kernel handed out, closed again.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestCapacityOutOfStepsExit: a search that runs out of --max-steps before
// a rate held twice exits 1 and says that no rate was confirmed, naming
// the budget, not that none held. Its two steps must hold for that: on a
// machine so busy that the first one broke, the search ended there, and
// the test says so and skips.
func TestCapacityOutOfStepsExit(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cap")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, stdout, stderr := runImlab(t, ctx, "capacity", "--secret", exitTestSecret, "--target", fakeTarget(t, faketarget.Faults{}).URL(), "--no-target-procs",
		"--proc", "", "--max-steps", "2", "--from", "20", "--to", "800", "--growth", "1.5", "--warm-up", "1s", "--step", "2s", "--ceiling", "0",
		"--cool-down", "0s", "--settle-max", "0s", "--slo", "ack_p99<=10s", "--no-check", "--users", "10", "--out", out)
	raw, err := os.ReadFile(filepath.Join(out, capacity.ResultFile))
	if err != nil {
		t.Fatalf("exit %d, no result.json: %v\n%s", code, err, tail(stderr))
	}
	var res capacity.Result
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Steps) == 0 {
		t.Fatalf("result.json: %v", err)
	}
	if !res.Steps[0].Held {
		t.Skipf("the first step broke on this machine just now: %s", res.Answer)
	}
	if code != capacityExitNone || !strings.Contains(stderr, "ran out of its 2 steps") || !strings.Contains(stdout, "answer: "+capacity.NotConfirmed) {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, capacityExitNone, tail(stdout), tail(stderr))
	}
}
