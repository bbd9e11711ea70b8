package checker

import (
	"slices"
	"time"
)

// fate says what became of each distinct msg_id of ids, by the findings'
// definitions: lost if some recipient device never stored it, delivered
// if its ACK or a recovered send explains it, unexplained otherwise.
func (m *model) fate(ids []uint64) *Fate {
	f := &Fate{Lost: []uint64{}, Unexplained: []uint64{}}
	late := newLatencyHist()
	seen := make(map[uint64]bool, len(ids))
	for _, msg := range ids {
		if seen[msg] {
			continue
		}
		seen[msg] = true
		f.Messages++
		a, acked := m.ev.acks[msg]
		_, recovered := m.recovered[msg]
		_, lost := m.missing[msg]
		switch {
		case lost:
			f.Lost = append(f.Lost, msg)
		case acked:
			f.Delivered++
			if last, ok := m.lastCopy(msg, m.ev.sends[a.tick]); ok {
				late.RecordValue(us(last - a.intended))
			}
		case recovered:
			f.Delivered++ // no intended time of its own to measure from
		default:
			f.Unexplained = append(f.Unexplained, msg)
		}
	}
	slices.Sort(f.Lost)
	slices.Sort(f.Unexplained)
	if late.TotalCount() > 0 {
		f.LastCopy = latencyOf(late)
	}
	return f
}

// lastCopy is when the last recipient device of a delivered message first
// stored it (false: it has no recipient device).
func (m *model) lastCopy(msg uint64, s send) (time.Duration, bool) {
	var last time.Duration
	found := false
	for _, u := range m.ev.recipients(s) {
		for _, dv := range m.ev.uidDevs[u] {
			if c, ok := m.devs[dv].got[msg]; ok && (!found || c.at > last) {
				last, found = c.at, true
			}
		}
	}
	return last, found
}
