package checker

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"imlab/ledger"
)

// AckInFlight is how long after a retention deletion a device's accepted
// cursor acknowledgement may be answered and still count as stored before
// the deletion: the ledger keeps when an acknowledgement's answer came,
// and the server stored it at some time before, while the request was in
// flight.
const AckInFlight = 5 * time.Second

// settingsAt is the retention settings in force at t: the last ones
// recorded from at or before t, else the first.
func (m *model) settingsAt(t time.Duration) ledger.RetentionSettings {
	s := m.retention[0]
	for _, x := range m.retention {
		if x.At <= t {
			s = x
		}
	}
	return s
}

// validateRetentionEarly: a row retention deleted younger than its rules
// allow: younger than PulledMinAge whatever the reason, or younger than
// MaxAge as expired.
func validateRetentionEarly(m *model, f *marker) {
	if m.retention == nil {
		return
	}
	for _, d := range m.ev.deletions {
		s, age := m.settingsAt(d.DeletedAt), d.DeletedAt-d.CreatedAt
		var rule string
		switch {
		case age < s.PulledMinAge:
			rule = fmt.Sprintf("younger than the pulled minimum age %s", s.PulledMinAge)
		case d.Reason == ledger.RetentionExpired && age < s.MaxAge:
			rule = fmt.Sprintf("deleted as expired, younger than the maximum age %s", s.MaxAge)
		default:
			continue
		}
		f.Mark(d.MsgID, d.UID, "uid %d seq %d (msg_id %d) deleted at the age of %s: %s", d.UID, d.Seq, d.MsgID, age, rule)
	}
}

// validateRetentionUnpulled: a row retention deleted, younger than MaxAge,
// while some device of its uid had not pulled and acknowledged it (its
// claimed cursor below the row's seq; see AckInFlight).
func validateRetentionUnpulled(m *model, f *marker) {
	if m.retention == nil {
		return
	}
	for _, d := range m.ev.deletions {
		if d.DeletedAt-d.CreatedAt >= m.settingsAt(d.DeletedAt).MaxAge {
			continue
		}
		for _, dev := range m.ev.uidDevs[d.UID] {
			if c := m.claimedBy(dev, d.DeletedAt+AckInFlight); c < d.Seq {
				f.pair()
				f.Mark(d.MsgID, d.UID, "uid %d seq %d (msg_id %d) deleted while device %d had acknowledged only up to %d", d.UID, d.Seq, d.MsgID, dev, c)
			}
		}
	}
}

// claimedBy is the highest cursor device dev claimed (an acknowledgement
// accepted, or sent on the WebSocket) in a record from at or before t.
func (m *model) claimedBy(dev uint32, t time.Duration) uint64 {
	if m.claimIndex == nil {
		m.claimIndex = map[uint32][]ledger.Cursor{}
	}
	idx, ok := m.claimIndex[dev]
	if !ok { // the device's claims by time, each with the highest seq so far
		var high uint64
		for _, c := range m.ev.cursors[dev] {
			if c.Status == ledger.Accepted || c.Status == ledger.Sent {
				high = max(high, c.Seq)
				idx = append(idx, ledger.Cursor{Seq: high, At: c.At})
			}
		}
		slices.SortStableFunc(idx, func(a, b ledger.Cursor) int { return cmp.Compare(a.At, b.At) })
		for i := 1; i < len(idx); i++ {
			idx[i].Seq = max(idx[i].Seq, idx[i-1].Seq)
		}
		m.claimIndex[dev] = idx
	}
	i, _ := slices.BinarySearchFunc(idx, t, func(c ledger.Cursor, t time.Duration) int {
		if c.At <= t {
			return -1
		}
		return 1
	})
	if i == 0 {
		return 0
	}
	return idx[i-1].Seq
}
