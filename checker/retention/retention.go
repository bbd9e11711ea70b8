package retention

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

// Evidence is the retention records of the ledger, as they said them, and
// when the ledger shows each device first heard of by the target.
type Evidence struct {
	Deletions []ledger.Deletion
	Settings  []ledger.RetentionSettings
	// Known is, per device, the earliest time a record shows the target
	// had heard of it (see Ingest); a device without an entry was never
	// shown known.
	Known map[uint32]time.Duration
}

// Ingest takes one record if it is retention's (a deletion, the settings,
// a device's first contact) and says whether it was. Of the other records
// it notes, without taking them, those that show the target knew a device
// by their time: a delivery (the answer to a pull, or a frame on a
// WebSocket the target accepted), an acknowledgement accepted or sent on
// a WebSocket, a conversation pull answered ok. The target makes a device
// known before it answers any of them (ref/pull's Register).
func (ev *Evidence) Ingest(r *ledger.Record) bool {
	switch r.Kind {
	case ledger.KindRetention:
		if r.IsSettings {
			ev.Settings = append(ev.Settings, r.Settings)
		} else {
			ev.Deletions = append(ev.Deletions, r.Deletion)
		}
		return true
	case ledger.KindContact:
		ev.known(r.Contact.Dev, r.Contact.At)
		return true
	case ledger.KindDelivery:
		ev.known(r.Delivery.Dev, r.Delivery.At)
	case ledger.KindCursor:
		if r.Cursor.Status == ledger.Accepted || r.Cursor.Status == ledger.Sent {
			ev.known(r.Cursor.Dev, r.Cursor.At)
		}
	case ledger.KindAction:
		if r.Action == ledger.ActConvPull && r.ConvPull.Outcome == ledger.OK {
			ev.known(r.ConvPull.Dev, r.ConvPull.Ended)
		}
	}
	return false
}

// known notes that the target knew dev by at.
func (ev *Evidence) known(dev uint32, at time.Duration) {
	if ev.Known == nil {
		ev.Known = map[uint32]time.Duration{}
	}
	if k, ok := ev.Known[dev]; !ok || at < k {
		ev.Known[dev] = at
	}
}

// KnownBy says the ledger shows the target had heard of dev by t.
func (ev *Evidence) KnownBy(dev uint32, t time.Duration) bool {
	k, ok := ev.Known[dev]
	return ok && k <= t
}

// Marker is how a rule marks its finding: package checker gives each rule
// the marker of its own finding only.
type Marker interface {
	// Mark puts msg_id msg into the finding (and uid, when not 0), and
	// keeps the example the first time msg is marked.
	Mark(msg, uid uint64, format string, args ...any)
	// Pair counts one more (row, device) pair.
	Pair()
}

// Model is what the rules read: the records, the devices' cursor records
// and the uids' devices (package checker's), and the settings in force
// once the retention check is made (Judge).
type Model struct {
	ev        *Evidence
	cursors   map[uint32][]ledger.Cursor // device -> its cursor records, in order
	uidDevs   map[uint64][]uint32        // uid -> its devices
	retention []ledger.RetentionSettings // nil: not judged
	// Indexes built on first use: (uid, seq) -> when retention deleted
	// it; (uid, msg_id) retention deleted; device -> its claims by time,
	// with the highest seq so far.
	deleted    map[[2]uint64]time.Duration
	deletedMsg map[[2]uint64]bool
	deletedAt  map[[2]uint64]time.Duration // (uid, msg_id) -> its earliest deletion
	claimIndex map[uint32][]ledger.Cursor
}

// NewModel is the model of ev, with each device's cursor records and each
// uid's devices.
func NewModel(ev *Evidence, cursors map[uint32][]ledger.Cursor, uidDevs map[uint64][]uint32) *Model {
	return &Model{ev: ev, cursors: cursors, uidDevs: uidDevs}
}

// Judge makes the findings judged by the settings recorded (package
// checker's retention check, when it is made).
func (m *Model) Judge() { m.retention = m.ev.Settings }

// settingsAt is the retention settings in force at t: the last ones
// recorded from at or before t, else the first.
func (m *Model) settingsAt(t time.Duration) ledger.RetentionSettings {
	s := m.retention[0]
	for _, x := range m.retention {
		if x.At <= t {
			s = x
		}
	}
	return s
}

