package fanout

import (
	"strings"
	"testing"
)

// TestUnsafeWarningSaysWhatItNames: the warning is printed and logged
// wherever the queue policy runs, where its reader may not have the design
// documents: it says in words which one "seed 003" is.
func TestUnsafeWarningSaysWhatItNames(t *testing.T) {
	if !strings.Contains(UnsafeWarning, "option A of the message-queue design document, seed 003") {
		t.Fatalf("UnsafeWarning %q names seed 003 without saying what it is", UnsafeWarning)
	}
}
