package scenario

import (
	"fmt"
	"time"
)

// Scaled returns f with the load duration replaced by d and every fault's
// at and for scaled by the same ratio (f itself is not changed).
// A capacity file is returned as it is: its search sets the steps'
// lengths.
func Scaled(f *File, d time.Duration) (*File, error) {
	if d <= 0 || d == f.Load.Config.Duration || f.Kind == KindCapacity {
		return f, nil
	}
	g := *f
	ratio := float64(d) / float64(f.Load.Config.Duration)
	g.Load.Config.Duration = d
	g.Faults = make([]FaultSpec, len(f.Faults))
	for i, x := range f.Faults {
		x.At = Duration(float64(x.At) * ratio)
		x.For = Duration(float64(x.For) * ratio)
		g.Faults[i] = x
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("scaled to %s: %w", d, err)
	}
	return &g, nil
}
