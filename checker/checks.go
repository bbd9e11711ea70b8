package checker

import (
	"cmp"
	"fmt"

	"imlab/ledger"
)

// This file decides, for each piece of evidence that is not always there
// (the witnesses, the probes), whether its check can be made, and makes it.

// note combines the summary notes of a check (nil: none), one per
// generator of the run (the segments of a split run each witness their own
// uids): counts add up; with all, it is made only if every one is (the
// first unmade one's reason explains), else if any one is.
func (c *collector) note(check string, all bool) *ledger.Note {
	var n *ledger.Note
	for _, x := range c.notes {
		if x.Check != check || x.UID != 0 {
			continue
		}
		if n == nil {
			n = &x
			continue
		}
		n.UIDs, n.Errors, n.Probes = n.UIDs+x.UIDs, n.Errors+x.Errors, n.Probes+x.Probes
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
func (c *collector) absent(what string) string {
	if c.version < 2 {
		return fmt.Sprintf("ledger version %d predates the %s", c.version, what)
	}
	return "the run recorded no " + what
}

// policy is the server's ack policy as a note reports it ("" unknown).
func (c *collector) policy() string {
	for _, n := range c.notes {
		if n.Policy != "" {
			return n.Policy
		}
	}
	return ""
}

// pullWitnessCheck: the pull witness feeds skipped (and unexpected,
// reordered, the store-level invariants) beyond what devices stored.
func (c *collector) pullWitnessCheck() CheckResult {
	ch := CheckResult{Name: CheckPullWitness, Findings: []string{Skipped}}
	n := c.note(CheckPullWitness, true)
	switch {
	case n != nil && !n.Made:
		ch.Detail = n.Reason
	case n != nil:
		ch.Made, ch.Partial = true, n.Errors > 0
		ch.Detail = fmt.Sprintf("%d uids, %d entries", n.UIDs, c.witness)
		if n.Errors > 0 {
			ch.Detail += fmt.Sprintf(", %d uids failed", n.Errors)
		}
	case c.witness > 0:
		ch.Made, ch.Detail = true, fmt.Sprintf("%d entries", c.witness)
	default:
		ch.Detail = "no witness pull in the ledger: skipped is judged from device deliveries only"
	}
	return ch
}

// storeWitnessCheck makes lost-in-store for every uid whose stored inbox
// was read whole.
func (c *collector) storeWitnessCheck() CheckResult {
	ch := CheckResult{Name: CheckStoreWitness, Findings: []string{LostInStore}}
	n := c.note(CheckStoreWitness, true)
	if n == nil {
		ch.Detail = c.absent("store witness")
		return ch
	}
	if !n.Made {
		ch.Detail = n.Reason
		return ch
	}
	failed := map[uint64]bool{}
	for _, x := range c.notes {
		if x.Check == CheckStoreWitness && x.UID != 0 && !x.Made {
			failed[x.UID] = true
		}
	}
	ch.Made, ch.Partial = true, len(failed) > 0
	ch.Detail = fmt.Sprintf("%d uids, %d entries", n.UIDs, c.storeN)
	if len(failed) > 0 {
		ch.Detail += fmt.Sprintf("; not judged for %d uids whose read failed", len(failed))
	}
	// A uid is judged when its devices are in the ledger (a split run
	// judged --partial lacks some segments' uids) and its read succeeded.
	judged := func(u uint64) bool { _, ours := c.uidDevs[u]; return ours && !failed[u] }
	for m, a := range c.acks {
		c.lostInStore(m, c.sends[a.tick], judged)
	}
	for m, tick := range c.recovered {
		c.lostInStore(m, c.unknown[tick], judged)
	}
	return ch
}

// readAfterAckCheck makes unstored-at-ack from the probes, by the policy's
// promise.
func (c *collector) readAfterAckCheck() CheckResult {
	ch := CheckResult{Name: CheckReadAfterAck, Findings: []string{UnstoredAtAck}}
	n := c.note(CheckReadAfterAck, false)
	if n == nil {
		ch.Detail = c.absent("read-after-ACK probe")
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
	for _, p := range c.probes {
		if p.Status != ledger.ProbeRead {
			failed++
			continue
		}
		read++
		c.unstoredAtAck(p, pr)
	}
	if read == 0 {
		ch.Detail = fmt.Sprintf("no probe was answered (%d failed)", failed)
		return ch
	}
	ch.Made, ch.Partial = true, failed > 0
	ch.Detail = fmt.Sprintf("policy %s, %d probes read", n.Policy, read)
	if failed > 0 {
		ch.Detail += fmt.Sprintf(", %d failed", failed)
	}
	return ch
}
