package checker

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"imlab/ledger"
)

// withStore is valid() with a whole store witness (the pull witness's
// entries, as the store holds them), its note, and the strict policy.
func withStore() *world {
	w := valid()
	w.stored = append([]ledger.Witness(nil), w.witness...)
	w.notes = []ledger.Note{
		{Check: CheckPullWitness, Made: true, UIDs: 3},
		{Check: CheckStoreWitness, Made: true, Policy: "strict", UIDs: 3},
		{Check: CheckReadAfterAck, Made: true, Policy: "strict", Probes: 0},
	}
	return w
}

func checkOf(t *testing.T, v *Verdict, name string) CheckResult {
	t.Helper()
	for _, c := range v.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %s in %+v", name, v.Checks)
	return CheckResult{}
}

func TestStoreWitnessValid(t *testing.T) {
	w := withStore()
	w.probes = []ledger.Probe{probe(101, 1, ledger.FoundInbox|ledger.FoundContent)}
	v := check(t, w)
	expect(t, v, true, want{"recovered": {104}})
	if v.Stored != 7 || v.Policy != "strict" || v.LedgerVersion != ledger.Version {
		t.Fatalf("stored %d policy %q version %d", v.Stored, v.Policy, v.LedgerVersion)
	}
	if c := checkOf(t, v, CheckStoreWitness); !c.Made || c.Partial {
		t.Fatalf("store witness check %+v", c)
	}
	if u := v.Unmade(); len(u) != 0 {
		t.Fatalf("unmade %v", u)
	}
}

// TestLostInStore: uid 2's stored inbox lacks 102 although every device
// got it (from the cache or push): lost-in-store, with its uid.
func TestLostInStore(t *testing.T) {
	w := withStore()
	w.stored = slices.DeleteFunc(w.stored, func(x ledger.Witness) bool { return x.UID == 2 && x.MsgID == 102 })
	v := check(t, w)
	expect(t, v, false, want{"recovered": {104}, "lost-in-store": {102}})
	f := v.Findings[LostInStore]
	if f.Pairs != 1 || !slices.Equal(f.UIDs, []uint64{2}) || !strings.Contains(f.Examples[0], "uid 2") {
		t.Fatalf("lost-in-store %+v", f)
	}
	// A recovered message (unknown outcome, stored somewhere) must be in
	// every recipient's store too.
	w = withStore()
	w.stored = slices.DeleteFunc(w.stored, func(x ledger.Witness) bool { return x.UID == 3 && x.MsgID == 104 })
	expect(t, check(t, w), false, want{"recovered": {104}, "lost-in-store": {104}})
	// A uid whose store read failed is not judged; the check is partial.
	w = withStore()
	w.stored = slices.DeleteFunc(w.stored, func(x ledger.Witness) bool { return x.UID == 2 })
	w.notes = append(w.notes, ledger.Note{Check: CheckStoreWitness, UID: 2, Reason: "503"})
	v = check(t, w)
	expect(t, v, true, want{"recovered": {104}})
	if c := checkOf(t, v, CheckStoreWitness); !c.Made || !c.Partial {
		t.Fatalf("partial store witness %+v", c)
	}
}

// TestStoreWitnessNotMade: a run whose server has no lab route says so and
// judges the rest.
func TestStoreWitnessNotMade(t *testing.T) {
	w := valid()
	w.notes = []ledger.Note{{Check: CheckStoreWitness, Reason: "the server has no lab routes (404)"}}
	v := check(t, w)
	expect(t, v, true, want{"recovered": {104}})
	c := checkOf(t, v, CheckStoreWitness)
	if c.Made || !strings.Contains(c.Detail, "404") || !slices.Contains(v.Unmade(), CheckStoreWitness) {
		t.Fatalf("check %+v unmade %v", c, v.Unmade())
	}
	var tab bytes.Buffer
	v.WriteTable(&tab)
	if !strings.Contains(tab.String(), "store-witness   NOT MADE") {
		t.Fatalf("table does not name the check it could not make:\n%s", tab.String())
	}
}

