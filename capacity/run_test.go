package capacity

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestRunWatch: bad --pid values are refused before anything runs; a
// target without the lab route is said on warn, never asked; a search
// that cannot start returns no result.
func TestRunWatch(t *testing.T) {
	c := DefaultConfig("tinode+ws://127.0.0.1:1", "run-test-secret-0123456789abcdef", t.TempDir())
	var out, warn bytes.Buffer
	if _, err := Run(context.Background(), c, Watch{PIDs: "ref=x"}, &out, &warn); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad pid: %v", err)
	}
	c.From = 0 // the search refuses to start
	res, err := Run(context.Background(), c, Watch{}, &out, &warn)
	if err == nil || res != nil {
		t.Fatalf("a search that cannot start: %v %v", res, err)
	}
	if !strings.Contains(warn.String(), "does not name them (no lab route)") {
		t.Fatalf("warn: %q", warn.String())
	}
}
