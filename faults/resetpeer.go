package faults

import "imlab/chaos"

// ResetPeer resets the connections through a backend's proxy (after timeout).
type ResetPeer struct{}

// Name is "reset_peer".
func (ResetPeer) Name() string { return "reset_peer" }

// Params are the parameters reset_peer takes.
func (ResetPeer) Params() []string { return []string{"timeout", "toxicity", "stream"} }

// Unit is what the count of a reset_peer counts.
func (ResetPeer) Unit() string { return "" }

// CheckTarget: a backend's proxy.
func (ResetPeer) CheckTarget(field string, x Spec, c Context) error { return proxyTarget(field, x, c) }

// CheckValues: timeout in 0..MaxLatency.
func (ResetPeer) CheckValues(field string, x Spec, _ Context) error {
	if x.Timeout < 0 || x.Timeout.D() > MaxLatency {
		return invalid(field+".timeout", "%s: want 0..%s", x.Timeout.D(), MaxLatency)
	}
	return nil
}

// Build is the reset_peer toxic.
func (ResetPeer) Build(x Spec, env Env) (chaos.Fault, error) { return toxic(x, env), nil }
