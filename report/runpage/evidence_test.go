package runpage

import (
	"slices"
	"strings"
	"testing"
	"time"

	"imlab/checker"
	"imlab/expect"
	"imlab/ledger"
	"imlab/report"
	"imlab/result"
)

// TestEvidenceGapsOfVerdict: on the checker's own verdict, the checks a
// run did not exercise (no conversation action, no history witness, no
// retention recorded) are no gap and are not counted as evidence; a
// history witness taken before the history tier drained is a gap.
func TestEvidenceGapsOfVerdict(t *testing.T) {
	judge := func(notes ...ledger.Note) *checker.Verdict {
		dir := t.TempDir()
		l, err := ledger.Create(dir, "gaps", time.Now(), 1)
		if err != nil {
			t.Fatal(err)
		}
		s := l.Shard(0)
		s.Device(ledger.Device{Dev: 0, UID: 1, Kind: ledger.Online, DID: "a"})
		s.Device(ledger.Device{Dev: 1, UID: 2, Kind: ledger.Online, DID: "b"})
		conv := uint64(1)<<63 | 1<<31 | 2
		s.Attempt(ledger.Attempt{Tick: 1, Dev: 0, ConvType: 1, Target: 2, Ended: time.Millisecond, Outcome: ledger.OK, Tries: 1, MsgID: 7, ConvID: conv, ConvSeq: 1})
		for dev, uid := range []uint64{1, 2} {
			s.Delivery(ledger.Delivery{Dev: uint32(dev), Via: ledger.Push, Seq: 1, MsgID: 7, ConvID: conv, ConvSeq: 1, Tick: 1, At: time.Millisecond})
			w := ledger.Witness{UID: uid, Seq: 1, MsgID: 7, ConvID: conv, ConvSeq: 1, Tick: 1}
			s.Witness(w)
			s.Stored(w)
		}
		s.Probe(ledger.Probe{Tick: 1, MsgID: 7, UID: 1, Status: ledger.ProbeRead, Found: ledger.FoundInbox | ledger.FoundContent, At: time.Millisecond})
		for _, n := range append([]ledger.Note{{Check: checker.CheckPullWitness, Made: true, UIDs: 2},
			{Check: checker.CheckStoreWitness, Made: true, UIDs: 2, Policy: "strict"},
			{Check: checker.CheckReadAfterAck, Made: true, Policy: "strict", Probes: 1}}, notes...) {
			if err := s.Note(n); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		v, err := checker.Check(dir)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Exercised: the pull and store witness, read-after-ACK, and the
	// inbox the reference server keeps.
	v := judge()
	if g := expect.EvidenceGaps(v); len(g) != 0 || expect.Exercised(v) != 4 || len(v.Checks) <= 4 || !v.Valid {
		t.Fatalf("gaps %v, %d exercised of %d checks, valid %v", g, expect.Exercised(v), len(v.Checks), v.Valid)
	}
	v = judge(ledger.Note{Check: checker.CheckHistoryWitness, Made: true, Convs: 1})
	g := expect.EvidenceGaps(v)
	if len(g) != 1 || !strings.HasPrefix(g[0], checker.CheckHistoryWitness+" not made") || expect.Exercised(v) != 5 {
		t.Fatalf("a history not drained: gaps %v, %d exercised", g, expect.Exercised(v))
	}
	if !slices.Contains(v.Unmade(), checker.CheckHistoryWitness) {
		t.Fatalf("unmade %v", v.Unmade())
	}
	// A finding the checker could not judge says so in result.json and on
	// the page, not a bare 0.
	fs := expect.Findings(v)
	i := slices.IndexFunc(fs, func(f result.FindingSummary) bool { return f.Name == checker.HistoryLost })
	if i < 0 || !strings.Contains(fs[i].NotMade, "not drained") {
		t.Fatalf("history-lost summary %+v", fs)
	}
	rep := HTMLReport(&result.Result{Scenario: "gaps", Verdict: v, Findings: fs})
	j := slices.IndexFunc(rep.Findings, func(f report.Finding) bool { return f.Name == checker.HistoryLost })
	if j < 0 || len(rep.Findings[j].Examples) == 0 || !strings.HasPrefix(rep.Findings[j].Examples[0], "NOT MADE: ") {
		t.Fatalf("page finding %+v", rep.Findings)
	}
}
