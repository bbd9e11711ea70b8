package result

import (
	"fmt"
	"strings"
	"time"
)

// recordRemovals picks the injections that removed records from the
// fan-out topic (by kind, or by the fault's name in results written before
// the kind was recorded).
func recordRemovals(events []FaultEvent) []FaultEvent {
	var out []FaultEvent
	for _, e := range events {
		if e.Action != "inject" || e.Err != "" {
			continue
		}
		// The fault kinds that remove records from the run's topic.
		for _, k := range []string{"kafka_record_loss", "kafka_topic_recreate"} {
			if e.Kind == k || (e.Kind == "" && strings.HasPrefix(e.Fault, k+"(")) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// inboxBehind returns the group's largest lag age over the samples that
// measured it (-1: none did) and whether that age, plus the widest gap
// between those samples (the age grows unseen between two), reached the
// reconciler's grace: a record could then wait unconsumed longer than the
// grace, and reconciliation repair its message before the consumer came
// to it. Unmeasured counts as behind: nothing shows the consumer kept up.
func inboxBehind(lag []LagSample, group string, graceS float64) (float64, bool) {
	peak, gap, last := -1.0, 0.0, -1.0
	for _, l := range lag {
		age, ok := l.MaxAge[group]
		if !l.LagKnown() || !ok || age < 0 {
			continue
		}
		if last >= 0 && l.T-last > gap {
			gap = l.T - last
		}
		last = l.T
		if age > peak {
			peak = age
		}
	}
	if peak < 0 {
		return -1, true
	}
	return peak, peak+gap >= graceS
}

// unaccountedText says what became of the queued messages the consumer
// did not deliver ("" when there are none). When the consumer kept within
// the reconciler's grace they were skipped; when it fell behind, the ones
// repaired may be records it had not reached yet, and the line says the
// lab cannot tell (the lost ones it never delivered at all).
func (s DeadLetterSummary) unaccountedText() string {
	n := len(s.Unaccounted)
	if n == 0 {
		return ""
	}
	if !s.InboxBehind {
		return fmt.Sprintf("; %d queued messages the consumer skipped (neither delivered nor dead-lettered; each repaired later or counted lost above)", n)
	}
	out := ""
	if rep := n - s.UnaccountedLost; rep > 0 {
		grace := time.Duration(s.ReconcileGraceS * float64(time.Second)).String()
		behind := fmt.Sprintf("the inbox consumer was up to %.1fs behind, against the reconciler's %s grace", s.InboxPeakAgeS, grace)
		if s.InboxPeakAgeS < 0 {
			behind = fmt.Sprintf("the inbox consumer's lag was not measured, against the reconciler's %s grace", grace)
		}
		out += fmt.Sprintf("; %d queued messages repaired by reconciliation before the consumer delivered them, none dead-lettered (%s: "+
			"records it had not reached yet cannot be told from records it skipped)", rep, behind)
	}
	if s.UnaccountedLost > 0 {
		out += fmt.Sprintf("; %d queued messages the consumer skipped (neither delivered nor dead-lettered; counted lost above)", s.UnaccountedLost)
	}
	return out
}

// neverQueuedText says what became of the repaired or lost messages whose
// record was not in the fan-out topic at the end ("" when none): removed
// by the run's own faults, named with the records each removed (consumed
// ones too, so not this count), or never published.
func (s DeadLetterSummary) neverQueuedText() string {
	if s.NeverQueued == 0 {
		return ""
	}
	if len(s.RemovedBy) == 0 {
		return fmt.Sprintf("; %d repaired or lost were not in the fan-out topic at the end (never published, or removed by a fault)", s.NeverQueued)
	}
	var by []string
	for _, e := range s.RemovedBy {
		by = append(by, fmt.Sprintf("%s at t=%.1fs removed %d records, consumed or not", e.Fault, e.At, e.Affected))
	}
	return fmt.Sprintf("; %d repaired or lost were not in the fan-out topic at the end: taken out of it by the run's fault (%s), or never published",
		s.NeverQueued, strings.Join(by, "; "))
}
