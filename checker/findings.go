package checker

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"imlab/ledger"
)

// This file holds one function per finding (see the package doc for the
// definitions) and the verdict that runs them.

// observe records that observation src (src+" "+id names it) saw msg_id m
// at (uid, seq), and judges the two store-level invariants every
// observation can break: double-stored and seq-conflict.
func (c *collector) observe(uid, seq, m uint64, src string, id uint64) {
	ib := c.inbox[uid]
	if ib == nil {
		ib = &inboxObs{seqOf: map[uint64]uint64{}, at: map[uint64]uint64{}}
		c.inbox[uid] = ib
	}
	if first, ok := ib.seqOf[m]; !ok {
		ib.seqOf[m] = seq
	} else if first != seq {
		c.doubleStored(uid, m, first, seq, src, id)
	}
	if other, ok := ib.at[seq]; !ok {
		ib.at[seq] = m
	} else if other != m {
		c.seqConflict(uid, seq, other, m, src, id)
	}
}

// doubleStored: one msg_id at two seqs of one uid's inbox.
func (c *collector) doubleStored(uid, m, first, seq uint64, src string, id uint64) {
	c.f[DoubleStored].Pairs++
	c.mark(DoubleStored, m, uid, "msg_id %d at seq %d and at seq %d of uid %d's inbox (%s %d)", m, first, seq, uid, src, id)
}

// seqConflict: one (uid, seq) seen holding two msg_ids. Both are listed.
func (c *collector) seqConflict(uid, seq, first, m uint64, src string, id uint64) {
	c.f[SeqConflict].Pairs++
	c.mark(SeqConflict, m, uid, "uid %d seq %d held msg_id %d, then msg_id %d (%s %d)", uid, seq, first, m, src, id)
	c.sets[SeqConflict][first] = true
}

// ackMismatch: an observed entry of an ACKed msg_id whose conv_id or
// conv_seq differs from the ACK's.
func (c *collector) ackMismatch(m, conv, convSeq uint64, src string, id uint64) {
	a, ok := c.acks[m]
	if !ok || (a.conv == conv && a.convSeq == convSeq) {
		return
	}
	c.mark(AckMismatch, m, 0, "msg_id %d ACKed as conv %d conv_seq %d, seen by %s %d as conv %d conv_seq %d", m, a.conv, a.convSeq, src, id, conv, convSeq)
}

// delivery judges one stored message, in its device's order (a device's
// records are all in one shard, in order).
func (c *collector) delivery(d *ledger.Delivery) {
	ds := c.dev(d.Dev)
	c.observe(ds.uid, d.Seq, d.MsgID, "device", uint64(d.Dev))
	c.ackMismatch(d.MsgID, d.ConvID, d.ConvSeq, "device", uint64(d.Dev))
	if first, seen := ds.recv[d.MsgID]; seen {
		if first == d.Seq {
			c.duplicated(d)
		} // else: double-stored, judged by observe
		return
	}
	ds.recv[d.MsgID] = d.Seq
	ds.firstSeen[d.MsgID] = d.At
	if a, ok := c.acks[d.MsgID]; ok {
		c.hist["end_to_end"].RecordValue(us(d.At - a.intended))
	}
	if rcpt := c.explainDelivery(d); rcpt != nil && !contains(rcpt, ds.uid) {
		c.mark(Unexpected, d.MsgID, 0, "device %d (uid %d) stored msg_id %d addressed to uids %v", d.Dev, ds.uid, d.MsgID, rcpt)
	}
	c.reorderedOnDevice(ds, d)
}

// duplicated: a device stored the same (msg_id, seq) again. Allowed.
func (c *collector) duplicated(d *ledger.Delivery) {
	c.f[Duplicated].Count++
	c.sets[Duplicated][d.MsgID] = true
}

