package checker

import (
	"go/parser"
	"go/token"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"imlab/ledger"
)

// TestInboxLogPut: put itself reports a message at a second seq and a seq
// holding a second message; repeats are quiet.
func TestInboxLogPut(t *testing.T) {
	l := newInboxLog()
	if _, d, _, c := l.put(1, 101, 7, never); d || c {
		t.Fatal("a first entry is no anomaly")
	}
	if _, d, _, c := l.put(1, 101, 7, ms(5)); d || c || l.at[1].seen != ms(5) {
		t.Fatalf("the same entry again is no anomaly, and the earliest timed read is kept: %+v", l.at[1])
	}
	if first, d, _, c := l.put(2, 101, 7, ms(1)); !d || first != 1 || c {
		t.Fatalf("101 at seq 2 after seq 1: double %v (first %d), conflict %v", d, first, c)
	}
	if _, d, other, c := l.put(1, 102, 7, ms(1)); d || !c || other != 101 || l.at[1].seen != ms(5) {
		t.Fatalf("102 at seq 1 held by 101: conflict %v (other %d), double %v; %+v", c, other, d, l.at[1])
	}
}

// TestRulesCoverFindings: every finding has exactly one rule, and the
// rules run in the order the package doc lists the findings.
func TestRulesCoverFindings(t *testing.T) {
	var order []string
	for _, r := range rules {
		if slices.Contains(order, r.finding) {
			t.Fatalf("%s has two rules", r.finding)
		}
		order = append(order, r.finding)
	}
	for _, n := range Names {
		if !slices.Contains(order, n) {
			t.Fatalf("%s has no rule", n)
		}
	}
	listed, elsewhere := docList(t, "doc.go", order)
	if !slices.Equal(listed, order) {
		t.Fatalf("the package doc lists %v, the rules run %v", listed, order)
	}
	for room, names := range elsewhere {
		defined, _ := docList(t, room+"/doc.go", order)
		if !slices.Equal(defined, names) {
			t.Fatalf("package %s's doc defines %v, this package's doc sends %v there", room, defined, names)
		}
	}
	for _, r := range rules {
		name := runtime.FuncForPC(reflect.ValueOf(r.validate).Pointer()).Name()
		for room, on := range map[string]string{"conv": "onConv", "retention": "onRetention"} {
			if strings.Contains(name, on) != slices.Contains(elsewhere[room], r.finding) {
				t.Fatalf("%s: its rule is %s, its definition in package %s %v", r.finding, name, room, slices.Contains(elsewhere[room], r.finding))
			}
		}
	}
}

// docList lists, in their order, the findings of order a package doc's
// list names ("- name:"), and, by package (checker/X), those of them it
// says are defined in another ("- name: defined in package checker/X.").
func docList(t *testing.T, path string, order []string) (listed []string, elsewhere map[string][]string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere = map[string][]string{}
	for _, line := range strings.Split(f.Doc.Text(), "\n") {
		for _, n := range order {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "- "+n+":")
			if !ok {
				continue
			}
			listed = append(listed, n)
			if room, ok := strings.CutPrefix(strings.TrimSpace(rest), "defined in package checker/"); ok {
				room = strings.TrimSuffix(room, ".")
				elsewhere[room] = append(elsewhere[room], n)
			}
		}
	}
	return listed, elsewhere
}

// TestAckedTwice: one msg_id ACKed for two sends is unexpected.
func TestAckedTwice(t *testing.T) {
	w := valid()
	w.attempts = append(w.attempts, ledger.Attempt{Tick: 5, Dev: 2, ConvType: 1, Target: 1, Intended: ms(5), Started: ms(5), Ended: ms(6),
		Outcome: ledger.OK, Tries: 1, MsgID: 101, ConvID: c12, ConvSeq: 1})
	v := check(t, w)
	expect(t, v, false, want{"unexpected": {101}, "recovered": {104}})
	if !strings.Contains(v.Findings[Unexpected].Examples[0], "ACKed for two sends (ticks 1 and 5)") {
		t.Fatalf("example %v", v.Findings[Unexpected].Examples)
	}
}

