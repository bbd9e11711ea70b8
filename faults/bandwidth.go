package faults

// Bandwidth limits the data through a backend's proxy to rate_kbps.
type Bandwidth struct{ toxicKind }

// Name is "bandwidth".
func (Bandwidth) Name() string { return "bandwidth" }

// Params: the rate, and the toxic's own.
func (Bandwidth) Params() []string { return []string{"rate_kbps", "toxicity", "stream"} }

// CheckValues: rate_kbps in 1..2^30.
func (Bandwidth) CheckValues(field string, x Spec, _ Context) error {
	if r := x.RateKBps; r < 1 || r > 1<<30 {
		return invalid(field+".rate_kbps", "%d: want 1..%d", r, 1<<30)
	}
	return nil
}
