package scenario

import "time"

// MaxLoadSegments bounds load.segments: generator processes on one machine.
const MaxLoadSegments = 64

// Defaults of the generator's burst expectations.
const (
	// DefaultMinOfferedRatio: started over intended sends around the burst.
	DefaultMinOfferedRatio = 0.95
	// DefaultMaxStartDelay bounds the p99 of (start - intended time) of
	// the sends of the burst's seconds.
	DefaultMaxStartDelay = 100 * time.Millisecond
)

// Defaults of the recovery expectations.
const (
	// DefaultRecoveryBound is the lag age under which a group counts as
	// caught up.
	DefaultRecoveryBound = time.Second
	// DefaultRecoveryHold is how long it must stay there.
	DefaultRecoveryHold = 2 * time.Second
)
