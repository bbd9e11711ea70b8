package faults

import "imlab/chaos"

// Latency delays the data through a backend's proxy by latency (± jitter).
type Latency struct{}

// Name is "latency".
func (Latency) Name() string { return "latency" }

// Params are the parameters latency takes.
func (Latency) Params() []string { return []string{"latency", "jitter", "toxicity", "stream"} }

// Unit is what the count of a latency counts.
func (Latency) Unit() string { return "" }

// CheckTarget: a backend's proxy.
func (Latency) CheckTarget(field string, x Spec, c Context) error { return proxyTarget(field, x, c) }

// CheckValues: latency in (0, MaxLatency], jitter in 0..latency.
func (Latency) CheckValues(field string, x Spec, _ Context) error {
	if x.Latency <= 0 || x.Latency.D() > MaxLatency || x.Jitter < 0 || x.Jitter > x.Latency {
		return invalid(field+".latency", "%s (jitter %s): want latency in (0, %s], jitter in 0..latency", x.Latency.D(), x.Jitter.D(), MaxLatency)
	}
	return nil
}

// Build is the latency toxic.
func (Latency) Build(x Spec, env Env) (chaos.Fault, error) { return toxic(x, env), nil }
