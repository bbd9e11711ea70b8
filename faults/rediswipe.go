package faults

import "imlab/chaos"

// RedisWipe deletes every Redis key under the run's prefix.
type RedisWipe struct{}

// Name is "redis_wipe".
func (RedisWipe) Name() string { return "redis_wipe" }

// Params are the parameters redis_wipe takes.
func (RedisWipe) Params() []string { return nil }

// Unit is what the count of a redis_wipe counts.
func (RedisWipe) Unit() string { return "keys deleted" }

// CheckTarget: none.
func (RedisWipe) CheckTarget(field string, x Spec, _ Context) error { return noTarget(field, x) }

// CheckValues: nothing more.
func (RedisWipe) CheckValues(field string, x Spec, c Context) error { return noValues(field, x, c) }

// Build is the wipe of the run's prefix.
func (RedisWipe) Build(_ Spec, env Env) (chaos.Fault, error) {
	return chaos.RedisWipe(env.Redis(), chaos.RedisWipeConfig{Prefix: env.RedisPrefix}), nil
}
