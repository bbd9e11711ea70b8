package checker

import (
	"cmp"
	"fmt"

	"imlab/checker/conv"
	"imlab/ledger"
)

// This file decides, for each piece of evidence that is not always there
// (the witnesses, the probes), whether its check can be made and over what
// (the rules that need it read the scope it sets in the model).

// evidenceChecks decides every check, in the order Verdict.Checks lists
// them (the conversation's are package conv's: history witness, delete
// log, history pages, conversation pulls).
func (m *model) evidenceChecks() []CheckResult {
	checks := []CheckResult{m.pullWitnessCheck(), m.storeWitnessCheck(), m.readAfterAckCheck()}
	for _, c := range m.cv.Checks(conv.Run{Version: m.version(), Note: m.note, Notes: m.ev.notes}) {
		checks = append(checks, CheckResult(c))
	}
	return append(checks, m.retentionCheck(), m.inboxCheck(), m.retriesCheck(), m.livenessCheck())
}

// note combines the summary notes of a check (nil: none), one per
// generator of the run (the segments of a split run each witness their own
// uids): counts add up; with all, it is made only if every one is (the
// first unmade one's reason explains), else if any one is.
func (m *model) note(check string, all bool) *ledger.Note {
	var n *ledger.Note
	for _, x := range m.ev.notes {
		if x.Check != check || x.UID != 0 || x.Conv != 0 {
			continue
		}
		if n == nil {
			n = &x
			continue
		}
		n.UIDs, n.Errors, n.Probes, n.Convs = n.UIDs+x.UIDs, n.Errors+x.Errors, n.Probes+x.Probes, n.Convs+x.Convs
		n.Drained = n.Drained && x.Drained
		n.Policy = cmp.Or(n.Policy, x.Policy)
		switch {
		case all && n.Made && !x.Made:
			n.Made, n.Reason = false, x.Reason
		case !all && !n.Made && x.Made:
			n.Made, n.Reason = true, ""
		}
	}
	return n
}

// absent says why a check has no note.
func (m *model) absent(what string) string {
	if v := m.version(); v < 2 {
		return fmt.Sprintf("ledger version %d predates the %s", v, what)
	}
	return "the run recorded no " + what
}

// policy is the server's ack policy as a note reports it ("" unknown).
func (m *model) policy() string {
	for _, n := range m.ev.notes {
		if n.Policy != "" {
			return n.Policy
		}
	}
	return ""
}

// pullWitnessCheck: the pull witness feeds skipped (and unexpected,
// reordered, the store-level invariants) beyond what devices stored.
func (m *model) pullWitnessCheck() CheckResult {
	ch := CheckResult{Name: CheckPullWitness, Findings: []string{Skipped}}
	if m.noInbox(&ch) {
		return ch
	}
	n := m.note(CheckPullWitness, true)
	switch {
	case n != nil && !n.Made:
		ch.Detail = n.Reason
	case n != nil:
		ch.Made, ch.Partial = true, n.Errors > 0
		ch.Detail = fmt.Sprintf("%d uids, %d entries", n.UIDs, m.ev.witnessN)
		if n.Errors > 0 {
			ch.Detail += fmt.Sprintf(", %d uids failed", n.Errors)
		}
	case m.ev.witnessN > 0:
		ch.Made, ch.Detail = true, fmt.Sprintf("%d entries", m.ev.witnessN)
	default:
		ch.Detail = "no witness pull in the ledger: skipped is judged from device deliveries only"
	}
	return ch
}

// storeWitnessCheck makes lost-in-store for every uid whose stored inbox
// was read whole.
func (m *model) storeWitnessCheck() CheckResult {
	ch := CheckResult{Name: CheckStoreWitness, Findings: []string{LostInStore}}
	if m.noInbox(&ch) {
		return ch
	}
	n := m.note(CheckStoreWitness, true)
	if n == nil {
		ch.Detail = m.absent("store witness")
		return ch
	}
	if !n.Made {
		ch.Detail = n.Reason
		return ch
	}
	failed := map[uint64]bool{}
	for _, x := range m.ev.notes {
		if x.Check == CheckStoreWitness && x.UID != 0 && !x.Made {
			failed[x.UID] = true
		}
	}
	ch.Made, ch.Partial = true, len(failed) > 0
	ch.Detail = fmt.Sprintf("%d uids, %d entries", n.UIDs, m.ev.storedN)
	if len(failed) > 0 {
		ch.Detail += fmt.Sprintf("; not judged for %d uids whose read failed", len(failed))
	}
	// A uid is judged when its devices are in the ledger (a split run
	// judged --partial lacks some segments' uids) and its read succeeded.
	m.storeJudged = func(u uint64) bool { _, ours := m.ev.uidDevs[u]; return ours && !failed[u] }
	return ch
}

