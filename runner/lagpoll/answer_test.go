package lagpoll

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"imlab/result"
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

// TestOutboxUnknownNeverZero: an answer whose outbox query failed (age -1,
// the error named) leaves the sample's outbox unknown, printed so, and a
// measured one is copied; the dead letters are unknown only when another
// error came with the answer.
func TestOutboxUnknownNeverZero(t *testing.T) {
	var s result.LagSample
	a := answer{At: time.Now(), OutboxOldestAgeSeconds: -1, DLQRecords: 3, Errors: []string{"fanout: outbox backlog: invalid connection"}}
	a.outboxInto(&s)
	if s.OutboxBacklog != nil || s.OutboxOldestAge != nil || s.DLQRecords == nil || *s.DLQRecords != 3 {
		t.Fatalf("failed outbox: backlog %v age %v dlq %v", s.OutboxBacklog, s.OutboxOldestAge, s.DLQRecords)
	}
	if l := Line(s); !strings.Contains(l, "outbox=unknown") || strings.Contains(l, "outbox=0") {
		t.Fatalf("line %q", l)
	}
	b, _ := json.Marshal(s)
	if strings.Contains(string(b), "outbox_backlog") {
		t.Fatalf("json %s holds an outbox backlog", b)
	}
	s = result.LagSample{}
	a = answer{At: time.Now(), OutboxBacklog: 7, OutboxOldestAgeSeconds: 1.5, Errors: []string{"fanout: list end offsets: timeout"}}
	a.outboxInto(&s)
	if s.OutboxBacklog == nil || *s.OutboxBacklog != 7 || *s.OutboxOldestAge != 1.5 || s.DLQRecords != nil {
		t.Fatalf("measured outbox: backlog %v age %v dlq %v", s.OutboxBacklog, s.OutboxOldestAge, s.DLQRecords)
	}
	if l := Line(s); !strings.Contains(l, "outbox=7 (oldest 1.50s)") || !strings.Contains(l, "dlq=unknown") {
		t.Fatalf("line %q", l)
	}
}
