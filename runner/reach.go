package runner

import (
	"context"
	"fmt"
	"sync"

	"imlab/chaos"
	"imlab/scenario"
)

// reach wraps one scheduled fault and records whether it reached its
// target: injected at all, without error, and (for the data faults that
// count what they change, chaos.Impact) affecting something. A fault that
// did not reach its target proves nothing about the server, so it fails
// the scenario unless its file entry says may_miss.
type reach struct {
	f    chaos.Fault
	spec scenario.FaultSpec
	idx  int

	mu       sync.Mutex
	injected int
	errs     []string
	affected int64
}

func newReach(idx int, spec scenario.FaultSpec, f chaos.Fault) *reach {
	return &reach{f: f, spec: spec, idx: idx}
}

func (r *reach) Name() string { return r.f.Name() }

func (r *reach) Inject(ctx context.Context) error {
	err := r.f.Inject(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.injected++
	if err != nil {
		r.errs = append(r.errs, err.Error())
	}
	if im, ok := r.f.(chaos.Impact); ok {
		r.affected += im.Affected()
	}
	return err
}

func (r *reach) Heal(ctx context.Context) error { return r.f.Heal(ctx) }

// Affected passes the inner fault's count through (0 for a fault that
// does not count), so that the schedule's events keep it.
func (r *reach) Affected() int64 {
	if im, ok := r.f.(chaos.Impact); ok {
		return im.Affected()
	}
	return 0
}

// Validate passes the inner fault's check through.
func (r *reach) Validate() error {
	if v, ok := r.f.(chaos.Validator); ok {
		return v.Validate()
	}
	return nil
}

// miss says how the fault failed to reach its target ("" when it did, or
// when the file allows it with may_miss).
func (r *reach) miss() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spec.MayMiss {
		return ""
	}
	label := fmt.Sprintf("faults[%d] %s at %s", r.idx, r.spec.Label(), r.spec.At.D())
	_, counts := r.f.(chaos.Impact)
	switch {
	case r.injected == 0:
		return label + ": never injected"
	case len(r.errs) > 0:
		return label + ": inject failed: " + r.errs[0]
	case counts && r.affected == 0:
		return label + ": affected nothing (0 keys, counters or records)"
	}
	return ""
}

// faultMisses lists the misses of every tracked fault, in file order.
func faultMisses(rs []*reach) []string {
	var out []string
	for _, r := range rs {
		if m := r.miss(); m != "" {
			out = append(out, m)
		}
	}
	return out
}
