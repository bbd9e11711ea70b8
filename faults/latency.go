package faults

// Latency delays the data through a backend's proxy by latency (±
// jitter).
type Latency struct{ toxicKind }

// Name is "latency".
func (Latency) Name() string { return "latency" }

// Params: the delay and its jitter, and the toxic's own.
func (Latency) Params() []string { return []string{"latency", "jitter", "toxicity", "stream"} }

// CheckValues: latency in (0, MaxLatency], jitter in 0..latency.
func (Latency) CheckValues(field string, x Spec, _ Context) error {
	if x.Latency <= 0 || x.Latency.D() > MaxLatency || x.Jitter < 0 || x.Jitter > x.Latency {
		return invalid(field+".latency", "%s (jitter %s): want latency in (0, %s], jitter in 0..latency", x.Latency.D(), x.Jitter.D(), MaxLatency)
	}
	return nil
}
