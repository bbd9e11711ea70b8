package loadgen_test

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"imlab/checker"
	"imlab/internal/testenv"
	"imlab/loadgen"
	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
)

// One run against the real reference server, then the same run split in
// two segments started apart (two generators, each with its own share of
// the schedule and population, groups spanning both): the segments
// together send exactly what the whole run sent, and the checker judges
// their two ledgers as one valid run. Mismatched directories are refused.
func TestSegmentsMergeToTheWholeRun(t *testing.T) {
	const secret = "loadgen-seg-secret-0123456789"
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	target := startRef(t, secret, my, rd, true)
	base := t.TempDir()
	conf := func(dir string, uidBase uint64, seg summary.Segment) loadgen.Config {
		lc := loadgen.DefaultConfig(target, secret, dir)
		lc.Shape = schedule.Constant{PerSec: 200}
		lc.Duration = 1500 * time.Millisecond // 300 sends in all
		lc.Pop = loadgen.Population{
			Users: 24, DevicesPerUser: 2, UIDBase: uidBase, GroupBase: uidBase,
			Online: 0.5, Crashy: 0.1, Groups: 4,
			GroupSizes: []loadgen.SizeWeight{{Size: 5, Weight: 1}, {Size: 12, Weight: 1}}, GroupShare: 0.3,
			ComeBackEvery: 400 * time.Millisecond, CrashEvery: 2,
		}
		lc.Pacer.Workers, lc.Pacer.MaxWorkers = 16, 64
		lc.Pacer.Grace = 4 * time.Minute
		lc.Conns, lc.Timeout, lc.Settle, lc.DrainTimeout, lc.CeilingFor, lc.Shards = 16, 30*time.Second, 500*time.Millisecond, time.Minute, 0, 2
		lc.Segment = seg
		return lc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	whole, err := loadgen.Run(ctx, conf(filepath.Join(base, "whole"), 3000, summary.Segment{}))
	if err != nil {
		t.Fatal(err)
	}
	// The split run: a fresh uid range (a run's messages must not meet
	// another's), the same flags otherwise, started a little apart.
	dirs := []string{filepath.Join(base, "seg-1"), filepath.Join(base, "seg-2")}
	sums := make([]*summary.Summary, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 150 * time.Millisecond)
			sums[i], errs[i] = loadgen.Run(ctx, conf(dirs[i], 4000, summary.Segment{Index: i + 1, Count: 2}))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("segment %d: %v", i+1, err)
		}
	}
	started := sums[0].Pacer.Started + sums[1].Pacer.Started
	if sums[0].Pacer.Started == 0 || sums[1].Pacer.Started == 0 || started != whole.Pacer.Started {
		t.Fatalf("segments started %d + %d sends, the whole run %d", sums[0].Pacer.Started, sums[1].Pacer.Started, whole.Pacer.Started)
	}
	if sums[0].RunID != sums[1].RunID || sums[0].Split.Fingerprint != sums[1].Split.Fingerprint {
		t.Fatalf("segments disagree on the run: %s/%s vs %s/%s", sums[0].RunID, sums[0].Split.Fingerprint, sums[1].RunID, sums[1].Split.Fingerprint)
	}
	if c := sums[0].Split.Clock; c == nil || c.Source != "lab-time" {
		t.Fatalf("no clock estimate from the lab route: %+v (%s)", c, sums[0].Split.ClockError)
	}
	wv, err := checker.Check(filepath.Join(base, "whole"))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := summary.PlanMerge(dirs, false)
	if err != nil {
		t.Fatal(err)
	}
	var srcs []checker.Source
	for _, s := range plan.Sources {
		srcs = append(srcs, checker.Source{Dir: s.Dir, Shift: s.Shift})
	}
	mv, err := checker.CheckSources(srcs)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	mv.WriteTable(&buf)
	t.Logf("merged (shifts %v, precision %s):\n%s", plan.Sources, plan.Precision, buf.String())
	if !wv.Valid || !mv.Valid {
		t.Fatalf("whole valid %v, merged valid %v", wv.Valid, mv.Valid)
	}
	// Each segment witnessed its own uids' stored inboxes: merged, the
	// store witness covers every uid, as the whole run's does.
	if u := mv.Unmade(); len(u) != 0 || mv.Stored != wv.Stored || mv.Stored == 0 {
		t.Fatalf("merged evidence: unmade %v, stored %d (whole run %d)", u, mv.Stored, wv.Stored)
	}
	if mv.OK+mv.Findings["recovered"].Count != wv.OK+wv.Findings["recovered"].Count || mv.OK == 0 {
		t.Fatalf("merged ok %d (+%d recovered), whole ok %d (+%d)", mv.OK, mv.Findings["recovered"].Count, wv.OK, wv.Findings["recovered"].Count)
	}
	if mv.Latency["end_to_end"].Count == 0 || mv.Latency["response"].Count != int64(mv.OK) {
		t.Fatalf("merged latencies %+v for %d ok", mv.Latency, mv.OK)
	}
	// A segment alone is partial; a segment with the whole run is another run.
	if _, err := summary.PlanMerge(dirs[:1], false); err == nil {
		t.Fatal("one segment of two merged without --partial")
	}
	if p, err := summary.PlanMerge(dirs[:1], true); err != nil || len(p.Missing) != 1 || p.Missing[0] != 2 {
		t.Fatalf("partial plan %+v, %v", p, err)
	}
	if _, err := summary.PlanMerge([]string{dirs[0], filepath.Join(base, "whole")}, true); err == nil {
		t.Fatal("a segment merged with another run")
	}
	if _, err := summary.PlanMerge([]string{dirs[0], dirs[0]}, true); err == nil {
		t.Fatal("one segment merged twice")
	}
}
