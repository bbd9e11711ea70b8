package expect

import (
	"fmt"
	"strings"

	"imlab/result"
	"imlab/scenario"
)

// deadLetterChecks evaluates expect.dead_letters against what the run
// read of the dead letters (nil: nothing read). Each check fails when the
// dead letters were not read whole: an unknown count is never 0.
func deadLetterChecks(e *scenario.DeadLettersSpec, d *result.DeadLetterSummary, add func(name, want, got string, ok bool)) {
	if e == nil {
		return
	}
	unknown := func() string {
		if d == nil {
			return "unknown: the dead letters were not read"
		}
		return "unknown: " + strings.Join(d.Errors, "; ")
	}
	known := d != nil && d.Known
	count := func(name, want string, ok func(int64) bool) {
		if !known {
			add(name, want, unknown(), false)
			return
		}
		add(name, want, fmt.Sprintf("%d records (%d of the inbox tier, %d transient)", d.Records, d.Inbox, d.Transient), ok(d.Records))
	}
	if e.Min != nil {
		count("dead_letters_min", fmt.Sprintf(">= %d", *e.Min), func(n int64) bool { return n >= *e.Min })
	}
	if e.Max != nil {
		count("dead_letters_max", fmt.Sprintf("<= %d", *e.Max), func(n int64) bool { return n <= *e.Max })
	}
	if e.Accounted {
		want := "route = topic; every repaired or lost message of the fan-out topic in a dead letter"
		switch {
		case !known:
			add("dead_letters_accounted", want, unknown(), false)
		case len(d.Mismatch) > 0:
			add("dead_letters_accounted", want, fmt.Sprintf("the route and the topic differ in %d+ places: %s", len(d.Mismatch), d.Mismatch[0]), false)
		case len(d.Unaccounted) > 0:
			add("dead_letters_accounted", want, fmt.Sprintf("%d messages silently gone (queued, neither delivered by the consumer nor dead-lettered), e.g. msg_id %d",
				len(d.Unaccounted), d.Unaccounted[0]), false)
		default:
			add("dead_letters_accounted", want, d.AccountLine(), true)
		}
	}
	if e.Retried {
		want := "every transient letter retried for its window"
		switch {
		case !known:
			add("dead_letters_retried", want, unknown(), false)
		case len(d.Early) > 0:
			x := d.Early[0]
			add("dead_letters_retried", want, fmt.Sprintf("%d of %d transient letters given up early, e.g. msg_id %d after %d ms of a %d ms window",
				len(d.Early), d.Transient, x.MsgID, x.RetriedMS, x.WindowMS), false)
		default:
			add("dead_letters_retried", want, fmt.Sprintf("%d transient letters, each after at least %d ms", d.Transient, d.WindowMS), true)
		}
	}
}
