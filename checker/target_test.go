package checker

import (
	"slices"
	"strings"
	"testing"
	"time"

	"imlab/ledger"
)

// TestFailedButStored: a send refused with a definite error whose message
// a device stored anyway; the same after a try of unknown outcome is a
// recovered message instead (then lost where it did not arrive).
func TestFailedButStored(t *testing.T) {
	w := valid() // tick 3: device 1 (uid 1) to uid 3, refused 400
	w.deliveries = append(w.deliveries, dl(3, 3, 109, c13, 2, 3))
	v := check(t, w)
	expect(t, v, false, want{"recovered": {104}, FailedButStored: {109}})
	findingHas(t, v, FailedButStored, "send 3 was refused (status 400 after 1 tries), yet its message msg_id 109 is in device 3")
	w.attempts[2].TriedUnknown, w.attempts[2].Tries = true, 2
	expect(t, check(t, w), false, want{"recovered": {104, 109}, Lost: {109}})
}

// tinode writes a run against a target without an inbox or idempotent
// send: deliveries carry no inbox seq; the conversation log comes from the
// history witness (its catch-up read of every topic) and a delete log.
type tinode struct {
	caps       *ledger.Capabilities // nil: tinodeCaps
	pulls      []ledger.ConvPull
	pages      []ledger.HistoryPage
	revokes    []ledger.MsgAction
	deletes    []ledger.MsgAction
	clears     []ledger.Clear
	attempts   []ledger.Attempt
	deliveries []ledger.Delivery
	slots      []ledger.Slot
	heads      []ledger.ConvHead
	ranges     []ledger.DelRange
	notes      []ledger.Note
}

var tinodeCaps = &ledger.Capabilities{Driver: "tinode", Actions: []string{"history", ledger.DelRangeCapability}}

// tinodeValid: uids 1 (device 0) and 2 (device 1) talk in topic 7: 201
// (tick 1) and 202 (tick 2, tried twice and stored twice: 203 too), 204
// refused once at 300 ms after the heal at 100 ms... no: all accepted.
func tinodeValid() *tinode {
	w := &tinode{}
	ok := func(tick uint64, dev uint32, to, msg, seq uint64, tries uint8) ledger.Attempt {
		at := ms(int(tick) * 10)
		return ledger.Attempt{Tick: tick, Dev: dev, ConvType: 1, Target: to, Intended: at, Started: at, Ended: at + ms(1),
			Outcome: ledger.OK, Tries: tries, MsgID: msg, ConvID: 7, ConvSeq: seq}
	}
	w.attempts = []ledger.Attempt{ok(1, 0, 2, 201, 1, 1), ok(2, 1, 1, 202, 2, 1)}
	for _, a := range w.attempts {
		for dev := range uint32(2) {
			w.deliveries = append(w.deliveries, ledger.Delivery{Dev: dev, Via: ledger.Push, MsgID: a.MsgID, ConvID: 7, ConvSeq: a.ConvSeq, Tick: a.Tick, At: a.Ended + ms(1)})
		}
	}
	w.slots = []ledger.Slot{{ConvID: 7, ConvSeq: 1, MsgID: 201, Sender: 1, Tag: 1, At: time.Second}, {ConvID: 7, ConvSeq: 2, MsgID: 202, Sender: 2, Tag: 2, At: time.Second}}
	w.heads = []ledger.ConvHead{{ConvID: 7, MaxSeq: 2, At: time.Second}}
	w.notes = []ledger.Note{{Check: CheckHistoryWitness, Made: true, Drained: true, Convs: 1}}
	return w
}