// readAfterAckCheck makes unstored-at-ack from the probes, by the policy's
// promise.
func (m *model) readAfterAckCheck() CheckResult {
	ch := CheckResult{Name: CheckReadAfterAck, Findings: []string{UnstoredAtAck}}
	if m.noInbox(&ch) {
		return ch
	}
	n := m.note(CheckReadAfterAck, false)
	if n == nil {
		ch.Detail = m.absent("read-after-ACK probe")
		return ch
	}
	if !n.Made {
		ch.Detail = n.Reason
		return ch
	}
	pr, ok := promises[n.Policy]
	if !ok {
		ch.Detail = fmt.Sprintf("the server's ack policy %q is unknown to the checker: no promise to hold it to", n.Policy)
		return ch
	}
	if pr == (promise{}) {
		ch.Made, ch.Detail = true, fmt.Sprintf("policy %s promises nothing stored at the ACK", n.Policy)
		return ch
	}
	read, failed := 0, 0
	for _, p := range m.ev.probes {
		if p.Status != ledger.ProbeRead {
			failed++
			continue
		}
		read++
	}
	if read == 0 {
		ch.Detail = fmt.Sprintf("no probe was answered (%d failed)", failed)
		return ch
	}
	ch.Made, ch.Partial = true, failed > 0
	m.promise = &pr
	ch.Detail = fmt.Sprintf("policy %s, %d probes read", n.Policy, read)
	if failed > 0 {
		ch.Detail += fmt.Sprintf(", %d failed", failed)
	}
	return ch
}

// promise is what an ack policy promises is stored at the ACK, for the
// sender and for every recipient: every flag of need, and at least one of
// anyOf (when not 0).
type promise struct{ need, anyOf uint8 }

// promises per ack policy; queue promises nothing stored.
var promises = map[string]promise{
	"strict": {need: ledger.FoundInbox | ledger.FoundContent},
	"store":  {need: ledger.FoundContent},
	"outbox": {need: ledger.FoundContent, anyOf: ledger.FoundOutbox | ledger.FoundInbox},
	"queue":  {},
}

func foundString(f uint8) string {
	var out []string
	for _, x := range []struct {
		bit  uint8
		name string
	}{{ledger.FoundInbox, "inbox row"}, {ledger.FoundContent, "msg_content"}, {ledger.FoundOutbox, "mq_outbox row"}} {
		if f&x.bit != 0 {
			out = append(out, x.name)
		}
	}
	if len(out) == 0 {
		return "nothing"
	}
	return fmt.Sprint(out)
}

// noInbox marks ch unexercised on a target without a per-user inbox (the
// inbox witnesses and probes read it).
func (m *model) noInbox(ch *CheckResult) bool {
	if m.ev.target.Inbox {
		return false
	}
	ch.Unexercised = true
	ch.Detail = fmt.Sprintf("the target (driver %s) keeps no per-user inbox to witness", m.ev.target.Driver)
	return true
}

// unexercised marks ch not made for want of anything to judge, and says
// why: the ledger predates the records, the target does not offer what
// they would show (capability, when not ""), or the run made none (what).
func (m *model) unexercised(ch *CheckResult, capability, what string) {
	ch.Unexercised = true
	ch.Detail = conv.Unexercised(m.version(), m.ev.target, capability, what)
}

// retentionCheck makes the retention findings over the deletions recorded,
// by the settings in force.
func (m *model) retentionCheck() CheckResult {
	ch := CheckResult{Name: CheckRetention, Findings: []string{RetentionUnpulled, RetentionEarly}}
	ev := m.ev
	n := m.note(CheckRetention, true)
	switch {
	case n == nil && len(ev.rt.Settings) == 0 && len(ev.rt.Deletions) == 0:
		m.unexercised(&ch, "", "retention")
		if m.version() >= 3 && !ev.target.Inbox {
			ch.Detail = fmt.Sprintf("the target (driver %s) has no inbox to retain", ev.target.Driver)
		}
		return ch
	case n != nil && !n.Made:
		ch.Detail = n.Reason
		return ch
	case len(ev.rt.Settings) == 0:
		ch.Detail = fmt.Sprintf("%d deletions recorded without the retention settings in force: not judged", len(ev.rt.Deletions))
		return ch
	}
	m.rt.Judge()
	s := ev.rt.Settings[len(ev.rt.Settings)-1]
	ch.Made = true
	ch.Detail = fmt.Sprintf("%d rows deleted; max age %s, pulled min age %s", len(ev.rt.Deletions), s.MaxAge, s.PulledMinAge)
	return ch
}
