package summary

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// MergeSource is one run directory of a split run and the shift that puts
// its ledger's times on the merged time base.
type MergeSource struct {
	Dir     string
	Segment Segment
	// Shift: this segment's start minus the earliest segment's start, both
	// on the target's clock (each host's start corrected by its estimated
	// offset to the target).
	Shift time.Duration
}

// MergePlan is how several run directories are judged as one run.
type MergePlan struct {
	RunID       string
	Fingerprint string
	Count       int // segments of the run
	Sources     []MergeSource
	Missing     []int // segments with no directory (only with partial)
	// Precision bounds the error of a latency between a send of one
	// segment and a delivery seen by another: the sum of the two least
	// precise clock estimates (0 for a whole run); -1 when some segment's
	// clock is unknown.
	Precision time.Duration
	Notes     []string
}

// PlanMerge reads the summaries of dirs (the run directories of the
// segments of one run) and says how to judge them together. It refuses
// directories of different runs (run id, seed, shape, population: the
// fingerprint), two directories of one segment, and a missing segment
// unless partial.
func PlanMerge(dirs []string, partial bool) (*MergePlan, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: no run directory", ErrInvalid)
	}
	p := &MergePlan{}
	type seg struct {
		dir   string
		sum   *Summary
		start time.Time
	}
	var segs []seg
	bySeg := map[int]string{}
	var first *Summary
	for _, d := range dirs {
		s, err := Read(d)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, d, err)
		}
		sp := s.Split
		if sp.Segment.Count == 0 { // a summary from before segments: a whole run
			sp.Segment = Segment{Index: 1, Count: 1}
		}
		if first == nil {
			first = s
			p.RunID, p.Fingerprint, p.Count = s.RunID, sp.Fingerprint, sp.Segment.Count
		}
		switch {
		case s.RunID != p.RunID || sp.Fingerprint != p.Fingerprint:
			return nil, fmt.Errorf("%w: %s is another run (run %s, fingerprint %s, seed %d, shape %s, %d users) than %s (run %s, fingerprint %s, seed %d, shape %s, %d users)",
				ErrInvalid, d, s.RunID, sp.Fingerprint, sp.Seed, s.Shape, s.Population.Users, dirs[0], first.RunID, first.Split.Fingerprint, first.Split.Seed, first.Shape, first.Population.Users)
		case sp.Segment.Count != p.Count:
			return nil, fmt.Errorf("%w: %s is segment %s, %s is of %d segments", ErrInvalid, d, sp.Segment, dirs[0], p.Count)
		}
		if other, dup := bySeg[sp.Segment.Index]; dup {
			return nil, fmt.Errorf("%w: %s and %s are both segment %s", ErrInvalid, other, d, sp.Segment)
		}
		bySeg[sp.Segment.Index] = d
		start := s.StartedAt
		if c := sp.Clock; c != nil {
			start = start.Add(c.Offset)
		}
		segs = append(segs, seg{dir: d, sum: s, start: start})
	}
	for i := 1; i <= p.Count; i++ {
		if _, ok := bySeg[i]; !ok {
			p.Missing = append(p.Missing, i)
		}
	}
	if len(p.Missing) > 0 && !partial {
		return nil, fmt.Errorf("%w: run %s has %d segments; segments %v are missing (--partial judges the others, and then every message to or from their users is out of sight)", ErrInvalid, p.RunID, p.Count, p.Missing)
	}
	if len(p.Missing) > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("partial: segments %v of %d are missing; the verdict covers only what the others sent and saw", p.Missing, p.Count))
	}
	base := slices.MinFunc(segs, func(a, b seg) int { return a.start.Compare(b.start) }).start
	var precs []time.Duration
	unknown := false
	for _, s := range segs {
		p.Sources = append(p.Sources, MergeSource{Dir: s.dir, Segment: s.sum.Split.Segment, Shift: s.start.Sub(base)})
		if c := s.sum.Split.Clock; c != nil {
			precs = append(precs, c.Precision)
		} else {
			unknown = true
		}
	}
	slices.SortFunc(p.Sources, func(a, b MergeSource) int { return a.Segment.Index - b.Segment.Index })
	switch {
	case len(segs) == 1:
		p.Precision = 0
	case unknown:
		p.Precision = -1
		p.Notes = append(p.Notes, "some segment's clock offset is unknown: latencies between segments assume their clocks agree")
	default:
		slices.Sort(precs)
		p.Precision = precs[len(precs)-1] + precs[len(precs)-2]
		p.Notes = append(p.Notes, fmt.Sprintf("latencies between a send of one segment and a delivery seen by another are precise to ±%s (clock estimates against the target)", p.Precision))
	}
	return p, nil
}

// WaitForSummaries waits until every dir holds summary.json (a generator
// writes it last), polling every poll, for at most wait. It returns the
// directories still without one when the time is up.
func WaitForSummaries(ctx context.Context, dirs []string, wait, poll time.Duration) ([]string, error) {
	var missing []string
	err := pollUntil(ctx, wait, poll, func() (bool, error) {
		missing = missing[:0]
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, File)); err != nil {
				if !errors.Is(err, os.ErrNotExist) {
					return false, fmt.Errorf("summary: %s: %w", d, err)
				}
				missing = append(missing, d)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil && ctx.Err() == nil {
		return nil, err
	}
	return missing, err
}

// SegmentDirs lists the run directories below root (root/*/summary.json),
// waiting up to wait until as many as the run has segments are there (the
// count comes from the first summary found). It returns what it found when
// the time is up; the caller's PlanMerge then names what is missing.
func SegmentDirs(ctx context.Context, root string, wait, poll time.Duration) ([]string, error) {
	var dirs []string
	err := pollUntil(ctx, wait, poll, func() (bool, error) {
		sums, err := filepath.Glob(filepath.Join(root, "*", File))
		if err != nil {
			return false, fmt.Errorf("summary: %w", err)
		}
		dirs = dirs[:0]
		want := 0
		for _, p := range sums {
			d := filepath.Dir(p)
			dirs = append(dirs, d)
			if s, err := Read(d); err == nil && want == 0 {
				want = max(s.Split.Segment.Count, 1)
			}
		}
		return want > 0 && len(dirs) >= want, nil
	})
	switch {
	case err != nil && ctx.Err() == nil:
		return nil, err
	case err == nil && len(dirs) == 0:
		return nil, fmt.Errorf("%w: no run directory with a %s below %s", ErrInvalid, File, root)
	}
	return dirs, err
}

// pollUntil calls try every poll until it says done, it fails, the wait is
// over (nil: the caller reads what try left) or ctx ends (ctx.Err()).
func pollUntil(ctx context.Context, wait, poll time.Duration, try func() (bool, error)) error {
	deadline := time.Now().Add(wait)
	for {
		done, err := try()
		if err != nil {
			return err
		}
		if done || !time.Now().Before(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(poll, time.Until(deadline))):
		}
	}
}