// ValidateRetentionEarly: a row retention deleted younger than its rules
// allow: younger than PulledMinAge whatever the reason, or younger than
// MaxAge as expired.
func ValidateRetentionEarly(m *Model, f Marker) {
	if m.retention == nil {
		return
	}
	for _, d := range m.ev.Deletions {
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

// ValidateRetentionUnpulled: a row retention deleted, younger than MaxAge,
// while some device of its uid that the target had heard of had not
// pulled and acknowledged it (its claimed cursor below the row's seq; see
// AckInFlight). A device counts only from the first time the ledger shows
// it known (Evidence.KnownBy): the server cannot wait for a device it
// never heard of, and one first heard of after the deletion (an offline
// device whose first visit came late) is no defect of the server's.
func ValidateRetentionUnpulled(m *Model, f Marker) {
	if m.retention == nil {
		return
	}
	for _, d := range m.ev.Deletions {
		if d.DeletedAt-d.CreatedAt >= m.settingsAt(d.DeletedAt).MaxAge {
			continue
		}
		for _, dev := range m.uidDevs[d.UID] {
			if !m.ev.KnownBy(dev, d.DeletedAt) {
				continue
			}
			if c := m.claimedBy(dev, d.DeletedAt+AckInFlight); c < d.Seq {
				f.Pair()
				f.Mark(d.MsgID, d.UID, "uid %d seq %d (msg_id %d) deleted while device %d had acknowledged only up to %d", d.UID, d.Seq, d.MsgID, dev, c)
			}
		}
	}
}

// claimedBy is the highest cursor device dev claimed (an acknowledgement
// accepted, or sent on the WebSocket) in a record from at or before t.
func (m *Model) claimedBy(dev uint32, t time.Duration) uint64 {
	if m.claimIndex == nil {
		m.claimIndex = map[uint32][]ledger.Cursor{}
	}
	idx, ok := m.claimIndex[dev]
	if !ok { // the device's claims by time, each with the highest seq so far
		var high uint64
		for _, c := range m.cursors[dev] {
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

// Retained says retention deleted (uid, seq) by t: a conversation pull
// after that cannot show it.
func (m *Model) Retained(uid, seq uint64, t time.Duration) bool {
	if m.deleted == nil {
		m.deleted = earliestDeletions(m.ev.Deletions, func(d ledger.Deletion) [2]uint64 { return [2]uint64{d.UID, d.Seq} })
	}
	at, ok := m.deleted[[2]uint64{uid, seq}]
	return ok && at <= t
}

// RetainedMsgBy says retention deleted uid's inbox row of msg by t.
func (m *Model) RetainedMsgBy(uid, msg uint64, t time.Duration) bool {
	for _, d := range m.ev.Deletions {
		if d.UID == uid && d.MsgID == msg && d.DeletedAt <= t {
			return true
		}
	}
	return false
}

// GoneBeforeKnown says retention deleted uid's inbox row of msg before
// the ledger shows device dev known to the target (Evidence.KnownBy): a
// correct server keeps a row for no device it has not heard of, so such a
// device may never get the message (not lost, not skipped), and the
// deletion is no retention-unpulled either.
func (m *Model) GoneBeforeKnown(uid, msg uint64, dev uint32) bool {
	if m.deletedAt == nil {
		m.deletedAt = earliestDeletions(m.ev.Deletions, func(d ledger.Deletion) [2]uint64 { return [2]uint64{d.UID, d.MsgID} })
	}
	at, ok := m.deletedAt[[2]uint64{uid, msg}]
	return ok && !m.ev.KnownBy(dev, at)
}

// earliestDeletions is, for each key of the deletions, when the first of
// them deleted it.
func earliestDeletions(ds []ledger.Deletion, key func(ledger.Deletion) [2]uint64) map[[2]uint64]time.Duration {
	first := make(map[[2]uint64]time.Duration, len(ds))
	for _, d := range ds {
		k := key(d)
		if at, ok := first[k]; !ok || d.DeletedAt < at {
			first[k] = d.DeletedAt
		}
	}
	return first
}

// RetainedMsg says retention deleted uid's inbox row of msg (at any time).
func (m *Model) RetainedMsg(uid, msg uint64) bool {
	if m.deletedMsg == nil {
		m.deletedMsg = map[[2]uint64]bool{}
		for _, d := range m.ev.Deletions {
			m.deletedMsg[[2]uint64{d.UID, d.MsgID}] = true
		}
	}
	return m.deletedMsg[[2]uint64{uid, msg}]
}
