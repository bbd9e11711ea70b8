package conv

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"imlab/ledger"
)

// This file holds what the model knows of the sends to each conversation
// (Ledger.Sends, Ledger.Unknown): refused-after-heal, and the conv_seqs the
// sends of unknown outcome may have left empty (unexplained-gap).

// Send is a send as the conversation model sees it.
type Send struct {
	Tick    uint64
	Key     Key            // its conversation, by its parties
	Conv    uint64         // its conversation's id: the ACK's, or the attempt's (0: not known)
	Outcome ledger.Outcome // of its last try
	Tries   uint8
	Started time.Duration
	// Found: of a send of unknown outcome (Ledger.Unknown), the distinct
	// messages found of it (the recovered one, the copies its retries
	// stored).
	Found int
}

// Key names the conversation of a send when no conversation id is known:
// 1:1 by its two uids (A below B), a group by its id (A).
type Key struct {
	Group bool
	A, B  uint64
}

// Liveness sets the bound refused-after-heal judges by: the time the
// run's last fault healed and how long after it a conversation may still
// refuse sends (package checker's Options.Liveness).
func (m *Model) Liveness(healed, bound time.Duration) {
	m.liveness = &liveness{healed: healed, bound: bound}
}

type liveness struct{ healed, bound time.Duration }

// convIDs maps each conversation key to its id, from the sends that carry
// one (the ACKs', and attempts not ACKed whose driver knew it).
func (m *Model) convIDs() map[Key]uint64 {
	ids := map[Key]uint64{}
	for s := range m.ledger.Sends() {
		if s.Conv != 0 {
			ids[s.Key] = s.Conv
		}
	}
	return ids
}

// unfound counts, per conversation, the sends of unknown outcome whose
// message was never found: each may have taken a conv_seq and left it
// empty.
func (m *Model) unfound() map[uint64]int {
	ids := m.convIDs()
	out := map[uint64]int{}
	for s := range m.ledger.Unknown() {
		// Without idempotent sends every try may have taken a conv_seq
		// of its own; with them, the send took one at most.
		room := 1
		if !m.target.IdempotentSend {
			room = max(int(s.Tries), 1)
		}
		left := room - s.Found
		if left <= 0 {
			continue
		}
		id := s.Conv
		if id == 0 {
			id = ids[s.Key]
		}
		out[id] += left
	}
	return out
}

// ValidateRefusedAfterHeal: a conversation that kept refusing sends
// (failed or unanswered, after leaving the client) from the heal on, past
// the bound: no send to it accepted from the heal until one started after
// heal + bound was refused. Counted in refused sends past the bound.
func ValidateRefusedAfterHeal(m *Model, f Marker) {
	l := m.liveness
	if l == nil {
		return
	}
	ids := m.convIDs()
	firstOK := map[Key]time.Duration{}
	for s := range m.ledger.Sends() {
		if at, seen := firstOK[s.Key]; s.Outcome == ledger.OK && s.Started >= l.healed && (!seen || s.Started < at) {
			firstOK[s.Key] = s.Started
		}
	}
	refused := map[Key][]uint64{}
	for s := range m.ledger.Sends() {
		at, ok := firstOK[s.Key]
		if s.Outcome != ledger.OK && s.Tries > 0 && s.Started >= l.healed+l.bound && (!ok || s.Started < at) {
			refused[s.Key] = append(refused[s.Key], s.Tick)
		}
	}
	n := 0
	for _, k := range slices.SortedFunc(maps.Keys(refused), cmpKey) {
		ticks := refused[k]
		slices.Sort(ticks)
		n += len(ticks)
		f.Conv(ids[k])
		f.Item(fmt.Sprint(k), "%s refused %d sends started more than %s after the heal at %s (sends %s), none accepted since the heal",
			convName(k, ids[k]), len(ticks), l.bound, l.healed, FirstFew(ticks))
	}
	f.Count(n)
}

func cmpKey(x, y Key) int {
	switch {
	case x.Group != y.Group:
		if x.Group {
			return 1
		}
		return -1
	case x.A != y.A:
		if x.A < y.A {
			return -1
		}
		return 1
	case x.B < y.B:
		return -1
	case x.B > y.B:
		return 1
	}
	return 0
}

func convName(k Key, id uint64) string {
	name := fmt.Sprintf("the 1:1 conversation of uids %d and %d", k.A, k.B)
	if k.Group {
		name = fmt.Sprintf("group %d", k.A)
	}
	if id != 0 {
		name += fmt.Sprintf(" (conv %d)", id)
	}
	return name
}
