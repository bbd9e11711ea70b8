package checker

import (
	"fmt"
	"maps"
	"slices"

	"imlab/checker/conv"
	"imlab/checker/retention"
	"imlab/ledger"
)

// This file holds the rules: one function per finding (the package doc
// defines each; the conversation model's are package conv's, its doc
// defines them), run in the order of rules, each reading the model only
// and marking its own finding only (through the marker it is given).

// rule validates one finding.
type rule struct {
	finding  string
	validate func(m *model, f *marker)
}

// rules in the order they run (the package doc lists them in this order).
var rules = []rule{
	{Unexpected, validateUnexpected},
	{Recovered, validateRecovered},
	{DoubleStored, validateDoubleStored},
	{SeqConflict, validateSeqConflict},
	{AckMismatch, validateAckMismatch},
	{Duplicated, validateDuplicated},
	{Reordered, validateReordered},
	{Lost, validateLost},
	{Skipped, validateSkipped},
	{LostInStore, validateLostInStore},
	{UnstoredAtAck, validateUnstoredAtAck},
	{HistoryLost, onConv(conv.ValidateHistoryLost)},
	{DeleteLogDropped, onConv(conv.ValidateDeleteLogDropped)},
	{HistoryMismatch, onConv(conv.ValidateHistoryMismatch)},
	{HistoryOverwritten, onConv(conv.ValidateHistoryOverwritten)},
	{HistoryDuplicated, onConv(conv.ValidateHistoryDuplicated)},
	{HistoryView, onConv(conv.ValidateHistoryView)},
	{ConvPullWrong, onConv(conv.ValidateConvPull)},
	{RetentionUnpulled, onRetention(retention.ValidateRetentionUnpulled)},
	{RetentionEarly, onRetention(retention.ValidateRetentionEarly)},
	{FailedButStored, validateFailedButStored},
	{RefusedAfterHeal, onConv(conv.ValidateRefusedAfterHeal)},
	{UnexplainedGap, onConv(conv.ValidateUnexplainedGap)},
	{RetryDuplicate, validateRetryDuplicate},
}

// onConv runs a rule of the conversation model (package conv) on m's.
func onConv(validate func(*conv.Model, conv.Marker)) func(*model, *marker) {
	return func(m *model, f *marker) { validate(m.cv, f) }
}

// onRetention runs a rule of retention (package retention) on m's.
func onRetention(validate func(*retention.Model, retention.Marker)) func(*model, *marker) {
	return func(m *model, f *marker) { validate(m.rt, f) }
}

// validateUnexpected: every message the model could not account for, or
// found where it is not addressed.
func validateUnexpected(m *model, f *marker) {
	for _, u := range m.unexpected {
		f.Mark(u.msg, 0, "%s", u.explain())
	}
}

// explain says in words why a message is unexpected.
func (u unexplained) explain() string {
	var where string // where it was seen, for the reasons that name it
	switch {
	case u.src == "device":
		where = fmt.Sprintf("device %d", u.id)
	case u.conv != 0 && u.id != 0:
		where = fmt.Sprintf("conv %d's history (%s %d)", u.conv, u.src, u.id)
	case u.conv != 0:
		where = fmt.Sprintf("conv %d's history (%s)", u.conv, u.src)
	case u.id != 0 && u.why != whyNotRecipient:
		where = fmt.Sprintf("an inbox (%s %d)", u.src, u.id)
	default:
		where = fmt.Sprintf("an inbox (%s)", u.src)
	}
	dev := u.src == "device"
	switch {
	case u.why == whyAckedTwice:
		return fmt.Sprintf("msg_id %d ACKed for two sends (ticks %d and %d)", u.msg, u.tick, u.other)
	case u.why == whySecondOfSend && dev:
		return fmt.Sprintf("msg_id %d and %d both carry send %d (one client_msg_id, two messages)", u.other, u.msg, u.tick)
	case u.why == whySecondOfSend:
		return fmt.Sprintf("msg_id %d and %d both carry send %d (one client_msg_id, two messages; %s)", u.other, u.msg, u.tick, u.src)
	case u.why == whyOtherOfAcked && dev:
		return fmt.Sprintf("device %d stored msg_id %d for send %d, whose ACK said msg_id %d (one client_msg_id, two messages)", u.id, u.msg, u.tick, u.other)
	case u.why == whyOtherOfAcked:
		return fmt.Sprintf("msg_id %d is in %s for send %d, whose ACK said msg_id %d (one client_msg_id, two messages)", u.msg, where, u.tick, u.other)
	case u.why == whyNotRecipient && dev:
		return fmt.Sprintf("device %d (uid %d) stored msg_id %d addressed to uids %v", u.id, u.other, u.msg, u.rcpt)
	case u.why == whyNotRecipient:
		return fmt.Sprintf("msg_id %d is in uid %d's inbox (%s) but addressed to uids %v", u.msg, u.other, u.src, u.rcpt)
	case dev:
		return fmt.Sprintf("device %d stored msg_id %d (seq %d) that no ACK names", u.id, u.msg, u.seq)
	}
	return fmt.Sprintf("msg_id %d is in %s but no ACK or unknown send explains it", u.msg, where)
}

// validateRecovered: the messages of sends of unknown outcome.
func validateRecovered(m *model, f *marker) {
	for msg := range m.recovered {
		f.Add(msg)
	}
}

// validateDoubleStored: one msg_id at two seqs of one uid's inbox.
func validateDoubleStored(m *model, f *marker) {
	for _, d := range m.doubles {
		f.Pair()
		f.Mark(d.msg, d.uid, "msg_id %d at seq %d and at seq %d of uid %d's inbox (%s %d)", d.msg, d.first, d.seq, d.uid, d.src, d.id)
	}
}