// explainDelivery returns the recipients of a delivered message: from its
// ACK, or from the send of unknown outcome its content names (then the
// message is recovered). A message nothing explains is unexpected (nil).
func (c *collector) explainDelivery(d *ledger.Delivery) []uint64 {
	if a, ok := c.acks[d.MsgID]; ok {
		return c.recipients(c.sends[a.tick])
	}
	if s, ok := c.unknown[d.Tick]; ok && d.Tick != 0 {
		if prev, seen := c.recTick[d.Tick]; seen && prev != d.MsgID {
			c.mark(Unexpected, d.MsgID, 0, "msg_id %d and %d both carry send %d (one client_msg_id, two messages)", prev, d.MsgID, d.Tick)
		} else if !seen {
			c.recTick[d.Tick] = d.MsgID
			c.recovered[d.MsgID] = d.Tick
		}
		return c.recipients(s)
	}
	if m, acked := c.ackByTick[d.Tick]; acked && d.Tick != 0 {
		c.mark(Unexpected, d.MsgID, 0, "device %d stored msg_id %d for send %d, whose ACK said msg_id %d (one client_msg_id, two messages)", d.Dev, d.MsgID, d.Tick, m)
	} else {
		c.mark(Unexpected, d.MsgID, 0, "device %d stored msg_id %d (seq %d) that no ACK names", d.Dev, d.MsgID, d.Seq)
	}
	return nil
}

// reorderedOnDevice: within one device and one conversation, conv_seq
// must strictly increase in the order the device stored (repeats dropped).
func (c *collector) reorderedOnDevice(ds *devState, d *ledger.Delivery) {
	if last, ok := ds.lastConv[d.ConvID]; ok && d.ConvSeq <= last {
		c.mark(Reordered, d.MsgID, 0, "device %d: conv %d seq %d (msg_id %d) after conv_seq %d", d.Dev, d.ConvID, d.ConvSeq, d.MsgID, last)
		return
	}
	ds.lastConv[d.ConvID] = d.ConvSeq
}

// reorderedInInbox: within one witnessed inbox and one conversation,
// conv_seq must strictly increase in seq order (repeated msg_ids dropped).
func (c *collector) reorderedInInbox(src string, uid uint64, es []entry) {
	sort.Slice(es, func(i, j int) bool { return es[i].seq < es[j].seq })
	seen := map[uint64]bool{}
	last := map[uint64]entry{}
	for _, e := range es {
		if seen[e.msgID] {
			continue
		}
		seen[e.msgID] = true
		if l, ok := last[e.conv]; ok && e.convSeq <= l.convSeq {
			c.mark(Reordered, e.msgID, uid, "%s of uid %d: conv %d conv_seq %d (msg_id %d) at seq %d after conv_seq %d at seq %d",
				src, uid, e.conv, e.convSeq, e.msgID, e.seq, l.convSeq, l.seq)
			continue
		}
		last[e.conv] = e
	}
}

// explainWitnessed judges a msg_id that a witness saw: a message of unknown
// outcome that only a witness saw is recovered (and then lost on every
// device); one that no send explains, or that sits in the inbox of a uid it
// is not addressed to, is unexpected.
func (c *collector) explainWitnessed(m uint64, x *witnessed) {
	var rcpt []uint64
	if a, ok := c.acks[m]; ok {
		rcpt = c.recipients(c.sends[a.tick])
	} else if tick, ok := c.recovered[m]; ok {
		rcpt = c.recipients(c.unknown[tick])
	} else if s, ok := c.unknown[x.tick]; ok && x.tick != 0 {
		if prev, seen := c.recTick[x.tick]; seen && prev != m {
			c.mark(Unexpected, m, 0, "msg_id %d and %d both carry send %d (one client_msg_id, two messages; %s)", prev, m, x.tick, x.src[0])
			return
		}
		c.recTick[x.tick] = m
		c.recovered[m] = x.tick
		rcpt = c.recipients(s)
	} else {
		if ackd, ok := c.ackByTick[x.tick]; ok && x.tick != 0 {
			c.mark(Unexpected, m, 0, "msg_id %d is in an inbox (%s) for send %d, whose ACK said msg_id %d (one client_msg_id, two messages)", m, x.src[0], x.tick, ackd)
		} else {
			c.mark(Unexpected, m, 0, "msg_id %d is in an inbox (%s) but no ACK or unknown send explains it", m, x.src[0])
		}
		return
	}
	for i, u := range x.uids {
		if !contains(rcpt, u) {
			c.mark(Unexpected, m, 0, "msg_id %d is in uid %d's inbox (%s) but addressed to uids %v", m, u, x.src[i], rcpt)
			return
		}
	}
}

