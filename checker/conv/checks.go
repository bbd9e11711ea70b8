package conv

import (
	"fmt"

	"imlab/ledger"
)

// This file decides, for each piece of the conversation's evidence that is
// not always there (the history witness, the delete log, the pages and
// pulls devices made), whether its check can be made and over what (the
// rules that need it read the scope it sets in the model).

// The findings defined here (package checker names them the same).
const (
	FindHistoryLost        = "history-lost"
	FindDeleteLogDropped   = "delete-log-dropped"
	FindHistoryMismatch    = "history-mismatch"
	FindHistoryOverwritten = "history-overwritten"
	FindHistoryDuplicated  = "history-duplicated"
	FindHistoryView        = "history-view"
	FindConvPull           = "conv-pull"
	FindUnexplainedGap     = "unexplained-gap"
)

// The checks made here, besides HistoryWitness.
const (
	DeleteLog    = "delete-log"
	HistoryPages = "history-pages"
	ConvPulls    = "conv-pulls"
)

// Check says whether a piece of the conversation's evidence was there to
// judge with: package checker's CheckResult, field for field (it converts
// one into the other; its doc says what each field means).
type Check struct {
	Name        string
	Made        bool
	Partial     bool
	Detail      string
	Unexercised bool
	Findings    []string
}

// Run is what the checks read of the run beyond the conversation's
// records: the ledger's format version and its notes (Note combines the
// summary notes of a check, as package checker does for every check).
type Run struct {
	Version int
	Note    func(check string, all bool) *ledger.Note
	Notes   []ledger.Note
}

// Checks decides the conversation's checks, in the order the verdict
// lists them: history witness, delete log, history pages, conversation
// pulls. The history witness's sets the conversations it judges.
func (m *Model) Checks(r Run) []Check {
	return []Check{m.historyWitnessCheck(r), m.deleteLogCheck(r), m.historyPagesCheck(r), m.convPullsCheck(r)}
}

// Unexercised says why a check is not made for want of anything to judge:
// the ledger (of format version) predates the records, the target does
// not offer what they would show (capability, when not ""), or the run
// made none (what).
func Unexercised(version int, target ledger.Capabilities, capability, what string) string {
	switch {
	case version < 3:
		return fmt.Sprintf("ledger version %d predates the records of %s", version, what)
	case capability != "" && !target.Offers(capability):
		return fmt.Sprintf("the target (driver %s) offers no %s", target.Driver, capability)
	}
	return "the run recorded no " + what
}

// unexercised marks ch not made for want of anything to judge
// (Unexercised says why).
func (m *Model) unexercised(r Run, ch *Check, capability, what string) {
	ch.Unexercised = true
	ch.Detail = Unexercised(r.Version, m.target, capability, what)
}

// historyWitnessCheck makes the history findings over every conversation
// the witness read, once the run's note says it read them with the
// history tier drained.
func (m *Model) historyWitnessCheck(r Run) Check {
	ch := Check{Name: HistoryWitness, Findings: []string{FindHistoryLost, FindHistoryMismatch, FindHistoryOverwritten, FindHistoryDuplicated, FindUnexplainedGap}}
	ev := m.ev
	n := r.Note(HistoryWitness, true)
	records := len(ev.Slots) + len(ev.Watermarks) + len(ev.Heads)
	switch {
	case n == nil && records == 0:
		m.unexercised(r, &ch, ledger.ActHistory.String(), "history witness")
		return ch
	case n == nil:
		ch.Detail = fmt.Sprintf("%d history witness records but no note saying the history tier had drained: not judged", records)
		return ch
	case !n.Made:
		ch.Detail = n.Reason
		return ch
	case !n.Drained:
		ch.Detail = "the history tier had not drained when the witness read the store (the note does not say drained): not judged"
		return ch
	}
	failed := map[uint64]bool{}
	for _, x := range r.Notes {
		if x.Check == HistoryWitness && x.Conv != 0 && !x.Made {
			failed[x.Conv] = true
		}
	}
	m.judged = func(c uint64) bool { return !failed[c] }
	ch.Made, ch.Partial = true, len(failed) > 0
	ch.Detail = fmt.Sprintf("%d conversations, %d slots", n.Convs, len(ev.Slots))
	if len(failed) > 0 {
		ch.Detail += fmt.Sprintf("; not judged for %d conversations whose read failed", len(failed))
	}
	return ch
}

// deleteLogCheck makes delete-log-dropped on a target with a delete log,
// over the conversations the history witness judges (it reads the log).
func (m *Model) deleteLogCheck(r Run) Check {
	ch := Check{Name: DeleteLog, Findings: []string{FindDeleteLogDropped}}
	switch {
	case !m.delLog():
		m.unexercised(r, &ch, ledger.DelRangeCapability, "delete log")
	case m.judged == nil:
		ch.Detail = "the history witness, which reads the delete log, was not judged"
	default:
		ch.Made = true
		ch.Detail = fmt.Sprintf("%d ranges read against the deletions answered ok", len(m.ev.DelRanges))
	}
	return ch
}

// actionsCheck is made when some action of kind a was answered OK.
func (m *Model) actionsCheck(r Run, name string, a ledger.Action, outcomes []ledger.Outcome, findings ...string) Check {
	ch := Check{Name: name, Findings: findings}
	if len(outcomes) == 0 {
		m.unexercised(r, &ch, a.String(), a.String()+" action")
		return ch
	}
	ok := 0
	for _, o := range outcomes {
		if o == ledger.OK {
			ok++
		}
	}
	ch.Made = ok > 0
	ch.Detail = fmt.Sprintf("%d answered of %d", ok, len(outcomes))
	if !ch.Made {
		ch.Detail = fmt.Sprintf("none of %d was answered", len(outcomes))
	}
	return ch
}

// historyPagesCheck makes history-view over the pages answered.
func (m *Model) historyPagesCheck(r Run) Check {
	var os []ledger.Outcome
	for _, p := range m.ev.Pages {
		os = append(os, p.Outcome)
	}
	return m.actionsCheck(r, HistoryPages, ledger.ActHistory, os, FindHistoryView, FindHistoryOverwritten, FindHistoryDuplicated)
}

// convPullsCheck makes conv-pull over the conversation pulls answered; on
// a target without an inbox their entries go into the conversation logs
// (Build), so they feed history-overwritten and history-duplicated too.
func (m *Model) convPullsCheck(r Run) Check {
	var os []ledger.Outcome
	for _, p := range m.ev.Pulls {
		os = append(os, p.Outcome)
	}
	findings := []string{FindConvPull}
	if !m.target.Inbox {
		findings = append(findings, FindHistoryOverwritten, FindHistoryDuplicated)
	}
	return m.actionsCheck(r, ConvPulls, ledger.ActConvPull, os, findings...)
}
