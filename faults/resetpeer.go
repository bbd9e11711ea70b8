package faults

// ResetPeer resets the connections through a backend's proxy (after
// timeout).
type ResetPeer struct{ toxicKind }

// Name is "reset_peer".
func (ResetPeer) Name() string { return "reset_peer" }

// Params: the wait before the reset, and the toxic's own.
func (ResetPeer) Params() []string { return []string{"timeout", "toxicity", "stream"} }

// CheckValues: the wait in 0..MaxLatency.
func (ResetPeer) CheckValues(field string, x Spec, _ Context) error {
	if d := x.Timeout.D(); d < 0 || d > MaxLatency {
		return invalid(field+".timeout", "%s: want 0..%s", d, MaxLatency)
	}
	return nil
}
