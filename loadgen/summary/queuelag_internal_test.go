package summary

import (
	"strings"
	"testing"
)

// The end-of-run lag line: a drained group, one still behind, one whose
// age the server could not measure (unknown, never 0), and a server
// without the route.
func TestQueueLagEndString(t *testing.T) {
	age := 261.0
	q := &QueueLagEnd{Groups: []GroupLag{
		{Group: "imlab-inbox", Drained: true},
		{Group: "imlab-history", Records: 26882, OldestAgeS: &age},
		{Group: "other", Records: 3},
	}}
	s := q.String()
	for _, want := range []string{"imlab-inbox drained", "imlab-history NOT DRAINED: 26882 records behind, oldest 261.0s", "other NOT DRAINED: 3 records behind, age unknown"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
	if s := (&QueueLagEnd{Unknown: "the target serves no /v1/lab/lag"}).String(); !strings.HasPrefix(s, "unknown (") {
		t.Errorf("unreadable lag printed as %q", s)
	}
	if s := (&QueueLagEnd{NoQueue: true}).String(); s != "none: the target has no queue" {
		t.Errorf("a target without a queue: %q, want none, not unknown", s)
	}
	if s := (*QueueLagEnd)(nil).String(); s != "not read" {
		t.Errorf("nil: %q", s)
	}
}
