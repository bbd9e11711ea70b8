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
// the error named apart) leaves the sample's outbox unknown with that
// error in OutboxErr, printed so, and a measured one is copied; the dead
// letters are unknown only when another error came with the answer.
func TestOutboxUnknownNeverZero(t *testing.T) {
	var s result.LagSample
	oe := "fanout: outbox backlog: invalid connection"
	a := answer{At: time.Now(), OutboxOldestAgeSeconds: -1, DLQRecords: 3, Errors: []string{oe}, OutboxError: oe}
	a.outboxInto(&s)
	if s.OutboxBacklog != nil || s.OutboxOldestAge != nil || s.DLQRecords == nil || *s.DLQRecords != 3 || s.OutboxErr != oe {
		t.Fatalf("failed outbox: backlog %v age %v dlq %v error %q", s.OutboxBacklog, s.OutboxOldestAge, s.DLQRecords, s.OutboxErr)
	}
	if l := Line(s); !strings.Contains(l, "outbox=unknown ("+oe+")") || strings.Contains(l, "outbox=0") {
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

// TestOutboxErrorApart: the outbox's error, named apart by the server,
// stays out of the sample's Err (its consumer lag is a measurement) and
// goes to OutboxErr; any other error still makes the whole sample unknown;
// an answer whose outbox error is not named apart (OutboxError "") counts
// it against the whole sample, as before the server named it, and leaves
// the dead letters unknown.
func TestOutboxErrorApart(t *testing.T) {
	now := time.Now()
	oe := "fanout: outbox backlog: invalid connection"
	for _, c := range []struct {
		name     string
		a        answer
		err      string // in Err ("": Err empty)
		outbox   string
		dlqKnown bool
	}{
		{"outbox only", answer{At: now, OutboxOldestAgeSeconds: -1, Errors: []string{oe}, OutboxError: oe}, "", oe, true},
		{"outbox and a group", answer{At: now, OutboxOldestAgeSeconds: -1, Errors: []string{"group g: timeout", oe}, OutboxError: oe}, "group g: timeout", oe, false},
		{"not named apart", answer{At: now, OutboxOldestAgeSeconds: -1, Errors: []string{oe}}, oe, "", false},
		{"outbox backlog read, then its unconfirmed count failed", answer{At: now, OutboxBacklog: 4, OutboxOldestAgeSeconds: 2, Errors: []string{"fanout: outbox unconfirmed: x"}, OutboxError: "fanout: outbox unconfirmed: x"}, "", "fanout: outbox unconfirmed: x", true},
	} {
		s := result.LagSample{Err: c.a.unknownReason(now)}
		c.a.outboxInto(&s)
		if (c.err == "") != (s.Err == "") || !strings.Contains(s.Err, c.err) || strings.Contains(s.Err, "outbox") && c.outbox != "" {
			t.Errorf("%s: Err %q, want %q", c.name, s.Err, c.err)
		}
		if _, _, ok := s.Outbox(); s.OutboxErr != c.outbox || ok || s.OutboxBacklog != nil {
			t.Errorf("%s: outbox error %q (want %q), outbox known %v, backlog %v: want unknown", c.name, s.OutboxErr, c.outbox, ok, s.OutboxBacklog)
		}
		if (s.DLQRecords != nil) != c.dlqKnown {
			t.Errorf("%s: dead letters %v, want known %v", c.name, s.DLQRecords, c.dlqKnown)
		}
		if s.LagKnown() != (c.err == "") {
			t.Errorf("%s: lag known %v", c.name, s.LagKnown())
		}
	}
}
