package checker

import (
	"fmt"
	"iter"

	"imlab/checker/conv"
)

// This file holds what every target shares, whatever it offers on top of
// the ordered conversation: the checks its capabilities decide (inbox,
// retries), the liveness bound, and the findings both kinds of target
// need: failed-but-stored and retry-duplicate, and the sends the
// conversation model's refused-after-heal and unexplained-gap ask of
// (Sends, Unknown).

// inboxCheck: the inbox findings have a meaning only on a target with a
// per-user inbox log.
func (m *model) inboxCheck() CheckResult {
	ch := CheckResult{Name: CheckInbox, Findings: []string{Skipped, DoubleStored, SeqConflict, LostInStore, UnstoredAtAck}}
	t := m.ev.target
	if !t.Inbox {
		ch.Unexercised = true
		ch.Detail = fmt.Sprintf("the target (driver %s) keeps no per-user inbox log (no inbox seq, no sync cursor): only its conversations are judged", t.Driver)
		return ch
	}
	ch.Made = true
	ch.Detail = fmt.Sprintf("per-user inbox logs of %d uids", len(m.inbox))
	return ch
}

// retriesCheck: a second message of a retried send is retry-duplicate on
// a target without idempotent send, unexpected on one with it.
func (m *model) retriesCheck() CheckResult {
	ch := CheckResult{Name: CheckRetries, Findings: []string{RetryDuplicate}}
	t := m.ev.target
	if t.IdempotentSend {
		ch.Unexercised = true
		ch.Detail = fmt.Sprintf("the target (driver %s) stores a retried send once: a second message of one is unexpected", t.Driver)
		return ch
	}
	retried := 0
	for _, s := range m.ev.sends {
		if s.tries > 1 {
			retried++
		}
	}
	ch.Made = true
	ch.Detail = fmt.Sprintf("the target (driver %s) has no idempotent send: %d sends retried, told apart by their client tag", t.Driver, retried)
	return ch
}

// livenessCheck makes refused-after-heal when the run states when its
// last fault healed.
func (m *model) livenessCheck() CheckResult {
	ch := CheckResult{Name: CheckLiveness, Findings: []string{RefusedAfterHeal}}
	l := m.liveness
	if l == nil {
		ch.Unexercised = true
		ch.Detail = "the run stated no heal time and bound"
		return ch
	}
	n := 0
	for _, s := range m.ev.sends {
		if s.started >= l.Healed+l.Bound {
			n++
		}
	}
	ch.Made = true
	ch.Detail = fmt.Sprintf("last fault healed at %s, bound %s: %d sends started after it", l.Healed, l.Bound, n)
	return ch
}

// validateFailedButStored: a send answered with a definite error (no try
// of it of unknown outcome) whose message a device, a witness or the
// history holds anyway.
func validateFailedButStored(m *model, f *marker) {
	for _, x := range m.failedStored {
		s := m.ev.sends[x.tick]
		f.Mark(x.msg, 0, "send %d was refused (status %d after %d tries), yet its message msg_id %d is in %s", x.tick, s.status, s.tries, x.msg, x.at)
	}
}

// validateRetryDuplicate: on a target without idempotent send, a send
// retried and stored as more than one message (its client tag on each).
// Reported, not deciding: the target promises no better.
func validateRetryDuplicate(m *model, f *marker) {
	for _, x := range m.retried {
		f.Mark(x.msg, 0, "send %d, tried %d times, stored twice: msg_id %d and msg_id %d (%s)", x.tick, m.ev.sends[x.tick].tries, x.other, x.msg, x.at)
	}
}

// Sends is every send of the run as the conversation model sees it (its
// refused-after-heal and unexplained-gap ask).
func (m *model) Sends() iter.Seq[conv.Send] {
	return func(yield func(conv.Send) bool) {
		for tick, s := range m.ev.sends {
			if !yield(m.convSend(tick, s)) {
				return
			}
		}
	}
}

// Unknown is every send of unknown outcome, with the distinct messages
// found of it: the first (recovered) and the copies its retries stored.
func (m *model) Unknown() iter.Seq[conv.Send] {
	found := map[uint64]map[uint64]bool{}
	note := func(tick, msg uint64) {
		if found[tick] == nil {
			found[tick] = map[uint64]bool{}
		}
		found[tick][msg] = true
	}
	for tick, msg := range m.recTick {
		note(tick, msg)
	}
	for _, r := range m.retried {
		note(r.tick, r.msg)
	}
	return func(yield func(conv.Send) bool) {
		for tick, s := range m.ev.unknown {
			c := m.convSend(tick, s)
			c.Found = len(found[tick])
			if !yield(c) {
				return
			}
		}
	}
}

// convSend is send tick as the conversation model sees it, its
// conversation named by its parties when no id is known: 1:1 by its two
// uids, a group by its id.
func (m *model) convSend(tick uint64, s send) conv.Send {
	k := conv.Key{Group: true, A: s.target}
	if s.convType != 2 {
		u := m.ev.devUID[s.dev]
		k = conv.Key{A: min(u, s.target), B: max(u, s.target)}
	}
	return conv.Send{Tick: tick, Key: k, Conv: s.conv, Outcome: s.outcome, Tries: s.tries, Started: s.started}
}
