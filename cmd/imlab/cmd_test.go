package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/ref/auth"
	"imlab/ref/model"
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

// upRun is one `imlab up` in the background.
type upRun struct {
	base   string
	banner string // everything printed up to the ready line
	cancel context.CancelFunc
	done   chan error
	errb   *testenv.LockedBuffer
}

func startUp(t *testing.T, extra ...string) *upRun {
	t.Helper()
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	t.Setenv(envSecret, "cmd-test-secret-0123456789")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pr, pw := io.Pipe()
	root := newRootCmd()
	args := append([]string{"up", "--listen", "127.0.0.1:0", "--mysql-dsn", my.DSN, "--redis-addr", rd.Addr,
		"--redis-prefix", rd.Keys.Prefix, "--log-level", "warn", "--shutdown-timeout", "10s"}, extra...)
	root.SetArgs(args)
	root.SetOut(pw)
	u := &upRun{cancel: cancel, done: make(chan error, 1), errb: &testenv.LockedBuffer{}}
	root.SetErr(u.errb)
	go func() { u.done <- root.ExecuteContext(ctx); pw.Close() }()
	ready := make(chan [2]string, 1)
	go func() {
		var printed strings.Builder
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			printed.WriteString(line + "\n")
			if strings.HasPrefix(line, "imlab ready: ") {
				ready <- [2]string{strings.TrimPrefix(line, "imlab ready: "), printed.String()}
			}
		}
	}()
	select {
	case r := <-ready:
		u.base, u.banner = r[0], r[1]
	case err := <-u.done:
		t.Fatalf("up ended early: %v %s", err, u.errb.String())
	case <-time.After(40 * time.Second):
		t.Fatal("no ready line")
	}
	return u
}