// TestAckMismatchOfWitness: a witness entry that disagrees with its ACK is
// an ack-mismatch even when the ACK is read after the entry (another
// shard). Before the ledger was read whole first, an entry was held only
// to the ACKs read before it.
func TestAckMismatchOfWitness(t *testing.T) {
	w := valid()
	w.witness[4] = ledger.Witness{UID: 2, Seq: 2, MsgID: 102, ConvID: g10, ConvSeq: 9}
	// check writes record i of a kind to shard i mod n: entry 4 to shard
	// 1 of 3, read before shard 2, where the ACK of 102 goes as attempt 5.
	a := w.attempts[1]
	w.attempts = append(w.attempts[:1], w.attempts[2:]...)
	w.attempts = append(w.attempts, ledger.Attempt{Tick: 9, Dev: 1, Outcome: ledger.Fail, Tries: 1, Status: 400},
		ledger.Attempt{Tick: 10, Dev: 1, Outcome: ledger.Fail, Tries: 1, Status: 400}, a)
	v := check(t, w)
	expect(t, v, false, want{"ack-mismatch": {102}, "recovered": {104}})
	if !strings.Contains(v.Findings[AckMismatch].Examples[0], "pull-witness of uid 2 as conv 10 conv_seq 9") {
		t.Fatalf("example %v", v.Findings[AckMismatch].Examples)
	}
}

// TestRecoveredCopyWithoutTag: a copy whose content names no send (a body
// gone missing) of a message another copy shows recovered is that
// recovered message, not an unexpected one, whichever copy comes first.
func TestRecoveredCopyWithoutTag(t *testing.T) {
	w := valid()
	w.deliveries[2].Tick = 0 // device 0's copy of 104 (the first one read)
	v := check(t, w)
	expect(t, v, true, want{"recovered": {104}})
}

// TestReorderedInPullWitness: a pulled inbox whose seqs put a conversation
// out of conv_seq order, with the uid named.
func TestReorderedInPullWitness(t *testing.T) {
	w := valid()
	w.attempts = append(w.attempts, ledger.Attempt{Tick: 5, Dev: 3, ConvType: 2, Target: g10, Intended: ms(5), Started: ms(5), Ended: ms(6),
		Outcome: ledger.OK, Tries: 1, MsgID: 106, ConvID: g10, ConvSeq: 2})
	w.deliveries = append(w.deliveries, dl(0, 4, 106, g10, 2, 5), dl(1, 4, 106, g10, 2, 5), dl(2, 3, 106, g10, 2, 5), dl(3, 3, 106, g10, 2, 5))
	w.witness = append(w.witness, ledger.Witness{UID: 1, Seq: 4, MsgID: 106, ConvID: g10, ConvSeq: 2},
		ledger.Witness{UID: 2, Seq: 3, MsgID: 106, ConvID: g10, ConvSeq: 2})
	// uid 3's pulled inbox: 106 at seq 3 as the devices saw, but 102 read
	// at seq 4 (after it) instead of seq 1.
	w.witness[5] = ledger.Witness{UID: 3, Seq: 4, MsgID: 102, ConvID: g10, ConvSeq: 1}
	w.witness = append(w.witness, ledger.Witness{UID: 3, Seq: 3, MsgID: 106, ConvID: g10, ConvSeq: 2})
	v := check(t, w)
	expect(t, v, false, want{"reordered": {102}, "recovered": {104}, "double-stored": {102}})
	f := v.Findings[Reordered]
	if !slices.Equal(f.UIDs, []uint64{3}) || !strings.Contains(f.Examples[0], "pull-witness of uid 3") {
		t.Fatalf("reordered %+v", f)
	}
}
