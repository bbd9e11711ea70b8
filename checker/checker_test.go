package checker

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"imlab/ledger"
)

const (
	c12 = uint64(1)<<63 | 1<<31 | 2 // 1:1 conv of uids 1 and 2
	c13 = uint64(1)<<63 | 1<<31 | 3
	g10 = uint64(10)
)

// world is a hand-made run: uids 1 (devices 0 and 1), 2 (device 2), 3
// (device 3); group 10 = {1,2,3}.
type world struct {
	attempts   []ledger.Attempt
	deliveries []ledger.Delivery
	cursors    []ledger.Cursor
	witness    []ledger.Witness
	stored     []ledger.Witness
	probes     []ledger.Probe
	notes      []ledger.Note
	// more writes the records a test adds (version 3 ones) before the
	// ledger is closed.
	more func(t *testing.T, l *ledger.Ledger)
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func dl(dev uint32, seq, msg, conv, convSeq, tick uint64) ledger.Delivery {
	return ledger.Delivery{Dev: dev, Via: ledger.Pull, Seq: seq, MsgID: msg, ConvID: conv, ConvSeq: convSeq, Tick: tick, At: ms(int(10 + tick))}
}

// valid: msg 101 (1→2), group msg 102 (2→g10), a failed send, and msg 104
// of unknown outcome (3→1) that was delivered (recovered).
func valid() *world {
	w := &world{}
	w.attempts = []ledger.Attempt{
		{Tick: 1, Dev: 0, ConvType: 1, Target: 2, Intended: ms(1), Started: ms(1), Ended: ms(2), Outcome: ledger.OK, Tries: 1, MsgID: 101, ConvID: c12, ConvSeq: 1},
		{Tick: 2, Dev: 2, ConvType: 2, Target: g10, Intended: ms(2), Started: ms(2), Ended: ms(3), Outcome: ledger.OK, Tries: 1, MsgID: 102, ConvID: g10, ConvSeq: 1},
		{Tick: 3, Dev: 1, ConvType: 1, Target: 3, Intended: ms(3), Started: ms(3), Ended: ms(4), Outcome: ledger.Fail, Tries: 1, Status: 400},
		{Tick: 4, Dev: 3, ConvType: 1, Target: 1, Intended: ms(4), Started: ms(4), Ended: ms(9), Outcome: ledger.Unknown, Tries: 3, Status: 503},
	}
	w.deliveries = []ledger.Delivery{
		dl(0, 1, 101, c12, 1, 1), dl(0, 2, 102, g10, 1, 2), dl(0, 3, 104, c13, 1, 4),
		dl(1, 1, 101, c12, 1, 1), dl(1, 2, 102, g10, 1, 2), dl(1, 3, 104, c13, 1, 4),
		dl(2, 1, 101, c12, 1, 1), dl(2, 2, 102, g10, 1, 2),
		dl(3, 1, 102, g10, 1, 2), dl(3, 2, 104, c13, 1, 4),
	}
	w.cursors = []ledger.Cursor{
		{Dev: 0, Seq: 3, Status: ledger.Accepted, At: ms(20)},
		{Dev: 1, Seq: 9, Status: ledger.Refused, At: ms(20)}, // refused: no claim
		{Dev: 2, Seq: 2, Status: ledger.Sent, At: ms(20)},
	}
	w.witness = []ledger.Witness{
		{UID: 1, Seq: 1, MsgID: 101, ConvID: c12, ConvSeq: 1}, {UID: 1, Seq: 2, MsgID: 102, ConvID: g10, ConvSeq: 1}, {UID: 1, Seq: 3, MsgID: 104, ConvID: c13, ConvSeq: 1},
		{UID: 2, Seq: 1, MsgID: 101, ConvID: c12, ConvSeq: 1}, {UID: 2, Seq: 2, MsgID: 102, ConvID: g10, ConvSeq: 1},
		{UID: 3, Seq: 1, MsgID: 102, ConvID: g10, ConvSeq: 1}, {UID: 3, Seq: 2, MsgID: 104, ConvID: c13, ConvSeq: 1},
	}
	return w
}

func (w *world) write(t *testing.T, shards int) string {
	t.Helper()
	dir := t.TempDir()
	l, err := ledger.Create(dir, "hand", time.Now(), shards)
	if err != nil {
		t.Fatal(err)
	}
	uids := []uint64{1, 1, 2, 3}
	for i, u := range uids {
		l.Shard(i).Device(ledger.Device{Dev: uint32(i), UID: u, Kind: ledger.Online, DID: "d"})
	}
	if err := l.Shard(0).Group(ledger.Group{GroupID: g10, Members: []uint64{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	for i, a := range w.attempts {
		l.Shard(i).Attempt(a)
	}
	for _, d := range w.deliveries {
		l.Shard(int(d.Dev)).Delivery(d) // a device's records stay in one shard
	}
	for _, c := range w.cursors {
		l.Shard(int(c.Dev)).Cursor(c)
	}
	for i, x := range w.witness {
		l.Shard(i).Witness(x)
	}
	for i, x := range w.stored {
		l.Shard(i).Stored(x)
	}
	for i, p := range w.probes {
		l.Shard(i).Probe(p)
	}
	for i, n := range w.notes {
		if err := l.Shard(i).Note(n); err != nil {
			t.Fatal(err)
		}
	}
	if w.more != nil {
		w.more(t, l)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func check(t *testing.T, w *world) *Verdict {
	t.Helper()
	var last *Verdict
	for _, shards := range []int{1, 3} {
		v, err := Check(w.write(t, shards))
		if err != nil {
			t.Fatal(err)
		}
		if last != nil {
			for _, n := range Names {
				if !reflect.DeepEqual(v.Findings[n].MsgIDs, last.Findings[n].MsgIDs) {
					t.Fatalf("%s differs with the shard count: %v vs %v", n, v.Findings[n].MsgIDs, last.Findings[n].MsgIDs)
				}
			}
		}
		last = v
	}
	var buf bytes.Buffer
	last.WriteTable(&buf)
	t.Log("\n" + buf.String())
	return last
}

type want map[string][]uint64

func expect(t *testing.T, v *Verdict, valid bool, w want) {
	t.Helper()
	if v.Valid != valid {
		t.Fatalf("valid = %v, want %v", v.Valid, valid)
	}
	for _, n := range Names {
		got := v.Findings[n].MsgIDs
		exp := w[n]
		if exp == nil {
			exp = []uint64{}
		}
		if !reflect.DeepEqual(got, exp) {
			t.Fatalf("%s: msg_ids %v, want %v", n, got, exp)
		}
	}
}

func TestValid(t *testing.T) {
	v := check(t, valid())
	expect(t, v, true, want{"recovered": {104}})
	if v.OK != 2 || v.Attempts["ok"] != 2 || v.Attempts["fail"] != 1 || v.Attempts["unknown"] != 1 || v.Deliveries != 10 || v.Witnessed != 7 {
		t.Fatalf("counts: %+v", v)
	}
	if l := v.Latency["response"]; l.Count != 2 || l.Max < 990 || l.Max > 1010 {
		t.Fatalf("response latency %+v", l)
	}
}

func TestLost(t *testing.T) {
	w := valid()
	w.deliveries = append(w.deliveries[:4], w.deliveries[5:]...) // device 1 never gets 102
	v := check(t, w)
	expect(t, v, false, want{"lost": {102}, "recovered": {104}})
	if v.Findings["lost"].Pairs != 1 {
		t.Fatalf("pairs %d", v.Findings["lost"].Pairs)
	}
}

// TestLostWhileInboxTierBehind: a message missing while the run's
// inbox-tier note says the queue had not drained is still lost (it never
// arrived within the run) and says it may be late; with the tier drained
// it says nothing of the kind.
func TestLostWhileInboxTierBehind(t *testing.T) {
	for _, tc := range []struct {
		note ledger.Note
		late bool
	}{
		{ledger.Note{Check: ledger.InboxTierCheck, Made: true, Reason: "12 records of imlab-inbox not yet processed"}, true},
		{ledger.Note{Check: ledger.InboxTierCheck, Made: true, Drained: true}, false},
	} {
		w := valid()
		w.deliveries = append(w.deliveries[:4], w.deliveries[5:]...)
		w.notes = append(w.notes, tc.note)
		v := check(t, w)
		expect(t, v, false, want{"lost": {102}, "recovered": {104}})
		ex := strings.Join(v.Findings["lost"].Examples, "\n")
		if got := strings.Contains(ex, "may be late rather than lost") && strings.Contains(ex, "12 records of imlab-inbox"); got != tc.late {
			t.Fatalf("drained=%v: examples %q", tc.note.Drained, ex)
		}
	}
}

func TestLostRecovered(t *testing.T) {
	w := valid()
	w.deliveries = w.deliveries[:len(w.deliveries)-1] // the recovered 104 never reaches device 3 (its sender)
	v := check(t, w)
	expect(t, v, false, want{"lost": {104}, "recovered": {104}})
}

// TestRecoveredSeenOnlyByWitness: a send of unknown outcome whose message
// is in the inboxes (the witness names its send) but reached no device is
// recovered and lost on every recipient device, not unexpected.
func TestRecoveredSeenOnlyByWitness(t *testing.T) {
	w := valid()
	w.attempts = append(w.attempts, ledger.Attempt{Tick: 5, Dev: 2, ConvType: 1, Target: 3, Intended: ms(5), Started: ms(5), Ended: ms(9), Outcome: ledger.Unknown, Tries: 3})
	c23 := uint64(1)<<63 | 2<<31 | 3
	w.witness = append(w.witness,
		ledger.Witness{UID: 2, Seq: 3, MsgID: 110, ConvID: c23, ConvSeq: 1, Tick: 5},
		ledger.Witness{UID: 3, Seq: 3, MsgID: 110, ConvID: c23, ConvSeq: 1, Tick: 5})
	v := check(t, w)
	expect(t, v, false, want{"lost": {110}, "recovered": {104, 110}})
	if v.Findings["lost"].Pairs != 2 {
		t.Fatalf("pairs %d, want 2 (devices 2 and 3)", v.Findings["lost"].Pairs)
	}
}

func TestDuplicatedIsAllowed(t *testing.T) {
	w := valid()
	w.deliveries = append(w.deliveries, dl(2, 1, 101, c12, 1, 1), dl(2, 1, 101, c12, 1, 1))
	v := check(t, w)
	expect(t, v, true, want{"duplicated": {101}, "recovered": {104}})
	if v.Findings["duplicated"].Count != 2 {
		t.Fatalf("extra copies %d, want 2", v.Findings["duplicated"].Count)
	}
}

func TestUnexpected(t *testing.T) {
	cases := map[string]func(w *world){
		"never sent":        func(w *world) { w.deliveries = append(w.deliveries, dl(3, 3, 999, c13, 2, 0)) },
		"wrong recipient":   func(w *world) { w.deliveries = append(w.deliveries, dl(3, 3, 101, c12, 1, 1)) },
		"second id of send": func(w *world) { w.deliveries = append(w.deliveries, dl(0, 4, 105, c13, 2, 4)) },
		"other id of ACKed send": func(w *world) {
			w.deliveries = append(w.deliveries, dl(2, 3, 106, c12, 2, 1))
		},
		"witness only": func(w *world) {
			w.witness = append(w.witness, ledger.Witness{UID: 2, Seq: 3, MsgID: 777, ConvID: c12, ConvSeq: 2})
		},
		"witness in a wrong inbox": func(w *world) {
			w.witness = append(w.witness, ledger.Witness{UID: 2, Seq: 3, MsgID: 104, ConvID: c13, ConvSeq: 1, Tick: 4})
		},
		"witness second id of send": func(w *world) {
			w.witness = append(w.witness, ledger.Witness{UID: 3, Seq: 3, MsgID: 108, ConvID: c13, ConvSeq: 2, Tick: 4})
		},
	}
	ids := map[string]uint64{"never sent": 999, "wrong recipient": 101, "second id of send": 105, "other id of ACKed send": 106, "witness only": 777,
		"witness in a wrong inbox": 104, "witness second id of send": 108}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			w := valid()
			f(w)
			v := check(t, w)
			exp := want{"unexpected": {ids[name]}, "recovered": {104}}
			if name == "wrong recipient" {
				exp["duplicated"] = nil
			}
			expect(t, v, false, exp)
		})
	}
}

func TestReordered(t *testing.T) {
	w := valid()
	// A second group message (conv_seq 2); device 0 stores it before conv_seq 1.
	w.attempts = append(w.attempts, ledger.Attempt{Tick: 5, Dev: 3, ConvType: 2, Target: g10, Intended: ms(5), Started: ms(5), Ended: ms(6),
		Outcome: ledger.OK, Tries: 1, MsgID: 106, ConvID: g10, ConvSeq: 2})
	w.deliveries = append(w.deliveries, dl(1, 4, 106, g10, 2, 5), dl(2, 3, 106, g10, 2, 5), dl(3, 3, 106, g10, 2, 5))
	d0 := []ledger.Delivery{dl(0, 1, 101, c12, 1, 1), dl(0, 4, 106, g10, 2, 5), dl(0, 2, 102, g10, 1, 2), dl(0, 3, 104, c13, 1, 4)}
	w.deliveries = append(d0, w.deliveries[3:]...)
	v := check(t, w)
	expect(t, v, false, want{"reordered": {102}, "recovered": {104}})
	// A scenario may allow some reordering.
	if err := v.Judge(map[string]int{Reordered: 1}); err != nil || !v.Valid {
		t.Fatalf("with reordered allowed: valid %v, %v", v.Valid, err)
	}
	if err := v.Judge(map[string]int{Duplicated: 1}); err == nil || v.Valid {
		t.Fatalf("an allowance for a finding that does not decide must be refused: valid %v, %v", v.Valid, err)
	}
	// A duplicate of an earlier message after a later one is not a reorder.
	w = valid()
	w.deliveries = append(w.deliveries, dl(0, 1, 101, c12, 1, 1))
	expect(t, check(t, w), true, want{"duplicated": {101}, "recovered": {104}})
}

func TestSkipped(t *testing.T) {
	w := valid()
	// Device 1 never stores 104 (seq 3) yet its cursor ack to 3 is accepted.
	w.deliveries = append(w.deliveries[:5], w.deliveries[6:]...)
	w.cursors = append(w.cursors, ledger.Cursor{Dev: 1, Seq: 3, Status: ledger.Accepted, At: ms(30)})
	v := check(t, w)
	expect(t, v, false, want{"lost": {104}, "skipped": {104}, "recovered": {104}})
	// The same hole below a cursor that was refused is lost, not skipped.
	w = valid()
	w.deliveries = append(w.deliveries[:5], w.deliveries[6:]...)
	expect(t, check(t, w), false, want{"lost": {104}, "recovered": {104}})
}

// TestSkippedOverwritten: the inbox entry a device skipped was replaced
// (a reused seq): device 2 saw msg 101 at seq 1 and msg 108 took seq 1 in
// uid 2's inbox, overwriting it; device 2 claims cursor 2 without 108.
func TestSkippedOverwritten(t *testing.T) {
	w := valid()
	w.attempts = append(w.attempts, ledger.Attempt{Tick: 6, Dev: 0, ConvType: 1, Target: 2, Intended: ms(6), Started: ms(6), Ended: ms(7),
		Outcome: ledger.OK, Tries: 1, MsgID: 108, ConvID: c12, ConvSeq: 2})
	w.deliveries = append(w.deliveries, dl(0, 4, 108, c12, 2, 6), dl(1, 4, 108, c12, 2, 6))
	w.witness[3] = ledger.Witness{UID: 2, Seq: 1, MsgID: 108, ConvID: c12, ConvSeq: 2}
	v := check(t, w)
	expect(t, v, false, want{"lost": {108}, "skipped": {108}, "recovered": {104}, "seq-conflict": {101, 108}})
}

func TestTableAndJSON(t *testing.T) {
	w := valid()
	w.deliveries = append(w.deliveries[:4], w.deliveries[5:]...)
	v := check(t, w)
	var tab, js bytes.Buffer
	v.WriteTable(&tab)
	if err := v.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"INVALID", "lost", "102", "never reached device 1"} {
		if !strings.Contains(tab.String(), s) {
			t.Fatalf("table lacks %q:\n%s", s, tab.String())
		}
	}
	if !strings.Contains(js.String(), `"valid": false`) {
		t.Fatalf("json: %s", js.String())
	}
}

func TestDurFormatsLatencies(t *testing.T) {
	for us, want := range map[int64]string{9420799: "9.42s", 64612345: "1m4.6s", 212345: "212ms", 1234: "1.23ms", 840: "840µs", 0: "0s", 150000000: "2m30s"} {
		if got := Dur(us); got != want {
			t.Errorf("Dur(%d) = %q, want %q", us, got, want)
		}
	}
}

// TestFollowedFate: messages named from outside the ledger (what forward
// reconciliation repaired) are each delivered, lost or unexplained, by the
// findings' definitions; the delivered ACKed ones say how late their last
// recipient device got them.
func TestFollowedFate(t *testing.T) {
	w := valid()
	w.deliveries[6].At = ms(500)                                 // device 2 gets 101 late (a repair)
	w.deliveries = append(w.deliveries[:4], w.deliveries[5:]...) // device 1 never gets 102
	v, err := CheckSourcesWith([]Source{{Dir: w.write(t, 2)}}, Options{Follow: []uint64{101, 102, 104, 999, 101}})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, v, false, want{"lost": {102}, "recovered": {104}})
	f := v.Followed
	if f == nil {
		t.Fatal("no fate for the followed messages")
	}
	if f.Messages != 4 || f.Delivered != 2 || !reflect.DeepEqual(f.Lost, []uint64{102}) || !reflect.DeepEqual(f.Unexplained, []uint64{999}) {
		t.Fatalf("fate %+v: want 4 messages, 101 and 104 delivered, 102 lost, 999 unexplained", f)
	}
	// 101: intended at 1 ms, last recipient copy at 500 ms (104 was
	// recovered: no intended time, not measured).
	if l := f.LastCopy; l.Count != 1 || l.Max < 498000 || l.Max > 500000 {
		t.Fatalf("last copy %+v, want one sample of 499 ms", l)
	}
	if plain, err := CheckSources([]Source{{Dir: w.write(t, 1)}}); err != nil || plain.Followed != nil {
		t.Fatalf("nothing followed: fate %+v, err %v", plain.Followed, err)
	}
}
