package conv

import (
	"slices"
	"sort"
	"time"
)

// On a target with a delete log (Tinode) a device reads a conversation
// only from the next conv_seq it holds: a catch-up reads the history above
// it, a push past it is preceded by the history between. So a device that
// stored conv_seq s' of a conversation at t had, by t, read every conv_seq
// below s' it did not hold: that read should have carried each of them,
// and a delete explains one missing only if it was sent before t
// (package checker's lost asks HiddenFrom at that t).

// passed is one first copy a device stored of a conversation: its conv_seq
// and when.
type passed struct {
	convSeq uint64
	at      time.Duration
}

// Passes answers, for one device and conversation, when the device
// first stored a conv_seq above a given one: the copies by conv_seq, with
// the earliest time at or above each position.
type Passes struct {
	copies []passed
	sorted bool
}

// Add records the device's first copy of convSeq, stored at at.
func (p *Passes) Add(convSeq uint64, at time.Duration) {
	p.copies = append(p.copies, passed{convSeq, at})
	p.sorted = false
}

// FirstAbove is the earliest time the device stored a conv_seq above seq;
// false if it never did.
func (p *Passes) FirstAbove(seq uint64) (time.Duration, bool) {
	if !p.sorted {
		slices.SortFunc(p.copies, func(a, b passed) int {
			switch {
			case a.convSeq < b.convSeq:
				return -1
			case a.convSeq > b.convSeq:
				return 1
			}
			return 0
		})
		for i := len(p.copies) - 2; i >= 0; i-- {
			p.copies[i].at = min(p.copies[i].at, p.copies[i+1].at)
		}
		p.sorted = true
	}
	i := sort.Search(len(p.copies), func(i int) bool { return p.copies[i].convSeq > seq })
	if i == len(p.copies) {
		return 0, false
	}
	return p.copies[i].at, true
}

// DrainEnd is when the run's final drain had ended as far as the ledger
// dates it: the history witness is read after it, so its earliest read.
// Without a history witness the ledger does not date it: the end of time.
// Computed once.
func (m *Model) DrainEnd() time.Duration {
	if m.drainedAt != 0 {
		return m.drainedAt
	}
	end := Never - 1
	for _, s := range m.ev.Slots {
		end = min(end, s.At)
	}
	for _, h := range m.ev.Heads {
		end = min(end, h.At)
	}
	for _, r := range m.ev.DelRanges {
		end = min(end, r.At)
	}
	for _, w := range m.ev.Watermarks {
		end = min(end, w.At)
	}
	m.drainedAt = end
	return end
}
