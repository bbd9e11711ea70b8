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
// (the topic's seq), every message up to it, and its delete log, on at
// most Workers sessions. now stamps the records. A conversation that
// cannot be read is in Failed, never guessed.
//
// Tinode stores a message before it answers the {pub}, and has no tier
// that writes later: once the sends have ended there is nothing to drain
// before reading.
//
// The delete log is read as the reading user sees it (deletes for
// everyone, and its own); the driver deletes nothing, so ranges are what
// the server or another client did, recorded for everyone (UID 0).
func (d *Driver) ReadWitness(ctx context.Context, now func() time.Duration) *Witness {
	plan := d.readPlan()
	w := &Witness{Failed: map[uint64]string{}}
	var mu sync.Mutex
	_ = d.forEach(ctx, len(plan), func(ctx context.Context, ui int) error {
		if len(plan[ui]) == 0 {
			return nil
		}
		var part Witness
		part.Failed = map[uint64]string{}
		s, err := d.login(ctx, ui, "witness")
		if err == nil {
			defer s.Close()
			for _, t := range plan[ui] {
				if err := d.readConv(ctx, s, t, now, &part); err != nil {
					part.Failed[t.Conv] = err.Error()
				}
			}
		} else {
			for _, t := range plan[ui] {
				part.Failed[t.Conv] = err.Error()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		w.Slots = append(w.Slots, part.Slots...)
		w.Heads = append(w.Heads, part.Heads...)
		w.Ranges = append(w.Ranges, part.Ranges...)
		w.Convs += part.Convs
		for c, why := range part.Failed {
			w.Failed[c] = why
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
	slices.SortFunc(w.Slots, func(a, b ledger.Slot) int {
		if a.ConvID != b.ConvID {
			return cmpU(a.ConvID, b.ConvID)
		}
		return cmpU(a.ConvSeq, b.ConvSeq)
	})
	return w
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

// readConv reads one topic whole into part.
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
	dl, err := s.DelLog(ctx, t.Name)
	if err != nil {
		return fmt.Errorf("delete log %s: %w", t.Name, err)
	}
	at := now()
	for _, m := range h.Messages {
		if err := checkSeq(t.Name, m.Seq); err != nil {
			return err
		}
		part.Slots = append(part.Slots, ledger.Slot{ConvID: t.Conv, ConvSeq: uint64(m.Seq), MsgID: MsgID(t.Conv, m.Seq),
			Sender: d.uidOf(m.From), Tag: d.cfg.TickOf(m.Tag), At: at})
	}
	for _, r := range dl.Ranges {
		part.Ranges = append(part.Ranges, ledger.DelRange{ConvID: t.Conv, From: uint64(r.Low), To: uint64(r.End() - 1), At: at})
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
