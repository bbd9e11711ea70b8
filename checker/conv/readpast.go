package checker

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
// and a delete explains one missing only if it was sent before t.

// passed is one first copy a device stored of a conversation: its conv_seq
// and when.
type passed struct {
	convSeq uint64
	at      time.Duration
}

// passIndex answers, for one device and conversation, when the device
// first stored a conv_seq above a given one: the copies by conv_seq, with
// the earliest time at or above each position.
type passIndex struct {
	copies []passed
	sorted bool
}

func (p *passIndex) add(convSeq uint64, at time.Duration) {
	p.copies = append(p.copies, passed{convSeq, at})
	p.sorted = false
}

// firstAbove is the earliest time the device stored a conv_seq above seq;
// false if it never did.
func (p *passIndex) firstAbove(seq uint64) (time.Duration, bool) {
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

// readBy is when the read that should have carried conv_seq seq of
// conversation conv to device dev had happened: the device's first copy of
// a later conv_seq of the conversation, or, when there is none, the end of
// the run's drain (drainEnd).
func (m *model) readBy(dev uint32, conv, seq uint64) time.Duration {
	if p := m.devs[dev].passes[conv]; p != nil {
		if at, ok := p.firstAbove(seq); ok {
			return at
		}
	}
	return m.drainEnd()
}

// drainEnd is when the run's final drain had ended as far as the ledger
// dates it: the history witness is read after it, so its earliest read.
// Without a history witness the ledger does not date it: the end of time.
// Computed once.
func (m *model) drainEnd() time.Duration {
	if m.drainedAt != 0 {
		return m.drainedAt
	}
	end := never - 1
	for _, s := range m.ev.slots {
		end = min(end, s.At)
	}
	for _, h := range m.ev.heads {
		end = min(end, h.At)
	}
	for _, r := range m.ev.delRanges {
		end = min(end, r.At)
	}
	for _, w := range m.ev.watermarks {
		end = min(end, w.At)
	}
	m.drainedAt = end
	return end
}
