package driver

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"imlab/ledger"
	"imlab/targets/tinode"
)

// CheckHistoryWitness is the note's check name (checker.CheckHistoryWitness).
const CheckHistoryWitness = "history-witness"

// Witness is every conversation read whole at the end of a run: the
// conversation log the checker holds the sends and deliveries to.
type Witness struct {
	Slots  []ledger.Slot
	Heads  []ledger.ConvHead
	Ranges []ledger.DelRange
	Convs  int
	// Failed names the conversations that could not be read, with why.
	Failed map[uint64]string
}

// readPlan lists, per user index, the conversations it reads: a p2p topic
// by its lower user, a group by its creator.
func (d *Driver) readPlan() [][]Topic {
	plan := make([][]Topic, len(d.pop.Users))
	for ui := range d.pop.Users {
		for peer := ui + 1; peer < len(d.pop.Users); peer++ {
			plan[ui] = append(plan[ui], Topic{Name: d.tid[peer], Conv: d.p2pConv(ui, peer)})
		}
	}
	for gi, g := range d.pop.Groups {
		ui := d.byUID[g.Members[0]]
		plan[ui] = append(plan[ui], Topic{Name: d.groups[gi].name, Conv: d.groups[gi].id})
	}
	return plan
}

// ReadWitness reads every conversation of the population whole: its head
// (the topic's seq), every message up to it as its reader sees it, the
// recipient's read mark of a p2p topic, and the delete log as every member
// sees it, on at most Workers sessions. now stamps the records. A
// conversation that cannot be read is in Failed, never guessed.
//
// Tinode stores a message before it answers the {pub}, and has no tier
// that writes later: once the sends have ended there is nothing to drain
// before reading.
//
// A member's delete log holds the deletes for everyone and its own soft
// deletes, without saying which is which: a conv_seq every member's log
// holds is recorded for everyone (UID 0), one only some hold for each of
// them.
func (d *Driver) ReadWitness(ctx context.Context, now func() time.Duration) *Witness {
	plan := d.readPlan()
	w := &Witness{Failed: map[uint64]string{}}
	logs := map[uint64]map[int]tinode.DelLog{} // conv -> member index -> its delete log
	var mu sync.Mutex
	_ = d.forEach(ctx, len(plan), func(ctx context.Context, ui int) error {
		var part Witness
		part.Failed = map[uint64]string{}
		mine := map[uint64]tinode.DelLog{}
		s, err := d.login(ctx, ui, "witness")
		if err == nil {
			defer s.Close()
			for _, t := range plan[ui] {
				if err := d.readConv(ctx, s, t, now, &part); err != nil {
					part.Failed[t.Conv] = err.Error()
				}
			}
			for _, t := range d.topicsOf(ui) {
				dl, err := d.readDelLog(ctx, s, t)
				if err != nil {
					part.Failed[t.Conv] = err.Error()
					continue
				}
				mine[t.Conv] = dl
			}
		} else {
			for _, t := range d.topicsOf(ui) {
				part.Failed[t.Conv] = err.Error()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		w.Slots = append(w.Slots, part.Slots...)
		w.Heads = append(w.Heads, part.Heads...)
		w.Convs += part.Convs
		for c, why := range part.Failed {
			w.Failed[c] = why
		}
		for c, dl := range mine {
			if logs[c] == nil {
				logs[c] = map[int]tinode.DelLog{}
			}
			logs[c][ui] = dl
		}
		return nil // one user's failure must not cancel the others' reads
	})
	if ctx.Err() != nil {
		for _, ts := range plan {
			for _, t := range ts {
				if !w.read(t.Conv) {
					w.Failed[t.Conv] = "the run was cancelled before it was read"
				}
			}
		}
	}
	at := now()
	for _, c := range slices.Sorted(maps.Keys(logs)) {
		if _, failed := w.Failed[c]; !failed {
			w.Ranges = append(w.Ranges, d.delRanges(c, logs[c], at)...)
		}
	}
	slices.SortFunc(w.Slots, func(a, b ledger.Slot) int {
		if a.ConvID != b.ConvID {
			return cmpU(a.ConvID, b.ConvID)
		}
		return cmpU(a.ConvSeq, b.ConvSeq)
	})
	return w
}

// readDelLog reads topic t's delete log as s's user sees it.
func (d *Driver) readDelLog(ctx context.Context, s *tinode.Session, t Topic) (tinode.DelLog, error) {
	if err := attach(ctx, s, t.Name); err != nil {
		return tinode.DelLog{}, fmt.Errorf("attach %s: %w", t.Name, err)
	}
	dl, err := s.DelLog(ctx, t.Name)
	if err != nil {
		return tinode.DelLog{}, fmt.Errorf("delete log %s: %w", t.Name, err)
	}
	return dl, nil
}

// delRanges turns the members' delete logs of conversation conv into the
// ledger's ranges: the conv_seqs every member's log holds for everyone,
// the rest for each member that holds them.
func (d *Driver) delRanges(conv uint64, logs map[int]tinode.DelLog, at time.Duration) []ledger.DelRange {
	members := slices.Sorted(maps.Keys(logs))
	if len(members) == 0 {
		return nil
	}
	all := logs[members[0]].Ranges
	for _, ui := range members[1:] {
		all = intersect(all, logs[ui].Ranges)
	}
	var out []ledger.DelRange
	for _, r := range all {
		out = append(out, ledger.DelRange{ConvID: conv, From: uint64(r.Low), To: uint64(r.End() - 1), At: at})
	}
	for _, ui := range members {
		for _, r := range subtract(logs[ui].Ranges, all) {
			out = append(out, ledger.DelRange{ConvID: conv, From: uint64(r.Low), To: uint64(r.End() - 1), UID: d.pop.Users[ui], At: at})
		}
	}
	return out
}

// intersect is the conv_seqs both sorted, coalesced range lists hold.
func intersect(a, b []tinode.SeqRange) []tinode.SeqRange {
	var out []tinode.SeqRange
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i].Low, b[j].Low), min(a[i].End(), b[j].End())
		if lo < hi {
			out = append(out, tinode.SeqRange{Low: lo, Hi: hi})
		}
		if a[i].End() < b[j].End() {
			i++
		} else {
			j++
		}
	}
	return out
}

