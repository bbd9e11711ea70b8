package faults

import (
	"slices"

	"imlab/chaos"
)

// Proxy targets of the proxy fault kinds.
const (
	TargetMySQL = "mysql"
	TargetRedis = "redis"
	TargetKafka = "kafka"
	TargetMongo = "mongo"
)

// proxyTarget is the target check of the proxy kinds: a backend the file
// uses, a stream, a toxicity and a positive duration.
func proxyTarget(field string, x Spec, c Context) error {
	switch x.Target {
	case TargetMySQL, TargetRedis, TargetKafka:
	case TargetMongo:
		if !c.History {
			return invalid(field+".target", "mongo is only used with server.history: true")
		}
	default:
		return invalid(field+".target", "%q: want mysql, redis, kafka or mongo", x.Target)
	}
	if x.Target == TargetKafka && !c.UsesKafka {
		return invalid(field+".target", "kafka is not used by the strict policy without history")
	}
	switch x.Stream {
	case "", "downstream", "upstream":
	default:
		return invalid(field+".stream", "%q: want downstream, upstream or empty (both)", x.Stream)
	}
	if x.Toxicity != nil && (*x.Toxicity <= 0 || *x.Toxicity > 1) {
		return invalid(field+".toxicity", "%g: want (0, 1]", *x.Toxicity)
	}
	if x.For <= 0 {
		return invalid(field+".for", "a %s fault needs a positive duration", x.Kind)
	}
	return nil
}

// toxic is the toxic of a proxy kind on its target's proxy.
func toxic(x Spec, env Env) chaos.Fault {
	t := chaos.Toxic{Kind: x.Kind, Stream: x.Stream, Latency: x.Latency.D(), Jitter: x.Jitter.D(), Timeout: x.Timeout.D(), RateKBps: x.RateKBps}
	if x.Toxicity != nil {
		t.Toxicity = *x.Toxicity
	}
	return chaos.ProxyToxic(env.Proxies, x.Target, t)
}

// proxyKind is a kind whose fault acts on its target's proxy (the toxic
// kinds and down).
type proxyKind interface{ actsOnProxy() }

func (toxicKind) actsOnProxy() {}

func (Down) actsOnProxy() {}

// ProxiedTargets are the backends (TargetMySQL, TargetRedis, TargetKafka,
// TargetMongo) that some fault of the schedule acts on through its proxy,
// sorted, each once: the backends a run must put a proxy in front of. The
// other kinds act on the backend itself (redis_wipe, allocator_rollback,
// the Kafka kinds) or on a server process (stop, kill). An entry of an
// unknown kind names nothing (Validate refuses it).
func ProxiedTargets(schedule []Spec) []string {
	var out []string
	for _, x := range schedule {
		k, ok := Lookup(x.Kind)
		if !ok {
			continue
		}
		if _, proxied := k.(proxyKind); proxied && !slices.Contains(out, x.Target) {
			out = append(out, x.Target)
		}
	}
	slices.Sort(out)
	return out
}

// toxicKind is what the toxic kinds share: their target is a backend's
// proxy, the fault a toxic on it, and they count nothing. Each toxic kind
// embeds it and says its name, parameters and value checks.
type toxicKind struct{}

// CheckTarget: a backend's proxy.
func (toxicKind) CheckTarget(field string, x Spec, c Context) error { return proxyTarget(field, x, c) }

// Build is the kind's toxic on the target's proxy.
func (toxicKind) Build(x Spec, env Env) (chaos.Fault, error) { return toxic(x, env), nil }

// Unit: a toxic counts nothing.
func (toxicKind) Unit() string { return "" }
