package faults

// Timeout holds the data through a backend's proxy (for timeout, then
// closes; 0: until healed).
type Timeout struct{ toxicKind }

// Name is "timeout".
func (Timeout) Name() string { return "timeout" }

// Params are the parameters timeout takes.
func (Timeout) Params() []string { return []string{"timeout", "toxicity", "stream"} }

// CheckValues: timeout in 0..MaxLatency (0: hold until healed).
func (Timeout) CheckValues(field string, x Spec, _ Context) error {
	if x.Timeout < 0 || x.Timeout.D() > MaxLatency {
		return invalid(field+".timeout", "%s: want 0..%s (0: hold until healed)", x.Timeout.D(), MaxLatency)
	}
	return nil
}