func (w *tinode) check(t *testing.T, opts Options) *Verdict {
	t.Helper()
	dir := t.TempDir()
	caps := tinodeCaps
	if w.caps != nil {
		caps = w.caps
	}
	l, err := ledger.CreateWith(dir, ledger.Options{RunID: "tinode", Start: time.Now(), Shards: 2, Target: caps})
	if err != nil {
		t.Fatal(err)
	}
	s := l.Shard(0)
	for _, p := range w.pulls {
		if err := s.ConvPull(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range w.pages {
		if err := s.HistoryPage(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range w.revokes {
		s.Revoke(a)
	}
	for _, a := range w.deletes {
		s.Delete(a)
	}
	for _, a := range w.clears {
		s.Clear(a)
	}
	s.Device(ledger.Device{Dev: 0, UID: 1, Kind: ledger.Online, DID: "a"})
	s.Device(ledger.Device{Dev: 1, UID: 2, Kind: ledger.Online, DID: "b"})
	for i, a := range w.attempts {
		l.Shard(i).Attempt(a)
	}
	for _, d := range w.deliveries {
		l.Shard(int(d.Dev)).Delivery(d)
	}
	for i, x := range w.slots {
		if err := l.Shard(i).Slot(x); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range w.heads {
		s.ConvHead(h)
	}
	for _, r := range w.ranges {
		s.DelRange(r)
	}
	for _, n := range w.notes {
		if err := s.Note(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	v, err := CheckSourcesWith([]Source{{Dir: dir}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestNoInboxTarget: on a target without an inbox the inbox findings are
// NOT MADE with the reason, the conversation findings are made, and no
// gap in the evidence is claimed for what the target does not have.
func TestNoInboxTarget(t *testing.T) {
	v := tinodeValid().check(t, Options{})
	expect(t, v, true, want{})
	if v.Target != "tinode" || v.OK != 2 {
		t.Fatalf("target %q ok %d", v.Target, v.OK)
	}
	for _, n := range []string{Skipped, DoubleStored, SeqConflict, LostInStore, UnstoredAtAck} {
		if f := v.Findings[n]; !strings.Contains(f.NotMade, "keeps no per-user inbox log") {
			t.Fatalf("%s: not made %q", n, f.NotMade)
		}
	}
	for _, n := range []string{Lost, Unexpected, Reordered, AckMismatch, HistoryLost, HistoryMismatch, UnexplainedGap, FailedButStored, RetryDuplicate} {
		if f := v.Findings[n]; f.NotMade != "" {
			t.Fatalf("%s not made: %s", n, f.NotMade)
		}
	}
	for _, c := range []string{CheckInbox, CheckPullWitness, CheckStoreWitness, CheckReadAfterAck, CheckConvPulls, CheckRetention} {
		if ch := checkOf(t, v, c); ch.Made || !ch.Unexercised {
			t.Fatalf("%+v", ch)
		}
	}
	if ch := checkOf(t, v, CheckConvPulls); !strings.Contains(ch.Detail, "offers no conv-pull") {
		t.Fatalf("%+v", ch)
	}
	if u := v.Unmade(); len(u) != 0 {
		t.Fatalf("unmade %v", u)
	}
	// Lost and ack-mismatch are judged per device and conversation there
	// too.
	w := tinodeValid()
	w.deliveries = w.deliveries[1:]
	w.deliveries[1].ConvSeq = 5
	expect(t, w.check(t, Options{}), false, want{Lost: {201}, AckMismatch: {202}})
}

// TestRetryDuplicate: a retried publish stored twice on a target without
// idempotent send is its own finding, not lost, not unexpected, and does
// not decide; a second message of a send tried once stays unexpected.
func TestRetryDuplicate(t *testing.T) {
	w := tinodeValid()
	w.attempts[1].Tries = 2
	for dev := range uint32(2) {
		w.deliveries = append(w.deliveries, ledger.Delivery{Dev: dev, Via: ledger.Push, MsgID: 203, ConvID: 7, ConvSeq: 3, Tick: 2, At: ms(40)})
	}
	w.slots = append(w.slots, ledger.Slot{ConvID: 7, ConvSeq: 3, MsgID: 203, Sender: 2, Tag: 2, At: time.Second})
	v := w.check(t, Options{})
	expect(t, v, true, want{RetryDuplicate: {203}})
	findingHas(t, v, RetryDuplicate, "send 2, tried 2 times, stored twice: msg_id 202 and msg_id 203")
	if ch := checkOf(t, v, CheckRetries); !ch.Made || !strings.Contains(ch.Detail, "1 sends retried") {
		t.Fatalf("%+v", ch)
	}
	w.attempts[1].Tries = 1
	expect(t, w.check(t, Options{}), false, want{Unexpected: {203}})
}

// TestUnexplainedGap: a conv_seq with no message that no send of unknown
// outcome and no delete range explains.
func TestUnexplainedGap(t *testing.T) {
	w := tinodeValid()
	w.heads[0].MaxSeq = 3 // the topic's seq moved past a message never stored
	v := w.check(t, Options{})
	expect(t, v, false, want{})
	if f := v.Findings[UnexplainedGap]; f.Count != 1 || !slices.Equal(f.Convs, []uint64{7}) {
		t.Fatalf("gap %+v", f)
	}
	findingHas(t, v, UnexplainedGap, "conv 7: 1 conv_seqs up to 3 hold no message (3), 0 sends of unknown outcome")
	// A send of unknown outcome to the topic, never stored, explains it.
	unknown := ledger.Attempt{Tick: 3, Dev: 0, ConvType: 1, Target: 2, Intended: ms(30), Started: ms(30), Ended: ms(90), Outcome: ledger.Unknown, Tries: 1, Status: 504}
	w.attempts = append(w.attempts, unknown)
	expect(t, w.check(t, Options{}), true, want{})
	// A refused send explains none.
	w.attempts[2].Outcome, w.attempts[2].Status = ledger.Fail, 409
	expect(t, w.check(t, Options{}), false, want{})
	// A delete range does.
	w.ranges = []ledger.DelRange{{ConvID: 7, From: 3, To: 3, At: time.Second}}
	expect(t, w.check(t, Options{}), true, want{})
	// A hole in the middle counts the same; a stored message ACKed there
	// is not a gap but history-lost.
	w = tinodeValid()
	w.slots = w.slots[1:]
	v = w.check(t, Options{})
	expect(t, v, false, want{HistoryLost: {201}})
}

// TestRefusedAfterHeal: a conversation that keeps refusing sends longer
// than the bound after the last fault healed.
func TestRefusedAfterHeal(t *testing.T) {
	w := tinodeValid()
	refuse := func(tick uint64, at int, o ledger.Outcome) ledger.Attempt {
		return ledger.Attempt{Tick: tick, Dev: 0, ConvType: 1, Target: 2, Intended: ms(at), Started: ms(at), Ended: ms(at + 5), Outcome: o, Tries: 1, Status: 500, ConvID: 7}
	}
	w.attempts = append(w.attempts, refuse(10, 150, ledger.Fail), refuse(11, 400, ledger.Unknown), refuse(12, 500, ledger.Fail))
	w.ranges = []ledger.DelRange{{ConvID: 7, From: 3, To: 10, At: time.Second}} // whatever seqs the refused sends took
	live := &Liveness{Healed: ms(100), Bound: ms(200)}
	v := w.check(t, Options{Liveness: live})
	if f := v.Findings[RefusedAfterHeal]; v.Valid || f.Count != 2 || !slices.Equal(f.Convs, []uint64{7}) {
		t.Fatalf("valid %v, refused-after-heal %+v", v.Valid, f)
	}
	findingHas(t, v, RefusedAfterHeal, "uids 1 and 2 (conv 7) refused 2 sends started more than 200ms after the heal at 100ms (sends 11 12)")
	// One accepted after the heal, before the bound ran out: live again.
	ok := w.attempts[0]
	ok.Tick, ok.Intended, ok.Started, ok.Ended, ok.MsgID, ok.ConvSeq = 13, ms(250), ms(250), ms(251), 213, 3
	w.attempts = append(w.attempts, ok)
	for dev := range uint32(2) {
		w.deliveries = append(w.deliveries, ledger.Delivery{Dev: dev, Via: ledger.Push, MsgID: 213, ConvID: 7, ConvSeq: 3, Tick: 13, At: ms(260)})
	}
	w.slots = append(w.slots, ledger.Slot{ConvID: 7, ConvSeq: 3, MsgID: 213, Sender: 1, Tag: 13, At: time.Second})
	expect(t, w.check(t, Options{Liveness: live}), true, want{})
	// Without a heal time it is not judged, and says so.
	v = w.check(t, Options{})
	if ch := checkOf(t, v, CheckLiveness); ch.Made || !ch.Unexercised || v.Findings[RefusedAfterHeal].NotMade == "" {
		t.Fatalf("%+v", ch)
	}
	if _, err := CheckSourcesWith([]Source{{Dir: t.TempDir()}}, Options{Liveness: &Liveness{Bound: -1}}); err == nil || !strings.Contains(err.Error(), "bound") {
		t.Fatalf("a negative bound: %v", err)
	}
}

// TestTinodeMixSemantics: the client mix's actions judged with Tinode's
// semantics (capabilities del-range and read-mark): a revoke (a hard
// delete) hides the message from every member's pages and the log; a
// delete for one user hides it from that user only, with no del_list; a
// conversation pull reads above a conv_seq. Each rule is shown to fail
// when the target breaks it.
func TestTinodeMixSemantics(t *testing.T) {
	caps := &ledger.Capabilities{Driver: "tinode", Actions: []string{"conv-pull", "history", "revoke", "delete", "clear", "read",
		ledger.DelRangeCapability, ledger.ReadMarkCapability}}
	act := func(dev uint32, at int) ledger.Act {
		return ledger.Act{Dev: dev, ConvID: 7, Intended: ms(at), Started: ms(at), Ended: ms(at + 1), Outcome: ledger.OK, Status: 200}
	}
	page := func(dev uint32, seqs ...uint64) ledger.HistoryPage {
		p := ledger.HistoryPage{Act: act(dev, 100), From: 1, To: 2}
		for _, q := range seqs {
			p.Items = append(p.Items, ledger.PageItem{ConvSeq: q, MsgID: 200 + q, Sender: q, Tag: q})
		}
		return p
	}
	// uid 1 revokes 201 at 50 ms: gone for everyone (a range for all).
	w := tinodeValid()
	w.caps = caps
	w.revokes = []ledger.MsgAction{{Act: act(0, 50), ConvSeq: 1}}
	w.slots = w.slots[1:]
	w.ranges = []ledger.DelRange{{ConvID: 7, From: 1, To: 1, At: time.Second}}
	w.pages = []ledger.HistoryPage{page(1, 2)}
	expect(t, w.check(t, Options{}), true, want{})
	w.pages = []ledger.HistoryPage{page(1, 1, 2)}
	v := w.check(t, Options{})
	expect(t, v, false, want{HistoryView: {201}})
	findingHas(t, v, HistoryView, "revoked false, though a revoke was answered ok before")
	// uid 2 deletes 201 for itself: its pages lack it, uid 1's show it,
	// the log (read as uid 1) holds it with no del_list.
	w = tinodeValid()
	w.caps = caps
	w.deletes = []ledger.MsgAction{{Act: act(1, 50), ConvSeq: 1}}
	w.ranges = []ledger.DelRange{{ConvID: 7, From: 1, To: 1, UID: 2, At: time.Second}}
	w.pages = []ledger.HistoryPage{page(1, 2), page(0, 1, 2)}
	expect(t, w.check(t, Options{}), true, want{})
	w.pages = []ledger.HistoryPage{page(0, 2)}
	v = w.check(t, Options{})
	expect(t, v, false, want{HistoryView: {201}})
	findingHas(t, v, HistoryView, "msg_id 201 hidden, though ACKed before the page and neither deleted nor cleared by uid 1")
	// A conversation pull above conv_seq 0 must hold both messages.
	w = tinodeValid()
	w.caps = caps
	pull := ledger.ConvPull{Act: act(1, 100), Cursor: 0, Limit: 50, NextCursor: 2,
		Items: []ledger.PulledItem{{MsgID: 201, ConvSeq: 1}, {MsgID: 202, ConvSeq: 2}}}
	w.pulls = []ledger.ConvPull{pull}
	expect(t, w.check(t, Options{}), true, want{})
	pull.Items = pull.Items[1:]
	w.pulls = []ledger.ConvPull{pull}
	v = w.check(t, Options{})
	expect(t, v, false, want{ConvPullWrong: {201}})
	findingHas(t, v, ConvPullWrong, "leaves out conv_seq 1 (msg_id 201), ACKed before the page")
}

// TestDeleteExcusesOnlyBeforeTheRead: on a target with a delete log a
// device that never stored a message is excused only by a delete sent
// before the read that should have carried it: its first copy of a later
// conv_seq of the conversation, or, with none, the end of the drain (the
// history witness's read). A delete sent after that read leaves the
// message lost; a delete range alone excuses nothing.
func TestDeleteExcusesOnlyBeforeTheRead(t *testing.T) {
	caps := &ledger.Capabilities{Driver: "tinode", Actions: []string{"history", "revoke", "delete", ledger.DelRangeCapability}}
	act := func(dev uint32, at int) ledger.Act {
		return ledger.Act{Dev: dev, ConvID: 7, Intended: ms(at), Started: ms(at), Ended: ms(at + 1), Outcome: ledger.OK, Status: 200}
	}
	// Device 1 (uid 2) never stores 201 (conv_seq 1); it stores 202
	// (conv_seq 2) at 22 ms: its read above conv_seq 0 was done by then.
	world := func(deleteAt int) *tinode {
		w := tinodeValid()
		w.caps = caps
		w.deliveries = slices.DeleteFunc(w.deliveries, func(d ledger.Delivery) bool { return d.Dev == 1 && d.MsgID == 201 })
		w.deletes = []ledger.MsgAction{{Act: act(1, deleteAt), ConvSeq: 1}}
		w.ranges = []ledger.DelRange{{ConvID: 7, From: 1, To: 1, UID: 2, At: time.Second}}
		return w
	}
	expect(t, world(15).check(t, Options{}), true, want{})
	v := world(30).check(t, Options{})
	expect(t, v, false, want{Lost: {201}})
	findingHas(t, v, Lost, "201")
	// The delete range without the delete: nothing explains the miss.
	w := world(15)
	w.deletes = nil
	expect(t, w.check(t, Options{}), false, want{Lost: {201}})
	// A revoke (a delete for everyone) the same way.
	w = world(15)
	w.deletes, w.revokes = nil, []ledger.MsgAction{{Act: act(0, 15), ConvSeq: 1}}
	w.slots = w.slots[1:]
	w.ranges = []ledger.DelRange{{ConvID: 7, From: 1, To: 1, At: time.Second}}
	expect(t, w.check(t, Options{}), true, want{})
	w.revokes[0].Act = act(0, 30)
	expect(t, w.check(t, Options{}), false, want{Lost: {201}})
	// No later conv_seq stored: the read is the drain's, which the history
	// witness read at 1 s follows. Device 0 never stores 202 (conv_seq 2).
	last := func(deleteAt int) *tinode {
		w := tinodeValid()
		w.caps = caps
		w.deliveries = slices.DeleteFunc(w.deliveries, func(d ledger.Delivery) bool { return d.Dev == 0 && d.MsgID == 202 })
		w.deletes = []ledger.MsgAction{{Act: act(0, deleteAt), ConvSeq: 2}}
		w.ranges = []ledger.DelRange{{ConvID: 7, From: 2, To: 2, UID: 1, At: time.Second}}
		return w
	}
	expect(t, last(500).check(t, Options{}), true, want{})
	expect(t, last(1500).check(t, Options{}), false, want{Lost: {202}})
}

// TestDeleteRangeAloneHidesNothing: a history page that leaves out a
// message the delete log lists as deleted for its reader is excused only
// by that reader's delete sent before the page ended.
func TestDeleteRangeAloneHidesNothing(t *testing.T) {
	caps := &ledger.Capabilities{Driver: "tinode", Actions: []string{"history", "delete", ledger.DelRangeCapability}}
	act := func(dev uint32, at int) ledger.Act {
		return ledger.Act{Dev: dev, ConvID: 7, Intended: ms(at), Started: ms(at), Ended: ms(at + 1), Outcome: ledger.OK, Status: 200}
	}
	w := tinodeValid()
	w.caps = caps
	w.ranges = []ledger.DelRange{{ConvID: 7, From: 1, To: 1, UID: 2, At: time.Second}}
	w.pages = []ledger.HistoryPage{{Act: act(1, 100), From: 1, To: 2, Items: []ledger.PageItem{{ConvSeq: 2, MsgID: 202, Sender: 2, Tag: 2}}}}
	w.deletes = []ledger.MsgAction{{Act: act(1, 50), ConvSeq: 1}}
	expect(t, w.check(t, Options{}), true, want{})
	w.deletes[0].Act = act(1, 150) // after the page
	expect(t, w.check(t, Options{}), false, want{HistoryView: {201}})
	w.deletes = nil
	expect(t, w.check(t, Options{}), false, want{HistoryView: {201}})
}

// TestDeleteLogDropped: a deletion answered ok that the delete log leaves
// out is delete-log-dropped, and the message it hides from the history
// witness is not history-lost; without an answered deletion the same
// absence is history-lost.
func TestDeleteLogDropped(t *testing.T) {
	caps := &ledger.Capabilities{Driver: "tinode", Actions: []string{"history", "revoke", "delete", "clear", ledger.DelRangeCapability}}
	act := func(dev uint32, at int) ledger.Act {
		return ledger.Act{Dev: dev, ConvID: 7, Intended: ms(at), Started: ms(at), Ended: ms(at + 1), Outcome: ledger.OK, Status: 200}
	}
	// uid 1 (the witness's reader) deletes 201 for itself at 50 ms: the
	// witness's read lacks it.
	world := func() *tinode {
		w := tinodeValid()
		w.caps = caps
		w.deletes = []ledger.MsgAction{{Act: act(0, 50), ConvSeq: 1}}
		w.slots = w.slots[1:]
		w.ranges = []ledger.DelRange{{ConvID: 7, From: 1, To: 1, UID: 1, At: time.Second}}
		return w
	}
	v := world().check(t, Options{})
	expect(t, v, true, want{})
	if ch := checkOf(t, v, CheckDeleteLog); !ch.Made {
		t.Fatalf("%+v", ch)
	}
	w := world()
	w.ranges = nil // the log leaves the delete out
	v = w.check(t, Options{})
	expect(t, v, false, want{DeleteLogDropped: {201}})
	findingHas(t, v, DeleteLogDropped, "conv 7 conv_seq 1: device 0's delete answered ok, yet uid 1's delete log does not hold it")
	// Another uid's range is not uid 1's.
	w.ranges = []ledger.DelRange{{ConvID: 7, From: 1, To: 1, UID: 2, At: time.Second}}
	expect(t, w.check(t, Options{}), false, want{DeleteLogDropped: {201}})
	// The delete unanswered: nothing says it happened, the absence is a loss.
	w.ranges = nil
	w.deletes[0].Outcome, w.deletes[0].Status = ledger.Unknown, 0
	expect(t, w.check(t, Options{}), false, want{HistoryLost: {201}})
	// A clear by uid 2 up to 2 answered ok, its log holding only 1 (the
	// range after it swallowed): 202 dropped; the read as uid 1 holds both.
	w = tinodeValid()
	w.caps = caps
	w.clears = []ledger.Clear{{Act: act(1, 60), MinSeq: 2}}
	w.ranges = []ledger.DelRange{{ConvID: 7, From: 1, To: 1, UID: 2, At: time.Second}}
	expect(t, w.check(t, Options{}), false, want{DeleteLogDropped: {202}})
	w.ranges[0].To = 2
	expect(t, w.check(t, Options{}), true, want{})
	// A revoke is a delete for everyone: a range held by one member only
	// is dropped from the other's log.
	w = tinodeValid()
	w.caps = caps
	w.revokes = []ledger.MsgAction{{Act: act(0, 50), ConvSeq: 1}}
	w.slots = w.slots[1:]
	w.ranges = []ledger.DelRange{{ConvID: 7, From: 1, To: 1, UID: 2, At: time.Second}}
	expect(t, w.check(t, Options{}), false, want{DeleteLogDropped: {201}})
	w.ranges[0].UID = 0
	expect(t, w.check(t, Options{}), true, want{})
	// A target without a delete log does not exercise the check.
	w = tinodeValid()
	w.caps = &ledger.Capabilities{Driver: "tinode", Actions: []string{"history"}}
	if ch := checkOf(t, w.check(t, Options{}), CheckDeleteLog); ch.Made || !ch.Unexercised {
		t.Fatalf("%+v", ch)
	}
}
