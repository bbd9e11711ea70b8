package faults

import "imlab/chaos"

// AllocatorRollback sets every Redis seq counter back by by (0 or less: deletes them).
type AllocatorRollback struct{}

// Name is "allocator_rollback".
func (AllocatorRollback) Name() string { return "allocator_rollback" }

// Params are the parameters allocator_rollback takes.
func (AllocatorRollback) Params() []string { return []string{"by"} }

// Unit is what the count of a allocator_rollback counts.
func (AllocatorRollback) Unit() string { return "seq counters set back" }

// CheckTarget: none.
func (AllocatorRollback) CheckTarget(field string, x Spec, _ Context) error {
	return noTarget(field, x)
}

// CheckValues: by at most MaxRollback, and the Redis allocator.
func (AllocatorRollback) CheckValues(field string, x Spec, c Context) error {
	if x.By > MaxRollback {
		return invalid(field+".by", "%d: at most %d", x.By, MaxRollback)
	}
	if c.SegmentAllocator {
		return invalid(field+".kind", "allocator_rollback sets Redis counters back: it needs server.allocator redis")
	}
	return nil
}

// Build is the rollback under the run's prefix.
func (AllocatorRollback) Build(x Spec, env Env) (chaos.Fault, error) {
	return chaos.AllocatorRollback(env.Redis(), chaos.RollbackConfig{Prefix: env.RedisPrefix, By: x.By}), nil
}