func (u *upRun) stop(t *testing.T) {
	t.Helper()
	u.cancel()
	select {
	case err := <-u.done:
		if err != nil {
			t.Fatalf("up: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("up did not stop")
	}
	if _, err := http.Get(u.base + "/healthz"); err == nil {
		t.Fatal("still serving after stop")
	}
}

func TestUpServesAndStops(t *testing.T) {
	t.Setenv(envBackends, "") // the flag's default, auto, is asked for
	u := startUp(t)
	// The mode asked for and the one it came to, both: auto with a DSN
	// and an address given is external here.
	if !strings.Contains(u.banner, "(--backends auto, here external;") {
		t.Errorf("the banner does not say the mode asked for and the one used:\n%s", u.banner)
	}
	if !strings.Contains(u.banner, "sqlite (child process, nice 10)") {
		t.Errorf("the embedded FerretDB does not run as a lower-priority child:\n%s", u.banner)
	}
	// Each warning once: a WARNING line of the banner, not also a log line.
	for _, w := range []string{"MongoDB is embedded FerretDB", "embedded stand-ins serve kafka, mongo"} {
		if n := strings.Count(u.banner+u.errb.String(), w); n != 1 {
			t.Errorf("%q printed %d times:\n%s\n%s", w, n, u.banner, u.errb.String())
		}
	}
	r, err := http.Get(u.base + "/healthz")
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", r, err)
	}
	r.Body.Close()
	u.stop(t)
}

// TestUpOutboxPipeline: up runs every role over in-process Kafka and
// MongoDB; with the outbox policy a message goes send -> outbox -> relay
// -> Kafka -> consumer -> inbox (pulled) and -> history tier (read back).
func TestUpOutboxPipeline(t *testing.T) {
	u := startUp(t, "--policy", "outbox", "--dedup", "mq_dedup")
	for _, want := range []string{"kafka", "mongo", "/v1/lab/lag", "/v1/history", "policy: outbox", "dedup: mq_dedup",
		"roles: api,relay,consumer,history,reconciler"} {
		if !strings.Contains(u.banner, want) {
			t.Fatalf("banner lacks %q:\n%s", want, u.banner)
		}
	}
	cfg := auth.DefaultConfig()
	cfg.Secret = "cmd-test-secret-0123456789"
	a, _ := auth.New(cfg)
	tok := func(uid uint64) string {
		s, err := a.Mint(uid, "phone", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	call := func(method, path, token, body string) (int, []byte) {
		req, _ := http.NewRequest(method, u.base+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, b
	}
	code, body := call("POST", "/v1/msg/send", tok(1), `{"client_msg_id":"up-1","conv_type":1,"to_uid":2,"content":"through the queue"}`)
	if code != 200 {
		t.Fatalf("send: %d %s", code, body)
	}
	var sa struct {
		MsgID   uint64 `json:"msg_id"`
		ConvID  uint64 `json:"conv_id"`
		ConvSeq uint64 `json:"conv_seq"`
	}
	if err := json.Unmarshal(body, &sa); err != nil {
		t.Fatal(err)
	}
	poll := func(what, path, token string, ok func([]byte) bool) {
		end := time.Now().Add(20 * time.Second)
		for {
			code, body := call("GET", path, token, "")
			if code == 200 && ok(body) {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("%s: %d %s", what, code, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	msgID := strconv.FormatUint(sa.MsgID, 10)
	poll("pull", "/v1/sync/pull?cursor=0", tok(2), func(b []byte) bool {
		return strings.Contains(string(b), `"msg_id":`+msgID) && strings.Contains(string(b), "through the queue")
	})
	poll("history", fmt.Sprintf("/v1/history?conv_id=%d&from_seq=1&to_seq=1", sa.ConvID), tok(1), func(b []byte) bool {
		return strings.Contains(string(b), "through the queue")
	})
	poll("lag", "/v1/lab/lag", "", func(b []byte) bool {
		var l struct {
			Partitions []struct {
				Records int64 `json:"records"`
			} `json:"partitions"`
			OutboxBacklog int64 `json:"outbox_backlog"`
		}
		if json.Unmarshal(b, &l) != nil || len(l.Partitions) < 32 || l.OutboxBacklog != 0 {
			return false
		}
		for _, p := range l.Partitions {
			if p.Records != 0 {
				return false
			}
		}
		return true
	})
	u.stop(t)
}

func TestRefPushBusFlag(t *testing.T) {
	t.Setenv(envSecret, "")
	t.Setenv(envPushBus, "")
	args := []string{"ref", "--secret", "0123456789abcdef0123", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--redis-addr", "127.0.0.1:1"}
	if _, _, err := run(t, context.Background(), append(args, "--push-bus", "kafka")...); !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "kafka") {
		t.Fatalf("--push-bus kafka: %v", err)
	}
	t.Setenv(envPushBus, "bogus")
	if _, _, err := run(t, context.Background(), args...); !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("%s=bogus: %v", envPushBus, err)
	}
	// up is one process: no bus flag.
	if _, _, err := run(t, context.Background(), "up", "--push-bus", "redis"); err == nil || !strings.Contains(err.Error(), "push-bus") {
		t.Fatalf("up --push-bus: %v", err)
	}
}

// Bad transport and GC flags are refused before anything is sent or
// written.
func TestLoadRefusesBadFlags(t *testing.T) {
	t.Setenv(envSecret, "cmd-test-secret-0123456789")
	t.Setenv("GOGC", "100") // so that load leaves this process's collector alone
	t.Setenv("GOMAXPROCS", strconv.Itoa(runtime.GOMAXPROCS(0)))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pipeline", "-1"}, "pipeline"},
		{[]string{"--pipeline", "5000"}, "pipeline"},
		{[]string{"--pipeline", "4", "--pipeline-delay", "1s"}, "pipeline delay"},
		{[]string{"--pipeline", "4", "--pipeline-conns", "0"}, "pipeline conns"},
		{[]string{"--gogc", "-2"}, "--gogc"},
		{[]string{"--procs", "0"}, "--procs"},
		{[]string{"--mix-revoke", "-1"}, "mix.revoke"},
		{[]string{"--mix=default", "--mix-read", "2"}, "mix.read"},
		{[]string{"--mix", "most"}, "mix preset"},
	} {
		dir := filepath.Join(t.TempDir(), "run")
		args := append([]string{"load", "--target", "http://127.0.0.1:1", "--ceiling", "0", "--run-dir", dir}, c.args...)
		_, _, err := run(t, context.Background(), args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%v: %v, want an error about %q", c.args, err, c.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("%v: run dir created: %v", c.args, err)
		}
	}
}

// TestRefDefects: --list-defects lists every shipped defect with one line
// each; --defect without --lab-defects is refused before anything starts
// (no backend is reached: the DSN points nowhere), and so is an unknown
// name even with the switch.
func TestRefDefects(t *testing.T) {
	out, _, err := run(t, context.Background(), "ref", "--list-defects")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 9 || !strings.HasPrefix(lines[0], "ack-before-commit ") || !strings.Contains(out, "cursor-on-pull") || !strings.Contains(out, "ref/pull") {
		t.Fatalf("--list-defects:\n%s", out)
	}
	args := []string{"ref", "--secret", "cmd-test-secret-0123456789", "--mysql-dsn", "root@tcp(127.0.0.1:1)/none", "--redis-addr", "127.0.0.1:1"}
	_, _, err = run(t, context.Background(), append(args, "--defect", "cursor-on-pull")...)
	if err == nil || !strings.Contains(err.Error(), "refused without the lab switch") || !strings.Contains(err.Error(), "--lab-defects") {
		t.Fatalf("--defect without --lab-defects: %v", err)
	}
	_, _, err = run(t, context.Background(), append(args, "--defect", "no-such", "--lab-defects")...)
	if err == nil || !strings.Contains(err.Error(), "unknown defect") {
		t.Fatalf("unknown defect: %v", err)
	}
}
