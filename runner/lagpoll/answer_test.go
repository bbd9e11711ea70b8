package lagpoll

import (
	"strings"
	"testing"
	"time"
)

// TestLagAnswerUnknown: the runner reads the monitor's errors, unknown
// partitions and the age of its snapshot.
func TestLagAnswerUnknown(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		a    answer
		want string
	}{
		{answer{At: now}, ""},
		{answer{}, "not measured yet"},
		{answer{At: now.Add(-time.Minute)}, "old"},
		{answer{At: now, UnknownAge: map[string]int{"imlab-inbox": 2}}, "imlab-inbox: age of 2 partitions unknown"},
		{answer{At: now, Errors: []string{"fanout: list end offsets: timeout"}}, "list end offsets"},
	} {
		got := c.a.unknownReason(now)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%+v: %q, want %q", c.a, got, c.want)
		}
	}
}
