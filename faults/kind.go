package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"

	"imlab/chaos"
)

// Kind is one fault kind. Validate calls its checks in a fixed order:
// CheckTarget, then the parameters against Params, then CheckValues.
type Kind interface {
	// Name is the kind as a file writes it.
	Name() string
	// Params are the optional parameters the kind takes (YAML keys:
	// latency, jitter, timeout, rate_kbps, by, toxicity, stream).
	Params() []string
	// CheckTarget checks the entry's target against the file.
	CheckTarget(field string, x Spec, c Context) error
	// CheckValues checks the values of the parameters and the duration.
	CheckValues(field string, x Spec, c Context) error
	// Build makes the fault the schedule injects and heals.
	Build(x Spec, env Env) (chaos.Fault, error)
	// Unit says what the fault's count of affected things counts ("": it
	// counts nothing).
	Unit() string
}

// Kinds lists every fault kind, in the order the file format documents
// them.
func Kinds() []Kind {
	return []Kind{Latency{}, Timeout{}, ResetPeer{}, Bandwidth{}, Down{}, RedisWipe{}, AllocatorRollback{},
		KafkaRecordLoss{}, KafkaTopicRecreate{}, Stop{}, Kill{}}
}

// Lookup is the kind named name.
func Lookup(name string) (Kind, bool) {
	for _, k := range Kinds() {
		if k.Name() == name {
			return k, true
		}
	}
	return nil, false
}

// Unit says what a fault of kind name counts when it reports how many
// things it affected ("affected" for a kind that does not say, or an
// unknown one).
func Unit(name string) string {
	if k, ok := Lookup(name); ok && k.Unit() != "" {
		return k.Unit()
	}
	return "affected"
}

// Context is what a fault entry is checked against: the file around it.
type Context struct {
	// LoadDuration is the load's length: a fault starts and is healed
	// within it.
	LoadDuration time.Duration
	// History: the server keeps a MongoDB history (the mongo target
	// exists).
	History bool
	// UsesKafka: the policy (or the history) uses Kafka.
	UsesKafka bool
	// SegmentAllocator: the seq allocator is not Redis's counters.
	SegmentAllocator bool
	// Process finds a process of the file by name: its index in
	// server.processes and whether it runs as a separate OS process.
	Process func(name string) (index int, exec bool, ok bool)
}

// Env is what a fault is built against, handed over by the runner.
type Env struct {
	// Proxies are the backends' proxies (the proxy kinds).
	Proxies *chaos.Proxies
	// Redis is the run's Redis client and RedisPrefix its key prefix
	// (redis_wipe, allocator_rollback).
	Redis       func() *redis.Client
	RedisPrefix string
	// Kafka is an admin client of the run's Kafka and Topic the run's
	// topic (the Kafka kinds).
	Kafka func() (*kadm.Client, error)
	Topic string
	// Process finds a server process of the run by name (stop, kill).
	Process func(name string) (Process, bool)
}

// Process is what the process kinds do to a server process.
type Process struct {
	// Stop stops it gracefully, Kill sends SIGKILL, Restart starts a new
	// incarnation.
	Stop, Kill, Restart func(context.Context) error
}

// Invalid is a fault entry that does not check: Field names the key.
type Invalid struct {
	Field string
	Msg   string
}

func (e *Invalid) Error() string { return e.Field + ": " + e.Msg }

func invalid(field, format string, a ...any) error {
	return &Invalid{Field: field, Msg: fmt.Sprintf(format, a...)}
}

// Validate checks the entry x, written at field, against c: its time
// within the load, its kind, then the kind's own checks. The error is an
// *Invalid.
func Validate(field string, x Spec, c Context) error {
	if x.At < 0 || x.At.D() > c.LoadDuration {
		return invalid(field+".at", "%s: want 0..load.duration (%s)", x.At.D(), c.LoadDuration)
	}
	if x.For < 0 || x.At.D()+x.For.D() > c.LoadDuration {
		return invalid(field+".for", "%s: want 0..%s: a fault must be healed by the end of the load (at + for <= load.duration), so that the settle and the final drain run healed", x.For.D(), c.LoadDuration-x.At.D())
	}
	k, ok := Lookup(x.Kind)
	if !ok {
		var names []string
		for _, k := range Kinds() {
			names = append(names, k.Name())
		}
		return invalid(field+".kind", "%q: want %s or %s", x.Kind, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
	}
	if err := k.CheckTarget(field, x, c); err != nil {
		return err
	}
	for _, p := range setParams(x) {
		if !slices.Contains(k.Params(), p) {
			return invalid(field+"."+p, "not a parameter of kind %s", x.Kind)
		}
	}
	return k.CheckValues(field, x, c)
}

// Build makes the fault of entry x (checked by Validate) against env.
func Build(x Spec, env Env) (chaos.Fault, error) {
	k, ok := Lookup(x.Kind)
	if !ok {
		return nil, fmt.Errorf("faults: unknown kind %q", x.Kind)
	}
	return k.Build(x, env)
}

// noTarget is the target check of the kinds that take none.
func noTarget(field string, x Spec) error {
	if x.Target != "" {
		return invalid(field+".target", "%s takes no target", x.Kind)
	}
	return nil
}

// noValues is the value check of the kinds with nothing more to check.
func noValues(string, Spec, Context) error { return nil }
