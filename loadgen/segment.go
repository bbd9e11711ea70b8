package loadgen

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
)

// EnvJobIndex is the variable a Kubernetes Indexed Job sets to the pod's
// completion index (0-based); "--segment index/N" reads it.
const EnvJobIndex = "JOB_COMPLETION_INDEX"

// ParseSegment reads "i/n" (1-based), "index/n" (the index is read from
// $JOB_COMPLETION_INDEX, 0-based, as a Kubernetes Indexed Job sets it) or
// "claim/n" (the caller claims a free segment with ClaimSegment; the
// returned Segment has Index 0). getenv is os.LookupEnv in production.
func ParseSegment(spec string, getenv func(string) (string, bool)) (summary.Segment, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(spec), "/")
	n, err := strconv.Atoi(b)
	if !ok || err != nil {
		return summary.Segment{}, fmt.Errorf("%w: segment %q: want i/n, index/n or claim/n", ErrInvalid, spec)
	}
	var i int
	switch a {
	case "claim":
		if n < 1 || n > summary.MaxSegments {
			return summary.Segment{}, fmt.Errorf("%w: segment %q: n must be in 1..%d", ErrInvalid, spec, summary.MaxSegments)
		}
		return summary.Segment{Index: 0, Count: n}, nil
	case "index":
		v, set := getenv(EnvJobIndex)
		if !set {
			return summary.Segment{}, fmt.Errorf("%w: segment %q: $%s is not set (it is set in the pods of a Kubernetes Indexed Job)", ErrInvalid, spec, EnvJobIndex)
		}
		k, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return summary.Segment{}, fmt.Errorf("%w: segment %q: $%s=%q is not a number", ErrInvalid, spec, EnvJobIndex, v)
		}
		i = k + 1
	default:
		if i, err = strconv.Atoi(a); err != nil {
			return summary.Segment{}, fmt.Errorf("%w: segment %q: want i/n, index/n or claim/n", ErrInvalid, spec)
		}
	}
	s := summary.Segment{Index: i, Count: n}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return s, nil
}

// ClaimSegment takes the lowest segment of count not yet claimed in dir by
// creating dir/segment-I-of-N.claim exclusively, so replicas of one service
// sharing a volume (docker compose up --scale loadgen=N) each take a
// different segment with no coordinator. It fails when every segment is
// taken. The claims are the run's record of who took what; remove them
// before reusing dir for another run.
func ClaimSegment(dir string, count int, owner string) (summary.Segment, error) {
	if count < 1 || count > summary.MaxSegments {
		return summary.Segment{}, fmt.Errorf("%w: claim of %d segments: want 1..%d", ErrInvalid, count, summary.MaxSegments)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return summary.Segment{}, fmt.Errorf("loadgen: claim: %w", err)
	}
	for i := 1; i <= count; i++ {
		p := filepath.Join(dir, fmt.Sprintf("segment-%d-of-%d.claim", i, count))
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return summary.Segment{}, fmt.Errorf("loadgen: claim: %w", err)
		}
		_, werr := f.WriteString(owner + "\n")
		if err := errors.Join(werr, f.Close()); err != nil {
			return summary.Segment{}, fmt.Errorf("loadgen: claim: %w", err)
		}
		return summary.Segment{Index: i, Count: count}, nil
	}
	return summary.Segment{}, fmt.Errorf("%w: all %d segments are already claimed in %s", ErrInvalid, count, dir)
}

// Fingerprint names the whole run a segment belongs to: the seed, the rate
// shape, the duration and the population, everything that decides who
// sends what when. Segments of one run share it; `imlab check DIR...`
// refuses to merge directories whose fingerprints differ.
func (c Config) Fingerprint() string {
	p := c.Pop
	var b strings.Builder
	fmt.Fprintf(&b, "seed=%d shape=%s dur=%s users=%d devices=%d uid=%d group=%d online=%g crashy=%g groups=%d share=%g sizes=%v via=%s content=%d",
		c.Seed, c.Shape, c.Duration, p.Users, p.DevicesPerUser, p.UIDBase, p.GroupBase, p.Online, p.Crashy, p.Groups, p.GroupShare, p.GroupSizes, c.SendVia, c.ContentSize)
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// segmentRunID is the run id shared by every segment of one run (client_msg_id
// and content carry it, so a device of one segment recognises a message sent
// by another): RunID when given, else derived from the fingerprint.
func (c Config) segmentRunID() string {
	if c.RunID != "" {
		return c.RunID
	}
	return c.Fingerprint()[:12]
}

// keepSegment narrows the runner's devices to its segment's users and lists
// those users in mine; the whole population stays in users, byUID and
// groups, which pick needs to choose senders and recipients as a whole run
// would.
func (r *runner) keepSegment() {
	seg := r.cfg.Segment
	r.mine = r.mine[:0]
	own := map[uint64]bool{}
	for i, uid := range r.users {
		if seg.Owns(i) {
			r.mine = append(r.mine, uid)
			own[uid] = true
		}
	}
	if seg.Whole() {
		return
	}
	devs := r.devs[:0:0]
	for _, d := range r.devs {
		if own[d.UID] {
			devs = append(devs, d)
		}
	}
	r.devs = devs
}

// ticks is the run's schedule: the whole shape, or only the ticks whose
// sender belongs to this segment.
func (r *runner) ticks() *schedule.Iter {
	it := schedule.NewIter(r.cfg.Shape, r.cfg.Duration)
	if r.cfg.Segment.Whole() {
		return it
	}
	first := r.cfg.Pop.UIDBase
	seg := r.cfg.Segment
	return it.Only(func(idx uint64) bool {
		sender, _, _ := r.pick(idx)
		return seg.Owns(int(sender.UID - first))
	})
}

// clockSamples is how many round trips the clock estimate takes.
const clockSamples = 7

func (r *runner) estimateClock(ctx context.Context, sum *summary.Summary) {
	if r.lab == nil {
		sum.Split.ClockError = "the " + r.drv.Name() + " driver reads no clock of the target"
		return
	}
	c, err := r.lab.EstimateClock(ctx, clockSamples)
	if err != nil {
		sum.Split.ClockError = err.Error()
		return
	}
	sum.Split.Clock = &c
}

func (r *runner) segmentSummary(sum *summary.Summary) {
	host, _ := os.Hostname()
	seg := r.cfg.Segment
	if seg.Whole() {
		seg = summary.Segment{Index: 1, Count: 1}
	}
	sum.Split = summary.SegmentSummary{Segment: seg, Fingerprint: r.cfg.Fingerprint(), Seed: r.cfg.Seed, Host: host, Users: len(r.mine)}
}
