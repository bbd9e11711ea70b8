package result

import (
	"fmt"
)

// BurstFigures say whether the generator really offered the burst: the
// sends it was meant to start (the shape's integral) against those it
// started, over the burst's seconds padded by one second on each side
// (the generator's per-second buckets are not aligned to the burst to the
// millisecond; the padding costs only base-rate sends, and a start that
// slipped by more than that second is missing from the count), and the
// start delay's p99 in the burst's own seconds (max over those seconds).
type BurstFigures struct {
	// From and To bound the burst, seconds since the run's time base.
	From float64 `json:"from_s"`
	To   float64 `json:"to_s"`
	// PeakPerSec is the shape's burst rate; IntendedPerSec and
	// StartedPerSec are over the burst's own seconds.
	PeakPerSec     float64 `json:"peak_per_s"`
	IntendedPerSec float64 `json:"intended_per_s"`
	StartedPerSec  float64 `json:"started_per_s"`
	// Intended and Started count the padded window; Ratio is
	// Started / Intended.
	Intended float64 `json:"intended"`
	Started  uint64  `json:"started"`
	Ratio    float64 `json:"ratio"`
	// Late: sends of the burst's seconds that started more than the
	// pacer's LateAfter after their intended time; StartDelayP99 (ms) the
	// largest per-second p99 of start - intended.
	Late uint64 `json:"late"`
	// StartDelayP99ms is nil when a second of the burst that started sends
	// has no start delay measured (the generator's per-second histogram
	// was empty): unknown, never 0.
	StartDelayP99ms *float64 `json:"start_delay_p99_ms"`
	// OK, Fail and Unknown: outcomes of the sends answered in the burst's
	// seconds; AckP99ms their largest per-second ACK p99 from the intended
	// time.
	OK       uint64  `json:"ok"`
	Fail     uint64  `json:"fail"`
	Unknown  uint64  `json:"unknown"`
	AckP99ms float64 `json:"ack_p99_ms"`
}

// startDelay formats the start delay p99 ("unknown" when not measured).
func (bf *BurstFigures) StartDelay() string {
	if bf.StartDelayP99ms == nil {
		return "unknown (a second of the burst has no start delay measured)"
	}
	return fmt.Sprintf("%.1f ms", *bf.StartDelayP99ms)
}
