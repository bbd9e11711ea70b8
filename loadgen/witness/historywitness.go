package witness

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"imlab/ledger"
	"imlab/loadgen/summary"
	"imlab/targets"
)

// This file holds the end of a run with the client mix: the history
// witness (every conversation an ACK named, read as stored through the
// target's lab view once its history tier has drained) and the retention
// log (every inbox row the target's retention deleted, and its rules).

// Check names of the notes (the checker's).
const (
	checkHistoryWitness = "history-witness"
	checkRetention      = "retention"
)

// Bounds of the history witness.
const (
	// historyDrainWait bounds the wait for the history tier to drain.
	historyDrainWait = 30 * time.Second
	// historyDrainPoll is how often the queue lag is read meanwhile.
	historyDrainPoll = 200 * time.Millisecond
	// maxWitnessSeqs bounds the conv_seqs read of one conversation.
	maxWitnessSeqs = 100_000
	// maxLabTries bounds the tries of one read of the history witness or
	// the retention log (the whole witness is bounded by DrainTimeout).
	maxLabTries = 5
)

// historyDrained waits (bounded) until the target's queue lag says every
// consumer group has nothing left to process, the history tier's
// included. It answers false when that was not seen, with why.
func (w *Witness) historyDrained(ctx context.Context) (bool, string) {
	if w.env.Lab == nil {
		return false, "the " + w.env.Drv.Name() + " driver reads no queue lag: whether the history tier drained is unknown"
	}
	ctx, cancel := context.WithTimeout(ctx, historyDrainWait)
	defer cancel()
	last := ""
	for {
		q, err := w.env.Lab.QueueLag(ctx)
		switch {
		case err != nil:
			last = err.Error()
		case len(q.Records) == 0:
			return false, "the target's queue lag names no consumer group: no history tier to drain"
		default:
			behind := 0
			for g, n := range q.Records {
				if n != 0 || q.UnknownAge[g] != 0 {
					behind++
				}
			}
			if behind == 0 && len(q.Errors) == 0 {
				return true, ""
			}
			last = fmt.Sprintf("%d consumer groups still behind", behind)
		}
		select {
		case <-time.After(historyDrainPoll):
		case <-ctx.Done():
			return false, fmt.Sprintf("the history tier had not drained after %s (%s)", historyDrainWait, last)
		}
	}
}

// History is the history witness: it reads every conversation of book
// (each an ACK of this run named), as stored, and records its slots,
// clear watermarks and head. The whole witness is bounded by bound: a
// conversation not read by then is not judged (a note says so).
func (w *Witness) History(parent context.Context, sum *summary.Summary, book *ConvBook, bound time.Duration) {
	ctx, cancel := context.WithTimeout(parent, bound)
	defer cancel()
	hs := &summary.HistorySum{}
	sum.Evidence.History = hs
	convs := book.snapshot()
	ids := make([]uint64, 0, len(convs))
	for id := range convs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if len(ids) > 0 && w.historyAbsent(ctx, ids[0], convs[ids[0]]) {
		// No note: the checker reads the history check as not exercised
		// (nothing to witness), not as a witness that failed.
		hs.Reason = "the target has no history store to witness (its lab history read answered 501): " + w.env.Drv.Name()
		return
	}
	began := time.Now()
	drained, why := w.historyDrained(ctx)
	hs.Drained, hs.Waited = drained, time.Since(began).Round(time.Millisecond).String()
	var mu sync.Mutex
	var firstErr error
	noLab, noStore := false, false
	done := make([]bool, len(ids))
	_ = ForEach(ctx, len(ids), func(i int) error {
		id := ids[i]
		slots, invalid, err := w.witnessConv(ctx, i, id, convs[id])
		mu.Lock()
		defer mu.Unlock()
		done[i] = true
		hs.Slots += slots
		hs.Invalid += invalid
		if errors.Is(err, errNoLab) {
			noLab = true
			return nil
		}
		if errors.Is(err, errNotImplemented) {
			noStore = true
			return nil
		}
		if err != nil {
			hs.Errors++
			if firstErr == nil {
				firstErr = err
			}
			w.Note(ledger.Note{Check: checkHistoryWitness, Conv: id, Reason: err.Error()})
			return nil
		}
		hs.Convs++
		return nil
	})
	// A conversation never read is not judged (as one whose read failed).
	for i, id := range ids {
		if !done[i] && !noLab {
			hs.Errors++
			w.Note(ledger.Note{Check: checkHistoryWitness, Conv: id, Reason: "not read before the history witness's bound"})
		}
	}
	n := ledger.Note{Check: checkHistoryWitness, Convs: hs.Convs, Errors: hs.Errors, Drained: drained}
	switch {
	case parent.Err() != nil:
		n.Reason = "the run was cancelled during the history witness"
	case ctx.Err() != nil && hs.Convs == 0:
		n.Reason = fmt.Sprintf("the history witness read no conversation within %s", bound)
	case ctx.Err() != nil:
		n.Made, n.Reason = drained, fmt.Sprintf("the history witness read %d of %d conversations within %s; the others are not judged", hs.Convs, len(ids), bound)
	case noLab:
		n.Reason = "the target offers no history witness (no lab route): " + w.env.Drv.Name()
	case noStore:
		n.Reason = "the target has no history store to witness (its lab history read answered 501): " + w.env.Drv.Name()
	case len(ids) > 0 && hs.Convs == 0:
		n.Reason = fmt.Sprintf("the history witness failed for every conversation (e.g. %v)", firstErr)
	case !drained:
		n.Made, n.Reason = true, why
	default:
		n.Made = true
	}
	hs.Made, hs.Reason = n.Made, n.Reason
	w.Note(n)
}