// lost: an ACKed or recovered message missing on some recipient device.
// It returns whether every recipient device stored it.
func (c *collector) lost(m uint64, s sendInfo) bool {
	complete := true
	for _, u := range c.recipients(s) {
		for _, dv := range c.uidDevs[u] {
			if _, ok := c.devices[dv].recv[m]; !ok {
				complete = false
				c.f[Lost].Pairs++
				c.mark(Lost, m, 0, "msg_id %d never reached device %d (uid %d)", m, dv, u)
			}
		}
	}
	return complete
}

// lostInStore: an ACKed or recovered message missing from the stored inbox
// of a recipient uid whose store witness was read whole (judged).
func (c *collector) lostInStore(m uint64, s sendInfo, judged func(uid uint64) bool) {
	for _, u := range c.recipients(s) {
		if judged(u) && !c.stored[u][m] {
			c.f[LostInStore].Pairs++
			c.mark(LostInStore, m, u, "msg_id %d is not in uid %d's stored inbox (store witness)", m, u)
		}
	}
}

// skipped: a claimed cursor past an inbox entry the device never stored.
func (c *collector) skipped(id uint32, ds *devState) {
	ib := c.inbox[ds.uid]
	if !ds.hasClaim || ib == nil {
		return
	}
	for m, seq := range ib.seqOf {
		if _, ok := ds.recv[m]; seq <= ds.claimed && !ok {
			c.f[Skipped].Pairs++
			c.mark(Skipped, m, 0, "device %d acked cursor %d but never stored msg_id %d at seq %d", id, ds.claimed, m, seq)
		}
	}
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

// unstoredAtAck: a read-after-ACK probe that found less than the policy
// promises.
func (c *collector) unstoredAtAck(p ledger.Probe, pr promise) {
	if p.Found&pr.need == pr.need && (pr.anyOf == 0 || p.Found&pr.anyOf != 0) {
		return
	}
	c.f[UnstoredAtAck].Pairs++
	c.mark(UnstoredAtAck, p.MsgID, p.UID, "msg_id %d: %s after its ACK the store held %s for uid %d",
		p.MsgID, p.At-c.acks[p.MsgID].ended, foundString(p.Found), p.UID)
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

func (c *collector) verdict() *Verdict {
	for _, m := range slices.Sorted(maps.Keys(c.witnessed)) {
		c.explainWitnessed(m, c.witnessed[m])
	}
	for _, uid := range slices.Sorted(maps.Keys(c.wEntries)) {
		c.reorderedInInbox(CheckPullWitness, uid, c.wEntries[uid])
	}
	for _, uid := range slices.Sorted(maps.Keys(c.sEntries)) {
		c.reorderedInInbox(CheckStoreWitness, uid, c.sEntries[uid])
	}
	okCount := 0
	for m, a := range c.acks {
		if c.lost(m, c.sends[a.tick]) {
			okCount++
		}
	}
	for m, tick := range c.recovered {
		c.lost(m, c.unknown[tick])
	}
	checks := []CheckResult{c.pullWitnessCheck(), c.storeWitnessCheck(), c.readAfterAckCheck()}
	for id, ds := range c.devices {
		c.skipped(id, ds)
	}
	c.set(Recovered, func() map[uint64]bool {
		rec := map[uint64]bool{}
		for m := range c.recovered {
			rec[m] = true
		}
		return rec
	}())
	for _, n := range Names {
		if n != Recovered {
			c.set(n, c.sets[n])
		}
	}
	v := &Verdict{
		LedgerVersion: c.version, Policy: c.policy(),
		Devices: len(c.devices), Users: len(c.uidDevs), Groups: len(c.groups), Attempts: c.attempts,
		Deliveries: c.deliv, Witnessed: c.witness, Stored: c.storeN, OK: okCount, Findings: c.f, Checks: checks,
		Latency: map[string]Latency{},
	}
	for _, p := range c.probes {
		if p.Status == ledger.ProbeRead {
			v.Probes++
		}
	}
	for n, h := range c.hist {
		v.Latency[n] = latencyOf(h)
	}
	_ = v.Judge(nil)
	for _, ch := range checks {
		if !ch.Made {
			v.Warnings = append(v.Warnings, fmt.Sprintf("not checked: %s (%s): %v judged without it", ch.Name, ch.Detail, ch.Findings))
		}
	}
	return v
}

// set fills finding name's msg_ids and uids from the collected sets; the
// count is the number of msg_ids, except for duplicated (extra copies).
func (c *collector) set(name string, s map[uint64]bool) {
	f := c.f[name]
	f.MsgIDs = slices.Sorted(maps.Keys(s))
	if f.MsgIDs == nil {
		f.MsgIDs = []uint64{}
	}
	if u := c.uidSets[name]; len(u) > 0 {
		f.UIDs = slices.Sorted(maps.Keys(u))
	}
	if name != Duplicated {
		f.Count = len(f.MsgIDs)
	}
}

// fate says what became of each distinct msg_id of ids, after verdict has
// judged lost: lost if the lost finding holds it, delivered if an ACK or a
// recovered send explains it, unexplained otherwise.
func (c *collector) fate(ids []uint64) *Fate {
	f := &Fate{Lost: []uint64{}, Unexplained: []uint64{}}
	late := newLatencyHist()
	seen := make(map[uint64]bool, len(ids))
	for _, m := range ids {
		if seen[m] {
			continue
		}
		seen[m] = true
		f.Messages++
		a, acked := c.acks[m]
		_, recovered := c.recovered[m]
		switch {
		case c.sets[Lost][m]:
			f.Lost = append(f.Lost, m)
		case acked:
			f.Delivered++
			if last, ok := c.lastCopy(m, c.sends[a.tick]); ok {
				late.RecordValue(us(last - a.intended))
			}
		case recovered:
			f.Delivered++ // no intended time of its own to measure from
		default:
			f.Unexplained = append(f.Unexplained, m)
		}
	}
	slices.Sort(f.Lost)
	slices.Sort(f.Unexplained)
	if late.TotalCount() > 0 {
		f.LastCopy = latencyOf(late)
	}
	return f
}

// lastCopy is when the last recipient device of a delivered message first
// stored it (false: it has no recipient device).
func (c *collector) lastCopy(m uint64, s sendInfo) (time.Duration, bool) {
	var last time.Duration
	found := false
	for _, u := range c.recipients(s) {
		for _, dv := range c.uidDevs[u] {
			if at, ok := c.devices[dv].firstSeen[m]; ok && (!found || at > last) {
				last, found = at, true
			}
		}
	}
	return last, found
}

// newLatencyHist is a histogram of latencies in microseconds, 1 µs to an
// hour, three significant digits: every latency the checker reports.
func newLatencyHist() *hdr.Histogram { return hdr.New(1, int64(time.Hour/time.Microsecond), 3) }

// latencyOf is h's count and quantiles.
func latencyOf(h *hdr.Histogram) Latency {
	return Latency{Count: h.TotalCount(), P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90),
		P99: h.ValueAtQuantile(99), P999: h.ValueAtQuantile(99.9), Max: h.Max()}
}
