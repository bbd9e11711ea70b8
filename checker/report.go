package checker

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"imlab/ledger"
)

// marker is the one way a rule marks its finding: each rule gets the
// marker of its own finding only.
type marker struct {
	f     *Finding
	msgs  map[uint64]bool
	uids  map[uint64]bool
	convs map[uint64]bool
	items map[string]bool // what is counted that is no message
	n     int
	fixed bool // count set by Count, not by the msg_ids
}

func newMarker(name string) *marker {
	return &marker{f: &Finding{Name: name, MsgIDs: []uint64{}}, msgs: map[uint64]bool{}, uids: map[uint64]bool{},
		convs: map[uint64]bool{}, items: map[string]bool{}}
}

// Mark puts msg_id msg into the finding (and uid, when not 0) and keeps an
// example the first time msg is marked.
func (k *marker) Mark(msg, uid uint64, format string, args ...any) {
	if uid != 0 {
		k.uids[uid] = true
	}
	if k.msgs[msg] {
		return
	}
	k.msgs[msg] = true
	if len(k.f.Examples) < MaxListed {
		k.f.Examples = append(k.f.Examples, fmt.Sprintf(format, args...))
	}
}

// Add puts msg_id msg into the finding without an example.
func (k *marker) Add(msg uint64) { k.msgs[msg] = true }

// Conv names a conversation concerned.
func (k *marker) Conv(c uint64) { k.convs[c] = true }

// Item counts something that is no message (a clear watermark, a hole, a
// page's cursor) once per key, and keeps an example the first time.
func (k *marker) Item(key string, format string, args ...any) {
	if k.items[key] {
		return
	}
	k.items[key] = true
	if len(k.f.Examples) < MaxListed {
		k.f.Examples = append(k.f.Examples, fmt.Sprintf(format, args...))
	}
}

// Pair counts one more (message, device) or (message, uid) pair.
func (k *marker) Pair() { k.f.Pairs++ }

// Count sets the finding's count to n instead of its number of msg_ids
// (duplicated counts extra copies).
func (k *marker) Count(n int) { k.n, k.fixed = n, true }

// finish fills the finding's lists and count.
func (k *marker) finish() *Finding {
	f := k.f
	f.MsgIDs = slices.Sorted(maps.Keys(k.msgs))
	if f.MsgIDs == nil {
		f.MsgIDs = []uint64{}
	}
	if len(k.uids) > 0 {
		f.UIDs = slices.Sorted(maps.Keys(k.uids))
	}
	if len(k.convs) > 0 {
		f.Convs = slices.Sorted(maps.Keys(k.convs))
	}
	f.Count = len(f.MsgIDs) + len(k.items)
	if k.fixed {
		f.Count = k.n
	}
	return f
}

// judge decides which checks can be made, runs every rule in order, and
// assembles the verdict.
func judge(m *model) *Verdict {
	checks := m.evidenceChecks()
	findings := map[string]*Finding{}
	for _, r := range rules {
		k := newMarker(r.finding)
		r.validate(m, k)
		findings[r.finding] = k.finish()
	}
	for _, n := range Deciding {
		findings[n].Decides = true
	}
	notMade(findings, checks)
	ev := m.ev
	v := &Verdict{
		Format: VerdictFormat, LedgerVersion: m.version(), Policy: m.policy(),
		Devices: len(m.devs), Users: len(ev.uidDevs), Groups: len(ev.groups), Attempts: ev.attempts,
		Deliveries: ev.deliveries.Len(), Witnessed: ev.witnessN, Stored: ev.storedN, OK: m.okCount,
		Findings: findings, Checks: checks, Latency: map[string]Latency{},
	}
	for _, p := range ev.probes {
		if p.Status == ledger.ProbeRead {
			v.Probes++
		}
	}
	for n, h := range ev.hist {
		v.Latency[n] = latencyOf(h)
	}
	v.Latency["end_to_end"] = latencyOf(m.endToEnd)
	v.Target = ev.target.Driver
	v.Conversations = ev.convCounts()
	_ = v.Judge(nil)
	if ev.targetClash != "" {
		v.Warnings = append(v.Warnings, ev.targetClash)
	}
	if n := findings[RetryDuplicate].Count; n > 0 {
		v.Warnings = append(v.Warnings, fmt.Sprintf("%d messages are second copies of retried sends (the target has no idempotent send): their users see them twice (retry-duplicate, not deciding)", n))
	}
	for _, ch := range checks {
		if !ch.Made && !ch.Unexercised {
			v.Warnings = append(v.Warnings, fmt.Sprintf("not checked: %s (%s): %v judged without it", ch.Name, ch.Detail, ch.Findings))
		}
		if ch.Made && ch.Partial {
			v.Warnings = append(v.Warnings, fmt.Sprintf("partly checked: %s (%s): %v judged on partial evidence", ch.Name, ch.Detail, ch.Findings))
		}
	}
	v.JudgedPartly = judgedPartly(checks)
	return v
}

