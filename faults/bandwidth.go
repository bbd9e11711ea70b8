package faults

import "imlab/chaos"

// Bandwidth limits the data through a backend's proxy to rate_kbps.
type Bandwidth struct{}

// Name is "bandwidth".
func (Bandwidth) Name() string { return "bandwidth" }

// Params are the parameters bandwidth takes.
func (Bandwidth) Params() []string { return []string{"rate_kbps", "toxicity", "stream"} }

// Unit is what the count of a bandwidth counts.
func (Bandwidth) Unit() string { return "" }

// CheckTarget: a backend's proxy.
func (Bandwidth) CheckTarget(field string, x Spec, c Context) error { return proxyTarget(field, x, c) }

// CheckValues: rate_kbps in 1..2^30.
func (Bandwidth) CheckValues(field string, x Spec, _ Context) error {
	if x.RateKBps < 1 || x.RateKBps > 1<<30 {
		return invalid(field+".rate_kbps", "%d: want 1..%d", x.RateKBps, 1<<30)
	}
	return nil
}

// Build is the bandwidth toxic.
func (Bandwidth) Build(x Spec, env Env) (chaos.Fault, error) { return toxic(x, env), nil }
