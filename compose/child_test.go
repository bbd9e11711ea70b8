package compose

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"imlab/internal/testenv"
)

// TestMain makes the test binary the child commands of this package's
// tests: "embedded-mongo DIR" (Config.MongoCommand) and "hold-backends
// DATADIR", which starts private backends, prints its children's pids as
// one JSON line and waits to be killed.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		var err error
		switch os.Args[1] {
		case "embedded-mongo":
			err = ServeEmbeddedMongo(ctx, os.Args[2], os.Stdin, os.Stdout)
		case "hold-backends":
			err = holdBackends(ctx, os.Args[2])
		default:
			stop()
			os.Exit(m.Run())
		}
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, os.Args[1]+":", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holdBackends is the body of the hold-backends child.
func holdBackends(ctx context.Context, dataDir string) error {
	cfg := DefaultConfig()
	cfg.Mode = ModeLocal
	cfg.DataDir = dataDir
	cfg.WithKafka = false
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.MongoCommand = []string{exe, "embedded-mongo"}
	b, stop, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer stop(context.WithoutCancel(ctx))
	pids, err := childPIDs(os.Getpid())
	if err != nil {
		return err
	}
	// The private processes' pids are given, for a caller that reads
	// their CPU (the capacity scenario watches them).
	for _, part := range []string{PartMySQL, PartRedis} {
		if pid := b.PIDs[part]; pid <= 0 || !slices.Contains(pids, pid) {
			return fmt.Errorf("Backends.PIDs[%s] = %d, not among the children %v", part, pid, pids)
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(pids); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// childPIDs lists the live children of pid (any of its threads').
func childPIDs(pid int) ([]int, error) {
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			n, err := strconv.Atoi(s)
			if err == nil {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// procNice reads the nice value of pid from /proc/PID/stat (field 19).
func procNice(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, err := strconv.Atoi(f[16]) // fields after comm start at 3 (state)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEmbeddedMongoChild: with MongoCommand, FerretDB runs in a child
// process at MongoNice, answers on the URI, indexes its _id lookups, and is
// gone after stop.
func TestEmbeddedMongoChild(t *testing.T) {
	cfg := testConfig(t, ModeEmbedded)
	cfg.WithKafka = false
	cfg.MongoCommand = testenv.SelfCommand(t, "embedded-mongo")
	cfg.MongoNice = 7
	b, stop := startT(t, cfg)
	if !strings.Contains(b.Kinds[PartMongo], "child process, nice 7") {
		t.Fatalf("Kinds[mongo] = %q", b.Kinds[PartMongo])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := mongoVersion(ctx, b.MongoURI); err != nil {
		t.Fatalf("child FerretDB does not answer: %v", err)
	}
	waitIDIndexed(t, b.MongoURI, filepath.Join(b.root, "ferretdb"))
	pids, err := childPIDs(os.Getpid())
	if err != nil || len(pids) != 1 {
		t.Fatalf("children %v %v, want the one FerretDB", pids, err)
	}
	if n := procNice(t, pids[0]); n != 7 {
		t.Fatalf("child nice %d, want 7", n)
	}
	if n := procNice(t, os.Getpid()); n != 0 {
		t.Fatalf("this process's nice changed to %d", n)
	}
	if err := stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if testenv.ProcAlive(pids[0]) {
		t.Fatalf("FerretDB child %d alive after stop", pids[0])
	}
}

// TestPrivateBackendsDieWithTheirParent: a process that started private
// MySQL, Redis and FerretDB is killed (SIGKILL: no cleanup runs); every
// one of them must exit by itself.
func TestPrivateBackendsDieWithTheirParent(t *testing.T) {
	requireLocalBinaries(t)
	cmd := exec.Command(testenv.SelfCommand(t)[0], "hold-backends", t.TempDir())
	var stderr testenv.LockedBuffer
	cmd.Stderr = &stderr
	line := testenv.StartLines(t, cmd)
	var pids []int
	select {
	case l, ok := <-line:
		if !ok {
			t.Fatalf("hold-backends ended: %s", stderr.String())
		}
		if err := json.Unmarshal([]byte(l), &pids); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("hold-backends printed nothing")
	}
	if len(pids) != 3 {
		t.Fatalf("children %v, want mysqld, redis-server and FerretDB", pids)
	}
	t.Cleanup(func() {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range pids {
		for testenv.ProcAlive(p) {
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
				t.Fatalf("backend %d (%s) still running after its parent was killed", p, strings.ReplaceAll(string(b), "\x00", " "))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