// TestOldLedger: a version 1 ledger (no version field, no notes) is judged
// with what it has and names the checks it could not make.
func TestOldLedger(t *testing.T) {
	dir := valid().write(t, 2)
	files, _ := ledger.Files(dir)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Same length, so the header's length prefix still holds.
		field := fmt.Sprintf(`"version":%d,`, ledger.Version)
		b = bytes.Replace(b, []byte(field), []byte(strings.Repeat(" ", len(field))), 1)
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v, err := Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, v, true, want{"recovered": {104}})
	if v.LedgerVersion != 1 || !slices.Equal(v.Unmade(), []string{CheckStoreWitness, CheckReadAfterAck}) {
		t.Fatalf("version %d unmade %v", v.LedgerVersion, v.Unmade())
	}
	if c := checkOf(t, v, CheckStoreWitness); !strings.Contains(c.Detail, "ledger version 1 predates") {
		t.Fatalf("detail %q", c.Detail)
	}
	if c := checkOf(t, v, CheckPullWitness); !c.Made {
		t.Fatalf("pull witness %+v", c)
	}
}

func probe(msg, uid uint64, found uint8) ledger.Probe {
	return ledger.Probe{Tick: 1, MsgID: msg, UID: uid, Status: ledger.ProbeRead, Found: found, At: ms(3)}
}

// TestUnstoredAtAck: each policy is held to its own promise.
func TestUnstoredAtAck(t *testing.T) {
	const in, ct, ob = ledger.FoundInbox, ledger.FoundContent, ledger.FoundOutbox
	cases := []struct {
		policy string
		found  uint8
		miss   bool
	}{
		{"strict", in | ct, false}, {"strict", ct, true}, {"strict", in, true}, {"strict", 0, true},
		{"store", ct, false}, {"store", in, true}, {"store", 0, true},
		{"outbox", ct | ob, false}, {"outbox", ct | in, false}, {"outbox", ct, true}, {"outbox", ob, true},
		{"queue", 0, false},
	}
	for _, tc := range cases {
		w := withStore()
		w.notes[2].Policy = tc.policy
		w.probes = []ledger.Probe{probe(101, 1, tc.found), probe(101, 2, in|ct|ob)}
		v := check(t, w)
		exp := want{"recovered": {104}}
		if tc.miss {
			exp[UnstoredAtAck] = []uint64{101}
		}
		expect(t, v, !tc.miss, exp)
		if tc.miss && !slices.Equal(v.Findings[UnstoredAtAck].UIDs, []uint64{1}) {
			t.Fatalf("%s %b: uids %v", tc.policy, tc.found, v.Findings[UnstoredAtAck].UIDs)
		}
	}
	// A row missing from the inbox because retention had deleted it before
	// the probe's answer came is no finding; deleted after it, it is.
	for _, c := range []struct {
		deleted time.Duration
		count   int
	}{{ms(2), 0}, {ms(4), 1}} {
		w := withStore()
		w.probes = []ledger.Probe{probe(101, 1, ledger.FoundContent)}
		w.more = func(t *testing.T, l *ledger.Ledger) {
			l.Shard(0).Retention(ledger.RetentionSettings{MaxAge: time.Hour, PulledMinAge: time.Millisecond, Interval: time.Millisecond})
			l.Shard(0).Deletion(ledger.Deletion{UID: 1, Seq: 1, MsgID: 101, CreatedAt: ms(1), DeletedAt: c.deleted, Reason: ledger.RetentionPulled})
		}
		if n := check(t, w).Findings[UnstoredAtAck].Count; n != c.count {
			t.Errorf("retention deleted the row at %s, probe answered at %s: %d unstored-at-ack, want %d", c.deleted, ms(3), n, c.count)
		}
	}
	// A policy the checker does not know, or probes that all failed: the
	// check is named as not made.
	w := withStore()
	w.notes[2].Policy = "weird"
	w.probes = []ledger.Probe{probe(101, 1, 0)}
	if c := checkOf(t, check(t, w), CheckReadAfterAck); c.Made {
		t.Fatalf("unknown policy: %+v", c)
	}
	w = withStore()
	w.probes = []ledger.Probe{{Tick: 1, MsgID: 101, UID: 1, Status: ledger.ProbeFailed, HTTP: 503}}
	if c := checkOf(t, check(t, w), CheckReadAfterAck); c.Made {
		t.Fatalf("failed probes: %+v", c)
	}
}

