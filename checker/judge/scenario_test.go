package judge

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"imlab/loadgen"
	"imlab/loadgen/faketarget"
	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
	"imlab/result"
)

// TestScenarioRunDirIsJudgedByItsLoad: imlab check given a scenario run's
// directory (no ledger of its own; the load's under load/, or the load's
// segments under load/seg-I) judges that load, says so first, and writes
// the verdict beside the ledger it judged, not over the run's own
// verdict.json. A directory with neither stays refused.
func TestScenarioRunDirIsJudgedByItsLoad(t *testing.T) {
	if ScenarioLoadDir != result.LoadDir {
		t.Fatalf("ScenarioLoadDir %q, the runner's result.LoadDir %q", ScenarioLoadDir, result.LoadDir)
	}
	const secret = "judge-scenario-test-secret-0123"
	srv, err := faketarget.Start(faketarget.DefaultConfig(secret))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	load := func(dir string, uidBase uint64, seg summary.Segment) {
		t.Helper()
		cfg := loadgen.DefaultConfig(srv.URL(), secret, dir)
		cfg.Shape, cfg.Duration = schedule.Constant{PerSec: 100}, time.Second
		cfg.Pop.Users, cfg.Pop.Groups, cfg.Pop.GroupShare, cfg.Pop.UIDBase = 10, 0, 0, uidBase
		cfg.Settle, cfg.CeilingFor, cfg.Timeout = 200*time.Millisecond, 0, 30*time.Second
		cfg.Segment = seg
		if _, err := loadgen.Run(ctx, cfg); err != nil {
			t.Error(err)
		}
	}

	one := t.TempDir()
	load(filepath.Join(one, ScenarioLoadDir), 1000, summary.Segment{})
	rep, err := Dirs(ctx, Options{Dirs: []string{one}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.WriteText(&out)
	if want := one + " is a scenario run: judging its ledger in " + filepath.Join(one, ScenarioLoadDir); !strings.HasPrefix(out.String(), want) {
		t.Fatalf("report does not say it first (%q):\n%s", want, out.String())
	}
	// Valid (a machine too busy to start the sends on time makes it
	// OVERLOADED as well, which is not what this test is about).
	if !rep.Valid || rep.VerdictFile != filepath.Join(one, ScenarioLoadDir, "verdict.json") || rep.Load == nil {
		t.Fatalf("result %s, verdict file %s, load %v", rep.Result, rep.VerdictFile, rep.Load)
	}

	split := t.TempDir()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			load(filepath.Join(split, ScenarioLoadDir, "seg-"+string(rune('1'+i))), 2000, summary.Segment{Index: i + 1, Count: 2})
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	rep, err = Dirs(ctx, Options{Dirs: []string{split}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Segments == nil || rep.Segments.Judged != 2 || !strings.Contains(rep.Note, "judging the segments of its load in "+filepath.Join(split, ScenarioLoadDir)) ||
		rep.VerdictFile != filepath.Join(split, ScenarioLoadDir, "verdict.json") {
		t.Fatalf("split load: segments %+v, note %q, verdict file %s", rep.Segments, rep.Note, rep.VerdictFile)
	}

	empty := t.TempDir()
	if err := os.MkdirAll(filepath.Join(empty, ScenarioLoadDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if rep, err := Dirs(ctx, Options{Dirs: []string{empty}}); err == nil {
		t.Fatalf("a directory without a ledger was judged: %+v", rep)
	}
}