// subtract is the conv_seqs of sorted, coalesced a that b does not hold.
func subtract(a, b []tinode.SeqRange) []tinode.SeqRange {
	var out []tinode.SeqRange
	j := 0
	for _, r := range a {
		lo, end := r.Low, r.End()
		for j < len(b) && b[j].End() <= lo {
			j++
		}
		for k := j; k < len(b) && b[k].Low < end; k++ {
			if b[k].Low > lo {
				out = append(out, tinode.SeqRange{Low: lo, Hi: b[k].Low})
			}
			lo = max(lo, b[k].End())
		}
		if lo < end {
			out = append(out, tinode.SeqRange{Low: lo, Hi: end})
		}
	}
	return out
}

func (w *Witness) read(conv uint64) bool {
	if _, failed := w.Failed[conv]; failed {
		return true
	}
	return slices.ContainsFunc(w.Heads, func(h ledger.ConvHead) bool { return h.ConvID == conv })
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// readConv reads one topic whole into part: its head, its messages as s's
// user sees them, and for a p2p topic whether each message's recipient
// has read it (the recipient's read mark at or past it).
func (d *Driver) readConv(ctx context.Context, s *tinode.Session, t Topic, now func() time.Duration, part *Witness) error {
	if err := attach(ctx, s, t.Name); err != nil {
		return fmt.Errorf("attach %s: %w", t.Name, err)
	}
	desc, err := s.Desc(ctx, t.Name)
	if err != nil {
		return fmt.Errorf("desc %s: %w", t.Name, err)
	}
	if desc.Seq > MaxSeq {
		return fmt.Errorf("topic %s seq %d past MaxSeq", t.Name, desc.Seq)
	}
	h, err := s.History(ctx, t.Name, 1, desc.Seq+1)
	if err != nil {
		return fmt.Errorf("history %s: %w", t.Name, err)
	}
	read := map[uint64]int64{} // lab uid -> its read mark
	if !d.isGroupConv(t.Conv) {
		ms, err := s.Members(ctx, t.Name)
		if err != nil {
			return fmt.Errorf("members %s: %w", t.Name, err)
		}
		for _, m := range ms {
			read[d.uidOf(m.User)] = m.Read
		}
	}
	at := now()
	for _, m := range h.Messages {
		if err := checkSeq(t.Name, m.Seq); err != nil {
			return err
		}
		sl := ledger.Slot{ConvID: t.Conv, ConvSeq: uint64(m.Seq), MsgID: MsgID(t.Conv, m.Seq),
			Sender: d.uidOf(m.From), Tag: d.cfg.TickOf(m.Tag), At: at}
		for u, mark := range read {
			if u != 0 && u != sl.Sender && mark >= m.Seq {
				sl.IsRead = true
			}
		}
		part.Slots = append(part.Slots, sl)
	}
	part.Heads = append(part.Heads, ledger.ConvHead{ConvID: t.Conv, MaxSeq: uint64(desc.Seq), At: at})
	part.Convs++
	return nil
}

// Write puts the witness into sh: slots, heads, delete ranges, and the
// history-witness notes (one per conversation not read, and the summary,
// Drained: nothing is left to write once the sends ended).
func (w *Witness) Write(sh *ledger.Shard) error {
	for _, x := range w.Slots {
		if err := sh.Slot(x); err != nil {
			return err
		}
	}
	for _, h := range w.Heads {
		sh.ConvHead(h)
	}
	for _, r := range w.Ranges {
		sh.DelRange(r)
	}
	for _, c := range slices.Sorted(maps.Keys(w.Failed)) {
		if err := sh.Note(ledger.Note{Check: CheckHistoryWitness, Conv: c, Reason: w.Failed[c]}); err != nil {
			return err
		}
	}
	return sh.Note(ledger.Note{Check: CheckHistoryWitness, Made: true, Drained: true, Convs: w.Convs})
}