// validateSeqConflict: one (uid, seq) seen holding two msg_ids. Both are
// listed.
func validateSeqConflict(m *model, f *marker) {
	for _, c := range m.conflicts {
		f.Pair()
		f.Mark(c.msg, c.uid, "uid %d seq %d held msg_id %d, then msg_id %d (%s %d)", c.uid, c.seq, c.first, c.msg, c.src, c.id)
		f.Add(c.first)
	}
}

// validateAckMismatch: an observed entry of an ACKed msg_id whose conv_id
// or conv_seq differs from the ACK's.
func validateAckMismatch(m *model, f *marker) {
	for _, x := range m.mismatches {
		a := m.ev.acks[x.msg]
		f.Mark(x.msg, 0, "msg_id %d ACKed as conv %d conv_seq %d, seen by %s %d as conv %d conv_seq %d", x.msg, a.conv, a.convSeq, x.src, x.id, x.conv, x.convSeq)
	}
}

// validateDuplicated: a device stored the same (msg_id, seq) again.
// Allowed; counted per extra copy.
func validateDuplicated(m *model, f *marker) {
	for msg := range m.dupMsgs {
		f.Add(msg)
	}
	f.Count(m.dupCopies)
}

// validateReordered: within one device, or one witnessed inbox, and one
// conversation, conv_seq must strictly increase (repeats dropped).
func validateReordered(m *model, f *marker) {
	for _, o := range m.reorders {
		if o.src == "device" {
			f.Mark(o.msg, 0, "device %d: conv %d seq %d (msg_id %d) after conv_seq %d", o.id, o.conv, o.convSeq, o.msg, o.last)
			continue
		}
		f.Mark(o.msg, o.id, "%s of uid %d: conv %d conv_seq %d (msg_id %d) at seq %d after conv_seq %d at seq %d",
			o.src, o.id, o.conv, o.convSeq, o.msg, o.seq, o.last, o.lastSeq)
	}
}

// validateLost: an ACKed or recovered message missing on some recipient
// device.
// When the run's inbox-tier note says the tier had not drained by the
// end of the final drain, each such message says it may be late rather
// than lost (it still counts: a message that never arrived by the run's
// end was not delivered).
func validateLost(m *model, f *marker) {
	late := ""
	if n := m.note(ledger.InboxTierCheck, true); n != nil && n.Made && !n.Drained {
		late = " (the inbox tier had not drained by the end of the final drain: " + n.Reason + "; it may be late rather than lost)"
	}
	for _, msg := range slices.Sorted(maps.Keys(m.missing)) {
		for _, x := range m.missing[msg] {
			f.Pair()
			f.Mark(msg, 0, "msg_id %d never reached device %d (uid %d)%s", msg, x.dev, x.uid, late)
		}
	}
}

// validateSkipped: a claimed cursor past an inbox entry the device never
// stored (not one retention.GoneBeforeKnown).
func validateSkipped(m *model, f *marker) {
	for _, id := range slices.Sorted(maps.Keys(m.ev.claims)) {
		claim, ds := m.ev.claims[id], m.devs[id]
		ib := m.inbox[ds.uid]
		if ib == nil {
			continue
		}
		for msg, seq := range ib.seqOf {
			if _, ok := ds.got[msg]; seq <= claim && !ok && !m.rt.GoneBeforeKnown(ds.uid, msg, id) {
				f.Pair()
				f.Mark(msg, 0, "device %d acked cursor %d but never stored msg_id %d at seq %d", id, claim, msg, seq)
			}
		}
	}
}

// validateLostInStore: an ACKed or recovered message missing from the
// stored inbox of a recipient uid whose store witness was read whole, and
// not deleted there by the server's retention (the retention findings
// judge that deletion).
func validateLostInStore(m *model, f *marker) {
	if m.storeJudged == nil {
		return
	}
	check := func(msg uint64, s send) {
		for _, u := range m.ev.recipients(s) {
			if m.storeJudged(u) && !m.stored[u][msg] && !m.rt.RetainedMsg(u, msg) {
				f.Pair()
				f.Mark(msg, u, "msg_id %d is not in uid %d's stored inbox (store witness)", msg, u)
			}
		}
	}
	for msg, a := range m.ev.acks {
		check(msg, m.ev.sends[a.tick])
	}
	for msg, tick := range m.recovered {
		check(msg, m.ev.unknown[tick])
	}
}

// validateUnstoredAtAck: a read-after-ACK probe that found less than the
// policy promises, unless retention's log says it had deleted the uid's
// inbox row of the message by the time the probe's answer came (a probe
// late on a loaded machine can read after an early deletion).
func validateUnstoredAtAck(m *model, f *marker) {
	pr := m.promise
	if pr == nil {
		return
	}
	for _, p := range m.ev.probes {
		if p.Status != ledger.ProbeRead || (p.Found&pr.need == pr.need && (pr.anyOf == 0 || p.Found&pr.anyOf != 0)) {
			continue
		}
		if p.Found&ledger.FoundInbox == 0 && m.rt.RetainedMsgBy(p.UID, p.MsgID, p.At) {
			continue
		}
		f.Pair()
		f.Mark(p.MsgID, p.UID, "msg_id %d: %s after its ACK the store held %s for uid %d",
			p.MsgID, p.At-m.ev.acks[p.MsgID].ended, foundString(p.Found), p.UID)
	}
}
