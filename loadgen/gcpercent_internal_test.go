package loadgen

import (
	"runtime/debug"
	"testing"
)

// The summary reads the collector's setting as imlab load set it.
func TestGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, p := range []int{400, -1, 100} {
		debug.SetGCPercent(p)
		if got := gcPercent(); got != p {
			t.Fatalf("GOGC %d read as %d", p, got)
		}
	}
}
