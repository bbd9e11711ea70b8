package summary

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The waits of a merged check: they return what is there once the time is
// up, at once when everything is, and SegmentDirs stops as soon as the
// run's segment count of summaries is there.
func TestWaitForSummariesAndSegmentDirs(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "seg-1"), filepath.Join(root, "seg-2")
	for _, d := range []string{a, b, filepath.Join(root, "claims")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	seg := func(i int) *Summary { return &Summary{Split: SegmentSummary{Segment: Segment{Index: i, Count: 2}}} }
	if err := Write(a, seg(1)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	began := time.Now()
	missing, err := WaitForSummaries(ctx, []string{a, b}, 300*time.Millisecond, 50*time.Millisecond)
	if err != nil || !slices.Equal(missing, []string{b}) || time.Since(began) < 300*time.Millisecond {
		t.Fatalf("missing %v, %v after %s", missing, err, time.Since(began))
	}
	dirs, err := SegmentDirs(ctx, root, 300*time.Millisecond, 50*time.Millisecond)
	if err != nil || !slices.Equal(dirs, []string{a}) {
		t.Fatalf("one of two segments: %v, %v", dirs, err)
	}
	if err := Write(b, seg(2)); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	dirs, err = SegmentDirs(ctx, root, time.Minute, 50*time.Millisecond)
	if err != nil || !slices.Equal(dirs, []string{a, b}) || time.Since(began) > 10*time.Second {
		t.Fatalf("both segments: %v, %v after %s", dirs, err, time.Since(began))
	}
	if missing, err := WaitForSummaries(ctx, []string{a, b}, time.Minute, 50*time.Millisecond); err != nil || len(missing) != 0 {
		t.Fatalf("all there: %v, %v", missing, err)
	}
	if _, err := SegmentDirs(ctx, t.TempDir(), 100*time.Millisecond, 50*time.Millisecond); err == nil {
		t.Fatal("no summary below root and no error")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := WaitForSummaries(cctx, []string{filepath.Join(root, "none")}, time.Minute, 50*time.Millisecond); err == nil {
		t.Fatal("a cancelled wait returned no error")
	}
}