// TestDoubleStored: one msg_id at two seqs of one inbox, in the store or
// on a device, is double-stored, not a duplicate delivery.
func TestDoubleStored(t *testing.T) {
	w := withStore()
	w.stored = append(w.stored, ledger.Witness{UID: 2, Seq: 3, MsgID: 101, ConvID: c12, ConvSeq: 1, Tick: 1})
	v := check(t, w)
	expect(t, v, false, want{"recovered": {104}, "double-stored": {101}})
	if !slices.Equal(v.Findings[DoubleStored].UIDs, []uint64{2}) {
		t.Fatalf("uids %v", v.Findings[DoubleStored].UIDs)
	}
	w = valid()
	w.deliveries = append(w.deliveries, dl(2, 3, 101, c12, 1, 1))
	expect(t, check(t, w), false, want{"recovered": {104}, "double-stored": {101}})
}

// TestSeqConflict: one (uid, seq) holding two msg_ids, seen across a
// device and the store.
func TestSeqConflict(t *testing.T) {
	w := withStore()
	w.attempts = append(w.attempts, ledger.Attempt{Tick: 6, Dev: 0, ConvType: 1, Target: 2, Intended: ms(6), Started: ms(6), Ended: ms(7),
		Outcome: ledger.OK, Tries: 1, MsgID: 108, ConvID: c12, ConvSeq: 2})
	w.deliveries = append(w.deliveries, dl(0, 4, 108, c12, 2, 6), dl(1, 4, 108, c12, 2, 6), dl(2, 3, 108, c12, 2, 6))
	w.witness = append(w.witness, ledger.Witness{UID: 1, Seq: 4, MsgID: 108, ConvID: c12, ConvSeq: 2, Tick: 6})
	w.stored = append(w.stored, ledger.Witness{UID: 1, Seq: 4, MsgID: 108, ConvID: c12, ConvSeq: 2, Tick: 6},
		ledger.Witness{UID: 2, Seq: 2, MsgID: 108, ConvID: c12, ConvSeq: 2, Tick: 6}) // seq 2 is 102's
	v := check(t, w)
	expect(t, v, false, want{"recovered": {104}, "seq-conflict": {102, 108}, "double-stored": {108}})
}

// TestAckMismatch: a delivery whose conv_seq differs from its ACK.
func TestAckMismatch(t *testing.T) {
	w := valid()
	w.deliveries[2*3+0+1] = dl(2, 2, 102, g10, 7, 2) // device 2's copy of 102 says conv_seq 7
	v := check(t, w)
	expect(t, v, false, want{"recovered": {104}, "ack-mismatch": {102}})
	if !strings.Contains(v.Findings[AckMismatch].Examples[0], "conv_seq 7") {
		t.Fatalf("example %v", v.Findings[AckMismatch].Examples)
	}
}

// TestReorderedInStore: a stored inbox whose seqs put a conversation out
// of conv_seq order, while the devices saw a consistent order.
func TestReorderedInStore(t *testing.T) {
	w := withStore()
	w.attempts = append(w.attempts, ledger.Attempt{Tick: 5, Dev: 3, ConvType: 2, Target: g10, Intended: ms(5), Started: ms(5), Ended: ms(6),
		Outcome: ledger.OK, Tries: 1, MsgID: 106, ConvID: g10, ConvSeq: 2})
	w.deliveries = append(w.deliveries, dl(0, 4, 106, g10, 2, 5), dl(1, 4, 106, g10, 2, 5), dl(2, 3, 106, g10, 2, 5), dl(3, 3, 106, g10, 2, 5))
	// uid 3's store: 106 (conv_seq 2) at seq 1, 102 (conv_seq 1) at seq 3.
	w.stored = slices.DeleteFunc(w.stored, func(x ledger.Witness) bool { return x.UID == 3 })
	w.stored = append(w.stored, ledger.Witness{UID: 3, Seq: 1, MsgID: 106, ConvID: g10, ConvSeq: 2, Tick: 5},
		ledger.Witness{UID: 3, Seq: 2, MsgID: 104, ConvID: c13, ConvSeq: 1, Tick: 4},
		ledger.Witness{UID: 3, Seq: 3, MsgID: 102, ConvID: g10, ConvSeq: 1, Tick: 2},
		ledger.Witness{UID: 1, Seq: 4, MsgID: 106, ConvID: g10, ConvSeq: 2, Tick: 5},
		ledger.Witness{UID: 2, Seq: 3, MsgID: 106, ConvID: g10, ConvSeq: 2, Tick: 5})
	v := check(t, w)
	// The store disagrees with what devices of uid 3 saw at those seqs too.
	expect(t, v, false, want{"recovered": {104}, "reordered": {102}, "seq-conflict": {102, 106}, "double-stored": {102, 106}})
	if !strings.Contains(v.Findings[Reordered].Examples[0], "store-witness of uid 3") {
		t.Fatalf("example %v", v.Findings[Reordered].Examples)
	}
}

