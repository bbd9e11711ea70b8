package faults

import "imlab/chaos"

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
