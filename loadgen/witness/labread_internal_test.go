package witness

import (
	"context"
	"errors"
	"testing"

	"imlab/targets"
)

// A lab read answered 501 (the route exists, nothing is behind it: the
// reference server without a history store) is asked once and is
// errNotImplemented; a 503 is asked again; a 404 is errNoLab.
func TestLabReadStatuses(t *testing.T) {
	for _, c := range []struct {
		status int
		calls  int
		is     error
	}{
		{501, 1, errNotImplemented},
		{503, 3, nil},
		{404, 1, errNoLab},
	} {
		calls := 0
		_, err := labRead(context.Background(), 3, func() (int, error) {
			calls++
			return 0, &targets.Error{Class: targets.ClassOfStatus(c.status), Status: c.status, Message: "x"}
		})
		if err == nil || calls != c.calls {
			t.Errorf("status %d: %d calls (want %d), err %v", c.status, calls, c.calls, err)
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("status %d: err %v is not %v", c.status, err, c.is)
		}
	}
}