// TestRetryStoredTwice: a send retried with the same client_msg_id after a
// timeout, which the server stored twice: the ACK names the second
// message, the store holds both.
func TestRetryStoredTwice(t *testing.T) {
	w := withStore()
	w.attempts[0].Tries = 2
	w.stored = append(w.stored, ledger.Witness{UID: 1, Seq: 4, MsgID: 100, ConvID: c12, ConvSeq: 2, Tick: 1},
		ledger.Witness{UID: 2, Seq: 3, MsgID: 100, ConvID: c12, ConvSeq: 2, Tick: 1})
	v := check(t, w)
	expect(t, v, false, want{"recovered": {104}, "unexpected": {100}})
	if !strings.Contains(v.Findings[Unexpected].Examples[0], "one client_msg_id, two messages") {
		t.Fatalf("example %v", v.Findings[Unexpected].Examples)
	}
}

// TestNotesOfSegments: a split run has one note per segment and check. The
// store witness is made only if every segment made it; read-after-ACK if
// any segment's probes were read.
func TestNotesOfSegments(t *testing.T) {
	w := withStore()
	w.probes = []ledger.Probe{probe(101, 1, ledger.FoundInbox|ledger.FoundContent)}
	w.notes = append(w.notes,
		ledger.Note{Check: CheckStoreWitness, Reason: "the run was cancelled before the store witness"},
		ledger.Note{Check: CheckReadAfterAck, Reason: "no ACKed send was chosen for a probe"})
	v := check(t, w)
	if c := checkOf(t, v, CheckStoreWitness); c.Made || !strings.Contains(c.Detail, "cancelled") {
		t.Fatalf("store witness of two segments, one not made: %+v", c)
	}
	if c := checkOf(t, v, CheckReadAfterAck); !c.Made {
		t.Fatalf("read-after-ack of two segments, one made: %+v", c)
	}
}

// TestPartlyJudged: read-after-ACK made with some probes failed is made in
// part, and the verdict names unstored-at-ack as judged on partial
// evidence: in verdict.json, in a warning and on the table's verdict line.
func TestPartlyJudged(t *testing.T) {
	w := withStore()
	w.probes = []ledger.Probe{probe(101, 1, ledger.FoundInbox|ledger.FoundContent),
		{Tick: 1, MsgID: 101, UID: 2, Status: ledger.ProbeFailed, HTTP: 503}}
	v := check(t, w)
	if c := checkOf(t, v, CheckReadAfterAck); !c.Made || !c.Partial {
		t.Fatalf("read-after-ack %+v", c)
	}
	if !v.Valid || !slices.Equal(v.JudgedPartly[UnstoredAtAck], []string{CheckReadAfterAck}) || len(v.JudgedPartly) != 1 {
		t.Fatalf("valid %v, judged partly %v", v.Valid, v.JudgedPartly)
	}
	var tab bytes.Buffer
	v.WriteTable(&tab)
	line, _, _ := strings.Cut(tab.String(), "\n")
	if !strings.HasPrefix(line, "verdict: VALID") || !strings.HasSuffix(line, "; judged on partial evidence: unstored-at-ack (read-after-ack)") {
		t.Fatalf("verdict line %q", line)
	}
	if !slices.ContainsFunc(v.Warnings, func(s string) bool { return strings.HasPrefix(s, "partly checked: read-after-ack (") }) {
		t.Fatalf("warnings %q", v.Warnings)
	}
	// Every probe read: nothing judged in part.
	w = withStore()
	w.probes = []ledger.Probe{probe(101, 1, ledger.FoundInbox|ledger.FoundContent)}
	if v := check(t, w); v.JudgedPartly != nil || len(v.Partly()) != 0 {
		t.Fatalf("whole evidence judged partly: %v", v.JudgedPartly)
	}
}
