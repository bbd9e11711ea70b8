package loadgen

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"imlab/loadgen/device"
	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
	"imlab/targets/drivers"
)

// segRunner builds the population of cfg for one segment, without a server.
func segRunner(t *testing.T, cfg Config, seg summary.Segment) *runner {
	t.Helper()
	cfg.Segment = seg
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	drv, err := drivers.Open(cfg.targetConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	r := &runner{cfg: cfg, drv: drv, byUID: map[uint64][]*device.Device{}, fleet: device.NewFleet(device.Env{})}
	if err := r.population(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

// The union of the segments 1..n of a run is the whole run: every tick of
// the schedule (with its intended time), every user and device, every group
// creation, each in exactly one segment, for several n and shapes.
func TestSegmentsPartitionTheRun(t *testing.T) {
	shapes := []string{"const:3000", "burst:base=500,peak=20000,at=1s,len=500ms", "steps:1000@1s,4000@1s", "sine:mean=2000,amp=1500,period=1s"}
	for _, spec := range shapes {
		shape, err := schedule.Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig("http://127.0.0.1:1", "0123456789abcdef0123", t.TempDir())
		cfg.Shape, cfg.Duration = shape, 2*time.Second
		cfg.Pop.Users, cfg.Pop.Groups, cfg.Pop.GroupShare = 97, 13, 0.3
		whole := segRunner(t, cfg, summary.Segment{})
		type tick struct{ at time.Duration }
		all := map[uint64]tick{}
		it := whole.ticks()
		for idx, at, ok := it.Next(); ok; idx, at, ok = it.Next() {
			all[idx] = tick{at}
		}
		if len(all) == 0 {
			t.Fatalf("%s: no ticks", spec)
		}
		for _, n := range []int{1, 2, 3, 7} {
			seen := map[uint64]int{}
			users := map[uint64]int{}
			devs := map[uint32]int{}
			groups := 0
			for i := 1; i <= n; i++ {
				r := segRunner(t, cfg, summary.Segment{Index: i, Count: n})
				mine := map[uint64]bool{}
				for _, u := range r.mine {
					users[u]++
					mine[u] = true
				}
				for _, d := range r.devs {
					devs[d.Idx]++
					if !mine[d.UID] {
						t.Fatalf("%s %d/%d: device %d of uid %d not of this segment", spec, i, n, d.Idx, d.UID)
					}
				}
				for g := range r.groups {
					if r.cfg.Segment.Owns(g) {
						groups++
					}
				}
				it := r.ticks()
				for idx, at, ok := it.Next(); ok; idx, at, ok = it.Next() {
					seen[idx]++
					if w, ok := all[idx]; !ok || w.at != at {
						t.Fatalf("%s %d/%d: tick %d at %s, whole run has %v", spec, i, n, idx, at, w)
					}
					if s, _, _ := r.pick(idx); !mine[s.UID] {
						t.Fatalf("%s %d/%d: tick %d sent by uid %d of another segment", spec, i, n, idx, s.UID)
					}
				}
			}
			if len(seen) != len(all) {
				t.Fatalf("%s n=%d: segments yield %d distinct ticks, the whole run %d", spec, n, len(seen), len(all))
			}
			for idx, c := range seen {
				if c != 1 {
					t.Fatalf("%s n=%d: tick %d in %d segments", spec, n, idx, c)
				}
			}
			if len(users) != len(whole.mine) || len(devs) != len(whole.devs) || groups != len(whole.groups) {
				t.Fatalf("%s n=%d: users %d/%d devices %d/%d groups %d/%d", spec, n, len(users), len(whole.mine), len(devs), len(whole.devs), groups, len(whole.groups))
			}
			for u, c := range users {
				if c != 1 {
					t.Fatalf("%s n=%d: uid %d in %d segments", spec, n, u, c)
				}
			}
			for d, c := range devs {
				if c != 1 {
					t.Fatalf("%s n=%d: device %d in %d segments", spec, n, d, c)
				}
			}
		}
	}
}

func TestParseSegment(t *testing.T) {
	env := func(v string, set bool) func(string) (string, bool) {
		return func(k string) (string, bool) {
			if k != EnvJobIndex {
				return "", false
			}
			return v, set
		}
	}
	for _, c := range []struct {
		spec string
		env  func(string) (string, bool)
		want summary.Segment
		err  bool
	}{
		{"2/4", env("", false), summary.Segment{Index: 2, Count: 4}, false},
		{"1/1", env("", false), summary.Segment{Index: 1, Count: 1}, false},
		{"index/4", env("3", true), summary.Segment{Index: 4, Count: 4}, false},
		{"index/4", env("0", true), summary.Segment{Index: 1, Count: 4}, false},
		{"claim/3", env("", false), summary.Segment{Index: 0, Count: 3}, false},
		{"index/4", env("", false), summary.Segment{}, true},
		{"index/4", env("4", true), summary.Segment{}, true},
		{"index/4", env("x", true), summary.Segment{}, true},
		{"0/4", env("", false), summary.Segment{}, true},
		{"5/4", env("", false), summary.Segment{}, true},
		{"2", env("", false), summary.Segment{}, true},
		{"a/b", env("", false), summary.Segment{}, true},
		{"1/2000", env("", false), summary.Segment{}, true},
	} {
		got, err := ParseSegment(c.spec, c.env)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("ParseSegment(%q) = %v, %v; want %v, error %v", c.spec, got, err, c.want, c.err)
		}
	}
}

// Replicas sharing a directory each claim a different segment; one more
// than there are segments is refused.
func TestClaimSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "claims")
	const n = 5
	var wg sync.WaitGroup
	got := make(chan summary.Segment, n+1)
	errs := make(chan error, n+1)
	for i := 0; i <= n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := ClaimSegment(dir, n, "replica")
			if err != nil {
				errs <- err
				return
			}
			got <- s
		}()
	}
	wg.Wait()
	close(got)
	close(errs)
	taken := map[int]bool{}
	for s := range got {
		if s.Count != n || taken[s.Index] {
			t.Fatalf("claim %v twice or of the wrong count", s)
		}
		taken[s.Index] = true
	}
	if len(taken) != n || len(errs) != 1 {
		t.Fatalf("%d segments claimed, %d refusals; want %d and 1", len(taken), len(errs), n)
	}
	if fs, _ := os.ReadDir(dir); len(fs) != n {
		t.Fatalf("%d claim files, want %d", len(fs), n)
	}
}

func TestFingerprint(t *testing.T) {
	cfg := DefaultConfig("http://127.0.0.1:1", "0123456789abcdef0123", "x")
	a := cfg.Fingerprint()
	cfg.Segment = summary.Segment{Index: 2, Count: 3}
	cfg.Target = "http://127.0.0.2:1"
	if cfg.Fingerprint() != a {
		t.Fatal("the segment or the target changed the run's fingerprint")
	}
	cfg.Seed++
	if cfg.Fingerprint() == a {
		t.Fatal("another seed kept the fingerprint")
	}
}