// historyAbsent reads conv_seq 1 of one conversation once, before the
// wait for the history tier: a 501 says the target has no history store
// at all (the reference server without MongoDB), so there is nothing to
// wait for or to read; the run then writes no history witness note.
func (w *Witness) historyAbsent(ctx context.Context, id uint64, e convEntry) bool {
	s, err := w.env.Drv.Session(ctx, e.reader, DID)
	if err != nil {
		return false
	}
	hr, ok := s.(targets.LabHistoryReader)
	if !ok {
		return false
	}
	_, err = hr.LabHistory(ctx, targets.HistoryOpts{ConvID: id, From: 1, To: 1})
	return targets.StatusOf(err) == 501
}

// witnessConv reads one conversation 1..head in ranges of
// targets.MaxHistoryRange with the token of a party or member.
func (w *Witness) witnessConv(ctx context.Context, i int, id uint64, e convEntry) (slots, invalid int, err error) {
	s, err := w.env.Drv.Session(ctx, e.reader, DID)
	if err != nil {
		return 0, 0, err
	}
	hr, ok := s.(targets.LabHistoryReader)
	if !ok {
		return 0, 0, errNoLab
	}
	sh := w.env.Ledger.Shard(i)
	head := e.maxSeq
	for from := uint64(1); from <= head && from <= maxWitnessSeqs; from += targets.MaxHistoryRange {
		to := min(from+targets.MaxHistoryRange-1, max(head, from))
		h, err := labRead(ctx, maxLabTries, func() (targets.StoredHistory, error) {
			return hr.LabHistory(ctx, targets.HistoryOpts{ConvID: id, From: from, To: to})
		})
		if err != nil {
			return slots, invalid, err
		}
		at := time.Since(w.env.Start)
		for _, x := range h.Slots {
			if x.Invalid {
				invalid++
				continue
			}
			tag, _, _ := w.env.Parse(x.Content)
			sl := ledger.Slot{ConvID: id, ConvSeq: x.ConvSeq, MsgID: x.MsgID, Sender: x.SenderUID, Tag: tag,
				Revoked: x.Revoked, Purged: x.Purged, IsRead: x.IsRead, DelList: x.DelList, At: at}
			if x.Purged {
				sl.MsgID, sl.Sender, sl.Tag = 0, 0, 0
			}
			if err := sh.Slot(sl); err != nil {
				return slots, invalid, err
			}
			slots++
		}
		if from == 1 {
			for uid, m := range h.Clears {
				sh.Watermark(ledger.Watermark{ConvID: id, UID: uid, MinSeq: m, At: at})
			}
		}
		head = max(head, h.MaxSeq)
	}
	sh.ConvHead(ledger.ConvHead{ConvID: id, MaxSeq: head, At: time.Since(w.env.Start)})
	return slots, invalid, nil
}

// Retention records the target's retention rules and the rows of this
// run's users (ours) it deleted, on the ledger's time base (the target's
// clock corrected by the offset measured before the run).
func (w *Witness) Retention(ctx context.Context, sum *summary.Summary, ours func(uid uint64) bool) {
	rs := &summary.RetentionSum{}
	sum.Evidence.Retention = rs
	rr, ok := w.env.Drv.(targets.RetentionReader)
	if !ok {
		rs.Reason = "the " + w.env.Drv.Name() + " driver reads no retention log"
		return
	}
	log, err := readRetry(ctx, maxLabTries, func() (targets.RetentionLog, error) { return rr.Retention(ctx) })
	switch {
	case err != nil && targets.StatusOf(err) == 404:
		rs.Reason = "the target has no retention lab route (404)"
		return
	case err != nil:
		rs.Reason = err.Error()
		w.Note(ledger.Note{Check: checkRetention, Reason: "reading the retention log: " + err.Error()})
		return
	case !log.Active:
		rs.Reason = "the target runs no retention"
		return
	}
	var offset time.Duration
	if c := sum.Split.Clock; c != nil {
		offset = c.Offset
	}
	on := func(t time.Time) time.Duration { return t.Add(-offset).Sub(w.env.Start) }
	sh := w.env.Ledger.Shard(0)
	sh.Retention(ledger.RetentionSettings{MaxAge: log.MaxAge, PulledMinAge: log.PulledMinAge, Interval: log.Interval})
	for _, x := range log.Rows {
		if !ours(x.UID) {
			continue // another run's user
		}
		reason := ledger.RetentionExpired
		if x.Pulled {
			reason = ledger.RetentionPulled
		}
		sh.Deletion(ledger.Deletion{UID: x.UID, Seq: x.Seq, MsgID: x.MsgID, CreatedAt: on(x.CreatedAt), DeletedAt: on(x.DeletedAt), Reason: reason})
		rs.Deletions++
	}
	n := ledger.Note{Check: checkRetention, Made: !log.Truncated}
	if log.Truncated {
		n.Reason = "the target's retention log was truncated: not every deletion is known"
	}
	rs.Made, rs.Reason = n.Made, n.Reason
	w.Note(n)
}
