package expect

import (
	"strings"
	"testing"

	"imlab/result"
	"imlab/scenario"
)

// TestDeadLetterChecks: each expect.dead_letters term passes on a summary
// that meets it, fails on one that does not, and fails (never passes as 0)
// on dead letters that were not read whole.
func TestDeadLetterChecks(t *testing.T) {
	one, ten := int64(1), int64(10)
	spec := &scenario.DeadLettersSpec{Min: &one, Max: &ten, Accounted: true, Retried: true}
	good := &result.DeadLetterSummary{Known: true, Records: 3, Inbox: 3, Transient: 3, WindowMS: 1500, MsgIDs: []uint64{1, 2, 3}, Repaired: 3}
	run := func(d *result.DeadLetterSummary) map[string]result.Check {
		out := map[string]result.Check{}
		deadLetterChecks(spec, d, func(name, want, got string, ok bool) {
			out[name] = result.Check{Name: name, Want: want, Got: got, OK: ok}
		})
		return out
	}
	names := []string{"dead_letters_min", "dead_letters_max", "dead_letters_accounted", "dead_letters_retried"}
	for _, n := range names {
		if c := run(good)[n]; !c.OK {
			t.Errorf("good summary: %s failed: %+v", n, c)
		}
	}
	for _, d := range []*result.DeadLetterSummary{nil, {Known: false, Errors: []string{"route: 503"}}} {
		for _, n := range names {
			if c := run(d)[n]; c.OK || !strings.Contains(c.Got, "unknown") {
				t.Errorf("unread dead letters %+v: %s %+v; want failed as unknown", d, n, c)
			}
		}
	}
	bad := *good
	bad.Records = 0
	if c := run(&bad)["dead_letters_min"]; c.OK {
		t.Errorf("no records passed min 1: %+v", c)
	}
	bad = *good
	bad.Records = 11
	if c := run(&bad)["dead_letters_max"]; c.OK {
		t.Errorf("11 records passed max 10: %+v", c)
	}
	bad = *good
	bad.Unaccounted = []uint64{77}
	if c := run(&bad)["dead_letters_accounted"]; c.OK || !strings.Contains(c.Got, "77") {
		t.Errorf("a silently gone message passed: %+v", c)
	}
	bad = *good
	bad.Mismatch = []string{"the topic holds a letter at 1/2 that the server does not list"}
	if c := run(&bad)["dead_letters_accounted"]; c.OK {
		t.Errorf("route and topic differing passed: %+v", c)
	}
	bad = *good
	bad.Early = []result.DeadLetterRef{{MsgID: 5, RetriedMS: 700, WindowMS: 1500}}
	if c := run(&bad)["dead_letters_retried"]; c.OK || !strings.Contains(c.Got, "700 ms") {
		t.Errorf("an early letter passed: %+v", c)
	}
}
