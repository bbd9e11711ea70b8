package faults

import "imlab/chaos"

// Timeout holds the data through a backend's proxy (for timeout, then closes; 0: until healed).
type Timeout struct{}

// Name is "timeout".
func (Timeout) Name() string { return "timeout" }

// Params are the parameters timeout takes.
func (Timeout) Params() []string { return []string{"timeout", "toxicity", "stream"} }

// Unit is what the count of a timeout counts.
func (Timeout) Unit() string { return "" }

// CheckTarget: a backend's proxy.
func (Timeout) CheckTarget(field string, x Spec, c Context) error { return proxyTarget(field, x, c) }

// CheckValues: timeout in 0..MaxLatency.
func (Timeout) CheckValues(field string, x Spec, _ Context) error {
	if x.Timeout < 0 || x.Timeout.D() > MaxLatency {
		return invalid(field+".timeout", "%s: want 0..%s (0: hold until healed)", x.Timeout.D(), MaxLatency)
	}
	return nil
}

// Build is the timeout toxic.
func (Timeout) Build(x Spec, env Env) (chaos.Fault, error) { return toxic(x, env), nil }