// judgedPartly maps each finding a partly made check feeds to those
// checks (nil: none).
func judgedPartly(checks []CheckResult) (out map[string][]string) {
	for _, ch := range checks {
		for _, n := range ch.Findings {
			if ch.Made && ch.Partial && out == nil {
				out = map[string][]string{}
			}
			if ch.Made && ch.Partial {
				out[n] = append(out[n], ch.Name)
			}
		}
	}
	return out
}

// judgedAnyway are findings the deliveries every run has feed (skipped),
// so that no check left unmade leaves them unjudged.
var judgedAnyway = map[string]bool{Skipped: true}

// seenAnyway are findings the ACKs can show but not rule out (two ACKs at
// one conv_seq; no ACK shows a store overwriting or copying a message):
// above 0 they stand, at 0 with no feeding check made they are not made.
var seenAnyway = map[string]bool{HistoryOverwritten: true, HistoryDuplicated: true}

// notMade names, on each finding whose every feeding check was not made,
// why: its count then says nothing.
func notMade(findings map[string]*Finding, checks []CheckResult) {
	why := map[string][]string{}
	made := map[string]bool{}
	for _, c := range checks {
		for _, n := range c.Findings {
			if c.Made {
				made[n] = true
			} else {
				why[n] = append(why[n], c.Name+": "+c.Detail)
			}
		}
	}
	for n, w := range why {
		if f := findings[n]; f != nil && !made[n] && !judgedAnyway[n] && !(seenAnyway[n] && f.Count > 0) {
			f.NotMade = strings.Join(w, "; ")
		}
	}
	// On a target without an inbox, the inbox findings have no meaning
	// whatever else feeds them.
	for _, c := range checks {
		if c.Name == CheckInbox && !c.Made {
			for _, n := range c.Findings {
				findings[n].NotMade = c.Name + ": " + c.Detail
			}
		}
	}
}

// version is the highest format version of the ledger's shards.
func (m *model) version() int {
	v := 0
	for _, in := range m.ev.shards {
		v = max(v, in.Header.Version)
	}
	return v
}

// newLatencyHist is a histogram of latencies in microseconds, 1 µs to an
// hour, three significant digits: every latency the checker reports.
func newLatencyHist() *hdr.Histogram { return hdr.New(1, int64(time.Hour/time.Microsecond), 3) }

// latencyOf is h's count and quantiles.
func latencyOf(h *hdr.Histogram) Latency {
	return Latency{Count: h.TotalCount(), P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90),
		P99: h.ValueAtQuantile(99), P999: h.ValueAtQuantile(99.9), Max: h.Max()}
}

// convCounts counts the version 3 evidence (nil: none).
func (ev *evidence) convCounts() *ConvCounts {
	cv := &ev.cv
	c := &ConvCounts{Pulls: len(cv.Pulls), Pages: len(cv.Pages), Slots: len(cv.Slots), Watermarks: len(cv.Watermarks),
		Deletions: len(ev.rt.Deletions), DelRanges: len(cv.DelRanges)}
	c.Revokes, c.Deletes, c.Clears, c.Reads = cv.Actions()
	if *c == (ConvCounts{}) {
		return nil
	}
	return c
}
