package checker

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"imlab/checker/conv"
	"imlab/ledger"
)

// This file holds what every target shares, whatever it offers on top of
// the ordered conversation: the checks its capabilities decide (inbox,
// retries), the liveness bound, and the findings both kinds of target
// need: failed-but-stored, refused-after-heal and retry-duplicate (and
// what the conversation model's unexplained-gap asks: Unfound).

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

// convKey names the conversation of a send when no conversation id is
// known: 1:1 by its two uids, a group by its id.
type convKey struct {
	group bool
	a, b  uint64
}

func (ev *evidence) keyOf(s send) convKey {
	if s.convType == 2 {
		return convKey{group: true, a: s.target}
	}
	u := ev.devUID[s.dev]
	return convKey{a: min(u, s.target), b: max(u, s.target)}
}

// convIDs maps each conversation key to its id, from the sends that carry
// one (the ACKs', and attempts not ACKed whose driver knew it).
func (ev *evidence) convIDs() map[convKey]uint64 {
	ids := map[convKey]uint64{}
	for _, s := range ev.sends {
		if s.conv != 0 {
			ids[ev.keyOf(s)] = s.conv
		}
	}
	return ids
}

// validateRefusedAfterHeal: a conversation that kept refusing sends
// (failed or unanswered, after leaving the client) from the heal on, past
// the bound: no send to it accepted from the heal until one started after
// heal + bound was refused. Counted in refused sends past the bound.
func validateRefusedAfterHeal(m *model, f *marker) {
	l := m.liveness
	if l == nil {
		return
	}
	ev := m.ev
	ids := ev.convIDs()
	firstOK := map[convKey]time.Duration{}
	for _, s := range ev.sends {
		k := ev.keyOf(s)
		if at, seen := firstOK[k]; s.outcome == ledger.OK && s.started >= l.Healed && (!seen || s.started < at) {
			firstOK[k] = s.started
		}
	}
	refused := map[convKey][]uint64{}
	for tick := range ev.sends {
		s := ev.sends[tick]
		k := ev.keyOf(s)
		at, ok := firstOK[k]
		if s.outcome != ledger.OK && s.tries > 0 && s.started >= l.Healed+l.Bound && (!ok || s.started < at) {
			refused[k] = append(refused[k], tick)
		}
	}
	n := 0
	for _, k := range slices.SortedFunc(maps.Keys(refused), cmpKey) {
		ticks := refused[k]
		slices.Sort(ticks)
		n += len(ticks)
		f.Conv(ids[k])
		f.Item(fmt.Sprint(k), "%s refused %d sends started more than %s after the heal at %s (sends %s), none accepted since the heal",
			convName(k, ids[k]), len(ticks), l.Bound, l.Healed, conv.FirstFew(ticks))
	}
	f.Count(n)
}

func cmpKey(x, y convKey) int {
	switch {
	case x.group != y.group:
		if x.group {
			return 1
		}
		return -1
	case x.a != y.a:
		if x.a < y.a {
			return -1
		}
		return 1
	case x.b < y.b:
		return -1
	case x.b > y.b:
		return 1
	}
	return 0
}

func convName(k convKey, id uint64) string {
	name := fmt.Sprintf("the 1:1 conversation of uids %d and %d", k.a, k.b)
	if k.group {
		name = fmt.Sprintf("group %d", k.a)
	}
	if id != 0 {
		name += fmt.Sprintf(" (conv %d)", id)
	}
	return name
}

// Unfound counts, per conversation, the sends of unknown outcome whose
// message was never found (recovered): each may have taken a conv_seq and
// left it empty (the conversation model's unexplained-gap asks).
func (m *model) Unfound() map[uint64]int {
	ids := m.ev.convIDs()
	// The distinct messages found of each unknown send: the first
	// (recovered) and the copies its retries stored.
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
	out := map[uint64]int{}
	for tick, s := range m.ev.unknown {
		// Without idempotent sends every try may have taken a conv_seq
		// of its own; with them, the send took one at most.
		room := 1
		if !m.ev.target.IdempotentSend {
			room = max(int(s.tries), 1)
		}
		left := room - len(found[tick])
		if left <= 0 {
			continue
		}
		id := s.conv
		if id == 0 {
			id = ids[m.ev.keyOf(s)]
		}
		out[id] += left
	}
	return out
}
