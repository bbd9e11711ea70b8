// Package chaos owns the lab's fault injection: an in-process toxiproxy
// server with one TCP proxy per backend (latency, timeout, reset_peer,
// bandwidth, slow_close, limit_data toxics, and proxies taken down), the
// direct data faults (Redis wipe, allocator rollback, Kafka record loss and
// topic re-creation), caller-supplied faults (Func), and the schedule that
// injects faults at offsets and heals them.
//
// It must not know scenarios, loadgen, or the reference server's internals
// beyond the Redis key layout of ref/rkeys, and it must never target a
// non-loopback address: every proxy upstream, Redis client and Kafka broker
// it acts on is checked to be on this machine before anything is changed.
package chaos

import "errors"

// Errors returned by this package; every error it returns for bad input
// wraps ErrInvalid, and the other sentinels say why an action was refused.
var (
	// ErrInvalid: a bad argument (name, toxic, config, schedule). Nothing
	// was changed.
	ErrInvalid = errors.New("chaos: invalid argument")
	// ErrUnknownProxy: no proxy has that name. Nothing was changed.
	ErrUnknownProxy = errors.New("chaos: unknown proxy")
	// ErrNotLoopback: the target is not on this machine. Nothing was changed.
	ErrNotLoopback = errors.New("chaos: target is not a loopback address")
	// ErrClosed: the proxies were closed.
	ErrClosed = errors.New("chaos: proxies closed")
)
