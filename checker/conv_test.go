package checker

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"imlab/checker/retention"
	"imlab/ledger"
)

// cw is a hand-made run with conversation actions, a history witness and
// retention (convValid), on top of a world.
type cw struct {
	*world
	pulls    []ledger.ConvPull
	pages    []ledger.HistoryPage
	revokes  []ledger.MsgAction
	deletes  []ledger.MsgAction
	clears   []ledger.Clear
	reads    []ledger.MarkRead
	slots    []ledger.Slot
	marks    []ledger.Watermark
	dels     []ledger.Deletion
	settings []ledger.RetentionSettings
	ranges   []ledger.DelRange
	contacts []ledger.Contact
}

func act(dev uint32, conv uint64, start, end int, o ledger.Outcome) ledger.Act {
	st := map[ledger.Outcome]uint16{ledger.OK: 200, ledger.Fail: 403, ledger.Unknown: 503}[o]
	return ledger.Act{Dev: dev, ConvID: conv, Intended: ms(start), Started: ms(start), Ended: ms(end), Outcome: o, Status: st}
}

func item(seq, msg, sender, tag uint64) ledger.PageItem {
	return ledger.PageItem{ConvSeq: seq, MsgID: msg, Sender: sender, Tag: tag}
}

// convValid: valid() and msg 106 (uid 1 to uid 2, conv_seq 2 of c12).
// Uid 1 revokes 101 [20, 21] ms; uid 2 deletes 106 for itself [22, 23],
// marks c12 read [26, 27]; uid 3 clears g10 [24, 25] (min_seq 1). Uid 2
// reads c12's history before all that [15, 16] and after [40, 41], uid 1
// after; uid 3 and uid 2 read g10 after; uid 2 pulls c12 [30, 31]. The
// history witness (drained) agrees; retention deleted uid 2's seq 1 at 50
// ms, pulled by its only device.
func convValid() *cw {
	w := valid()
	w.attempts = append(w.attempts, ledger.Attempt{Tick: 5, Dev: 0, ConvType: 1, Target: 2, Intended: ms(5), Started: ms(5), Ended: ms(6),
		Outcome: ledger.OK, Tries: 1, MsgID: 106, ConvID: c12, ConvSeq: 2})
	w.deliveries = append(w.deliveries, dl(0, 4, 106, c12, 2, 5), dl(1, 4, 106, c12, 2, 5), dl(2, 3, 106, c12, 2, 5))
	w.witness = append(w.witness, ledger.Witness{UID: 1, Seq: 4, MsgID: 106, ConvID: c12, ConvSeq: 2, Tick: 5},
		ledger.Witness{UID: 2, Seq: 3, MsgID: 106, ConvID: c12, ConvSeq: 2, Tick: 5})
	w.notes = []ledger.Note{{Check: CheckHistoryWitness, Made: true, Drained: true, Convs: 3}, {Check: CheckRetention, Made: true}}
	c := &cw{world: w}
	c.revokes = []ledger.MsgAction{{Act: act(0, c12, 20, 21, ledger.OK), ConvSeq: 1}}
	c.deletes = []ledger.MsgAction{{Act: act(2, c12, 22, 23, ledger.OK), ConvSeq: 2}}
	c.clears = []ledger.Clear{{Act: act(3, g10, 24, 25, ledger.OK), MinSeq: 1}}
	c.reads = []ledger.MarkRead{{Act: act(2, c12, 26, 27, ledger.OK), From: 1, To: 2}}
	unread := func(it ledger.PageItem) ledger.PageItem { it.Read = ledger.ReadNo; return it }
	c.pages = []ledger.HistoryPage{
		{Act: act(2, c12, 15, 16, ledger.OK), From: 1, To: 2, Items: []ledger.PageItem{unread(item(1, 101, 1, 1)), unread(item(2, 106, 1, 5))}},
		{Act: act(2, c12, 40, 41, ledger.OK), From: 1, To: 2, Items: []ledger.PageItem{read(revoked(item(1, 101, 1, 1))), {ConvSeq: 2, Tombstone: true}}},
		{Act: act(0, c12, 40, 41, ledger.OK), From: 1, To: 2, Items: []ledger.PageItem{read(revoked(item(1, 101, 1, 1))), read(item(2, 106, 1, 5))}},
		{Act: act(3, g10, 40, 41, ledger.OK), From: 1, To: 1},
		{Act: act(2, g10, 40, 41, ledger.OK), From: 1, To: 1, Items: []ledger.PageItem{item(1, 102, 2, 2)}},
	}
	c.pulls = []ledger.ConvPull{{Act: act(2, c12, 30, 31, ledger.OK), Cursor: 0, Limit: 50, NextCursor: 3,
		Items: []ledger.PulledItem{{Seq: 1, MsgID: 101, ConvSeq: 1}, {Seq: 3, MsgID: 106, ConvSeq: 2}}, SyncRead: true, SyncBefore: 2, SyncAfter: 2}}
	c.slots = []ledger.Slot{
		{ConvID: c12, ConvSeq: 1, MsgID: 101, Sender: 1, Tag: 1, Revoked: true, IsRead: true, At: ms(60)},
		{ConvID: c12, ConvSeq: 2, MsgID: 106, Sender: 1, Tag: 5, IsRead: true, DelList: []uint64{2}, At: ms(60)},
		{ConvID: g10, ConvSeq: 1, MsgID: 102, Sender: 2, Tag: 2, At: ms(60)},
		{ConvID: c13, ConvSeq: 1, MsgID: 104, Sender: 3, Tag: 4, At: ms(60)},
	}
	c.marks = []ledger.Watermark{{ConvID: g10, UID: 3, MinSeq: 1, At: ms(60)}}
	c.settings = []ledger.RetentionSettings{{MaxAge: time.Minute, PulledMinAge: ms(10), Interval: time.Second}}
	c.dels = []ledger.Deletion{{UID: 2, Seq: 1, MsgID: 101, CreatedAt: ms(2), DeletedAt: ms(50), Reason: ledger.RetentionPulled}}
	return c
}

func (c *cw) write(t *testing.T, l *ledger.Ledger) {
	for i, p := range c.pulls {
		if err := l.Shard(i).ConvPull(p); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range c.pages {
		if err := l.Shard(i).HistoryPage(p); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range c.revokes {
		l.Shard(i).Revoke(a)
	}
	for i, a := range c.deletes {
		l.Shard(i).Delete(a)
	}
	for i, a := range c.clears {
		l.Shard(i).Clear(a)
	}
	for i, a := range c.reads {
		l.Shard(i).MarkRead(a)
	}
	for i, s := range c.slots {
		if err := l.Shard(i).Slot(s); err != nil {
			t.Fatal(err)
		}
	}
	for i, x := range c.marks {
		l.Shard(i).Watermark(x)
	}
	for i, x := range c.settings {
		l.Shard(i).Retention(x)
	}
	for i, x := range c.dels {
		l.Shard(i).Deletion(x)
	}
	for i, x := range c.ranges {
		l.Shard(i).DelRange(x)
	}
	for i, x := range c.contacts {
		l.Shard(i).Contact(x)
	}
}

func (c *cw) check(t *testing.T) *Verdict {
	t.Helper()
	c.more = c.write
	return check(t, c.world)
}

// findingHas fails unless finding name's examples say every one of words.
func findingHas(t *testing.T, v *Verdict, name string, words ...string) {
	t.Helper()
	all := strings.Join(v.Findings[name].Examples, "\n")
	for _, w := range words {
		if !strings.Contains(all, w) {
			t.Fatalf("%s: no example says %q:\n%s", name, w, all)
		}
	}
}

func TestConversationValid(t *testing.T) {
	v := convValid().check(t)
	expect(t, v, true, want{"recovered": {104}})
	for _, name := range []string{CheckHistoryWitness, CheckHistoryPages, CheckConvPulls, CheckRetention} {
		if c := checkOf(t, v, name); !c.Made || c.Unexercised {
			t.Fatalf("check %+v", c)
		}
	}
	cc := v.Conversations
	if cc == nil || cc.Pulls != 1 || cc.Pages != 5 || cc.Revokes != 1 || cc.Deletes != 1 || cc.Clears != 1 || cc.Reads != 1 || cc.Slots != 4 || cc.Deletions != 1 {
		t.Fatalf("counts %+v", cc)
	}
	for _, n := range []string{HistoryLost, HistoryMismatch, HistoryOverwritten, HistoryDuplicated, HistoryView, ConvPullWrong, RetentionUnpulled, RetentionEarly} {
		if v.Findings[n].NotMade != "" {
			t.Fatalf("%s not made: %s", n, v.Findings[n].NotMade)
		}
	}
}

// TestHistoryLost: the store lacks an ACKed message, or a recovered one;
// a delete range of the target's delete log explains a hole; a purged
// slot is no loss.
func TestHistoryLost(t *testing.T) {
	c := convValid()
	c.slots = slices.Delete(c.slots, 1, 2) // 106
	expect(t, c.check(t), false, want{"recovered": {104}, HistoryLost: {106}})
	c = convValid()
	c.slots = c.slots[:3] // 104, recovered
	expect(t, c.check(t), false, want{"recovered": {104}, HistoryLost: {104}})
	c = convValid()
	c.slots = slices.Delete(c.slots, 1, 2)
	c.ranges = []ledger.DelRange{{ConvID: c12, From: 2, To: 2, At: ms(60)}}
	expect(t, c.check(t), true, want{"recovered": {104}})
	c = convValid()
	c.slots[3] = ledger.Slot{ConvID: c13, ConvSeq: 1, Purged: true, At: ms(60)}
	expect(t, c.check(t), true, want{"recovered": {104}})
}

// TestHistoryNotDrained: a history witness whose note does not say the
// history tier drained is not judged, never valid by default: the check
// is not made (a gap) and its findings say why.
func TestHistoryNotDrained(t *testing.T) {
	c := convValid()
	c.slots = c.slots[:1] // the store read while still being written
	c.notes[0].Drained = false
	v := c.check(t)
	expect(t, v, true, want{"recovered": {104}})
	ch := checkOf(t, v, CheckHistoryWitness)
	if ch.Made || ch.Unexercised || !strings.Contains(ch.Detail, "not drained") || !slices.Contains(v.Unmade(), CheckHistoryWitness) {
		t.Fatalf("check %+v unmade %v", ch, v.Unmade())
	}
	if f := v.Findings[HistoryLost]; !strings.Contains(f.NotMade, "not drained") {
		t.Fatalf("history-lost not made: %q", f.NotMade)
	}
	// No note at all, with slots: not judged either.
	c.notes = c.notes[1:]
	if ch := checkOf(t, c.check(t), CheckHistoryWitness); ch.Made || ch.Unexercised {
		t.Fatalf("slots without a note: %+v", ch)
	}
	// A conversation whose read failed is left out, the rest judged.
	c = convValid()
	c.slots = slices.Delete(c.slots, 1, 2)
	c.notes = append(c.notes, ledger.Note{Check: CheckHistoryWitness, Conv: c12, Reason: "timeout"})
	v = c.check(t)
	expect(t, v, true, want{"recovered": {104}})
	if ch := checkOf(t, v, CheckHistoryWitness); !ch.Made || !ch.Partial {
		t.Fatalf("partial history witness %+v", ch)
	}
}

// TestHistoryMismatch: each way the store can hold a message wrong.
func TestHistoryMismatch(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(c *cw)
		words string
	}{
		{"sender", func(c *cw) { c.slots[1].Sender = 2 }, "sender uid 2"},
		{"content", func(c *cw) { c.slots[1].Tag = 9 }, "names send 9"},
		{"revoke lost", func(c *cw) { c.slots[0].Revoked = false }, "revoked false, though a revoke was answered ok"},
		{"revoked by a refused revoke", func(c *cw) {
			c.revokes[0].Outcome = ledger.Fail
			c.pages[1].Items[0].Revoked = false
			c.pages[2].Items[0].Revoked = false
		}, "revoked true, though a revoke never happened"},
		{"del_list of a stranger", func(c *cw) { c.slots[1].DelList = []uint64{2, 3} }, "uid 3 is in its del_list but never deleted it"},
		{"delete lost", func(c *cw) { c.slots[1].DelList = nil }, "uid 2 deleted it (answered ok) but is not in its del_list"},
		{"read lost", func(c *cw) { c.slots[0].IsRead = false }, "is_read false"},
		{"read by nobody", func(c *cw) { c.slots[2].IsRead = true }, "is_read true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := convValid()
			tc.edit(c)
			v := c.check(t)
			if v.Valid || v.Findings[HistoryMismatch].Count != 1 {
				t.Fatalf("valid %v, history-mismatch %+v", v.Valid, v.Findings[HistoryMismatch])
			}
			findingHas(t, v, HistoryMismatch, tc.words)
		})
	}
	// The revoke refused: the pages must not show it revoked either.
	c := convValid()
	c.revokes[0].Outcome = ledger.Fail
	c.slots[0].Revoked = false
	expect(t, c.check(t), false, want{"recovered": {104}, HistoryView: {101}})
	// An unanswered revoke may or may not have happened: either state.
	for _, revoked := range []bool{true, false} {
		c := convValid()
		c.revokes[0].Outcome = ledger.Unknown
		c.slots[0].Revoked = revoked
		for _, p := range c.pages[1:3] {
			p.Items[0].Revoked = revoked
			if !revoked {
				p.Items[0].Tag = 1
			}
		}
		expect(t, c.check(t), true, want{"recovered": {104}})
	}
}

// TestWatermarkMismatch: a uid's clear watermark against the clears it
// made.
func TestWatermarkMismatch(t *testing.T) {
	c := convValid()
	c.marks = nil // the clear answered min_seq 1; the store has none
	v := c.check(t)
	if v.Valid || v.Findings[HistoryMismatch].Count != 1 || !slices.Equal(v.Findings[HistoryMismatch].Convs, []uint64{g10}) {
		t.Fatalf("lost watermark: %+v", v.Findings[HistoryMismatch])
	}
	findingHas(t, v, HistoryMismatch, "uid 3's clear watermark as stored: 0, below the min_seq 1")
	c = convValid()
	c.marks[0].MinSeq = 5
	findingHas(t, c.check(t), HistoryMismatch, "5, above every min_seq a clear was answered (1)")
	// Another clear, unanswered, may have set it higher.
	c.clears = append(c.clears, ledger.Clear{Act: act(3, g10, 30, 39, ledger.Unknown)})
	expect(t, c.check(t), true, want{"recovered": {104}})
}

// TestHistoryOverwritten: a conv_seq holding another message in the
// store, or two ACKs naming one conv_seq.
func TestHistoryOverwritten(t *testing.T) {
	c := convValid()
	c.slots[1].MsgID = 999
	v := c.check(t)
	expect(t, v, false, want{"recovered": {104}, HistoryOverwritten: {106, 999}, Unexpected: {999}})
	findingHas(t, v, HistoryOverwritten, "conv_seq 2 held msg_id 106, then msg_id 999 (history-witness 0)")
	c = convValid()
	c.attempts = append(c.attempts, ledger.Attempt{Tick: 6, Dev: 2, ConvType: 1, Target: 1, Intended: ms(7), Started: ms(7), Ended: ms(8),
		Outcome: ledger.OK, Tries: 1, MsgID: 107, ConvID: c12, ConvSeq: 2})
	c.deliveries = append(c.deliveries, dl(0, 5, 107, c12, 2, 6), dl(1, 5, 107, c12, 2, 6), dl(2, 4, 107, c12, 2, 6))
	v = c.check(t)
	if !slices.Equal(v.Findings[HistoryOverwritten].MsgIDs, []uint64{106, 107}) || v.Valid {
		t.Fatalf("two ACKs at one conv_seq: %+v", v.Findings[HistoryOverwritten])
	}
}

// TestHistoryDuplicated: one message at two conv_seqs of the store.
func TestHistoryDuplicated(t *testing.T) {
	c := convValid()
	c.slots = append(c.slots, ledger.Slot{ConvID: c12, ConvSeq: 3, MsgID: 106, Sender: 1, Tag: 5, At: ms(60)})
	v := c.check(t)
	expect(t, v, false, want{"recovered": {104}, HistoryDuplicated: {106}})
	findingHas(t, v, HistoryDuplicated, "msg_id 106 at conv_seq 2 and at conv_seq 3 of conv")
}

// TestHistoryView: each way a page can show the conversation wrong to the
// user who reads it, and the ways it may differ without being wrong.
func TestHistoryView(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(c *cw)
		msg   uint64
		words string
	}{
		{"shows what the user deleted", func(c *cw) {
			c.pages[1].Items[1] = ledger.PageItem{ConvSeq: 2, MsgID: 106, Sender: 1, Tag: 5, Read: ledger.ReadYes}
		},
			106, "shown, though uid 2 deleted it"},
		{"hides from another user what one deleted", func(c *cw) { c.pages[2].Items[1] = ledger.PageItem{ConvSeq: 2, Tombstone: true} },
			106, "hidden, though ACKed before the page and neither deleted nor cleared by uid 1"},
		{"leaves out what nobody hid", func(c *cw) { c.pages[2].Items = c.pages[2].Items[1:]; c.pages[2].Items[0].ConvSeq = 2 },
			101, "msg_id 101 hidden"},
		{"revoke not shown", func(c *cw) { c.pages[2].Items[0] = item(1, 101, 1, 1); c.pages[2].Items[0].Read = ledger.ReadYes },
			101, "revoked false, though a revoke was answered ok"},
		{"revoked with its content", func(c *cw) { c.pages[2].Items[0].Tag = 1 }, 101, "revoked, yet its content (send 1) is shown"},
		{"wrong content", func(c *cw) { c.pages[0].Items[1].Tag = 4 }, 106, "names send 4"},
		{"wrong sender", func(c *cw) { c.pages[0].Items[1].Sender = 3 }, 106, "sender uid 3"},
		{"shows what the user cleared", func(c *cw) { c.pages[3].Items = []ledger.PageItem{item(1, 102, 2, 2)} }, 102, "uid 3 cleared the conversation up to 1"},
		{"another user's clear hides", func(c *cw) { c.pages[4].Items = []ledger.PageItem{{ConvSeq: 1, Tombstone: true}} }, 102, "neither deleted nor cleared by uid 2"},
		{"read not shown", func(c *cw) { c.pages[2].Items[1].Read = ledger.ReadNo }, 106, "is_read false"},
		{"read shown unread", func(c *cw) { c.pages[0].Items[0].Read = ledger.ReadYes }, 101, "is_read true"},
		{"out of order", func(c *cw) { its := c.pages[0].Items; its[0], its[1] = its[1], its[0] }, 101, "out of order"},
		{"outside the range", func(c *cw) { c.pages[4].Items = append(c.pages[4].Items, ledger.PageItem{ConvSeq: 2, Tombstone: true}) }, 0, "outside the range asked"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := convValid()
			tc.edit(c)
			v := c.check(t)
			f := v.Findings[HistoryView]
			if v.Valid || f.Count != 1 || tc.msg != 0 && !slices.Equal(f.MsgIDs, []uint64{tc.msg}) {
				t.Fatalf("valid %v, history-view %+v", v.Valid, f)
			}
			findingHas(t, v, HistoryView, tc.words)
		})
	}
}

// TestHistoryViewConcurrent: an action overlapping the page may or may not
// show in it; one that started after the page ended must not.
func TestHistoryViewConcurrent(t *testing.T) {
	c := convValid()
	c.revokes[0].Act = act(0, c12, 39, 42, ledger.OK) // overlaps the late pages
	c.reads[0].Act = act(2, c12, 39, 42, ledger.OK)
	for _, p := range c.pages[1:3] {
		p.Items[0] = item(1, 101, 1, 1) // not (yet) revoked, not (yet) read
		p.Items[0].Read = ledger.ReadNo
	}
	expect(t, c.check(t), true, want{"recovered": {104}})
	c.revokes[0].Act = act(0, c12, 45, 46, ledger.OK) // after the pages
	c.pages[1].Items[0] = read(revoked(item(1, 101, 1, 1)))
	v := c.check(t)
	expect(t, v, false, want{"recovered": {104}, HistoryView: {101}})
	findingHas(t, v, HistoryView, "revoked true, though a revoke never happened")
}

func read(it ledger.PageItem) ledger.PageItem    { it.Read = ledger.ReadYes; return it }
func revoked(it ledger.PageItem) ledger.PageItem { it.Revoked, it.Tag = true, 0; return it }

// TestConvPull: each way a conversation pull can be wrong.
func TestConvPull(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(p *ledger.ConvPull)
		words string
	}{
		{"leaves an entry out", func(p *ledger.ConvPull) { p.Items = p.Items[:1]; p.NextCursor = 1 }, "leaves out seq 3 (msg_id 106)"},
		{"another conversation's entry", func(p *ledger.ConvPull) {
			p.Items = []ledger.PulledItem{p.Items[0], {Seq: 2, MsgID: 102, ConvSeq: 1}, p.Items[1]}
		}, "msg_id 102 at seq 2 is of conv 10"},
		{"at the cursor", func(p *ledger.ConvPull) { p.Cursor = 1; p.Items[0].Seq = 1 }, "seq 1 at or below the cursor"},
		{"out of order", func(p *ledger.ConvPull) { p.Items[0], p.Items[1] = p.Items[1], p.Items[0]; p.NextCursor = 3 }, "out of order"},
		{"next cursor", func(p *ledger.ConvPull) { p.NextCursor = 7 }, "next_cursor 7, its last seq is 3"},
		{"past the limit", func(p *ledger.ConvPull) { p.Limit = 1; p.HasMore = true }, "past the limit"},
		{"moves the sync cursor", func(p *ledger.ConvPull) { p.SyncAfter = 3 }, "sync cursor went from 2 to 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := convValid()
			tc.edit(&c.pulls[0])
			v := c.check(t)
			if v.Valid || v.Findings[ConvPullWrong].Count == 0 {
				t.Fatalf("valid %v, conv-pull %+v", v.Valid, v.Findings[ConvPullWrong])
			}
			findingHas(t, v, ConvPullWrong, tc.words)
		})
	}
	// A page with more to come may stop short; an entry retention deleted
	// before the page may be left out.
	c := convValid()
	c.pulls[0].Limit, c.pulls[0].HasMore, c.pulls[0].Items, c.pulls[0].NextCursor = 1, true, c.pulls[0].Items[:1], 1
	expect(t, c.check(t), true, want{"recovered": {104}})
	c = convValid()
	c.pulls[0].Items, c.pulls[0].NextCursor = c.pulls[0].Items[1:], 3
	c.dels[0].DeletedAt = ms(29)
	expect(t, c.check(t), true, want{"recovered": {104}})
	// Its entries are inbox observations: one at another seq is
	// double-stored.
	c = convValid()
	c.pulls[0].Items[1].Seq, c.pulls[0].NextCursor = 5, 5
	v := c.check(t)
	expect(t, v, false, want{"recovered": {104}, DoubleStored: {106}, ConvPullWrong: {106}})
}

// TestRetention: rows deleted before every device acknowledged them, or
// younger than the rules allow.
func TestRetention(t *testing.T) {
	c := convValid()
	// Uid 1's seq 4 (106): device 0 acknowledged up to 3, device 1 never.
	c.dels = append(c.dels, ledger.Deletion{UID: 1, Seq: 4, MsgID: 106, CreatedAt: ms(6), DeletedAt: ms(50), Reason: ledger.RetentionPulled})
	v := c.check(t)
	expect(t, v, false, want{"recovered": {104}, RetentionUnpulled: {106}})
	findingHas(t, v, RetentionUnpulled, "deleted while device 0 had acknowledged only up to 3")
	if f := v.Findings[RetentionUnpulled]; f.Pairs != 2 || !slices.Equal(f.UIDs, []uint64{1}) {
		t.Fatalf("pairs %d uids %v", f.Pairs, f.UIDs)
	}
	// An acknowledgement answered within retention.AckInFlight of the deletion may
	// have been stored before it.
	c.cursors = append(c.cursors, ledger.Cursor{Dev: 0, Seq: 4, Status: ledger.Accepted, At: ms(50) + retention.AckInFlight},
		ledger.Cursor{Dev: 1, Seq: 4, Status: ledger.Accepted, At: ms(51)})
	expect(t, c.check(t), true, want{"recovered": {104}})
	c.cursors[len(c.cursors)-2].At = ms(51) + retention.AckInFlight
	expect(t, c.check(t), false, want{"recovered": {104}, RetentionUnpulled: {106}})
	c.cursors = c.cursors[:len(c.cursors)-2]
	// Past the maximum age, it may go.
	c.dels[1].CreatedAt = -2 * time.Minute
	c.dels[1].Reason = ledger.RetentionExpired
	expect(t, c.check(t), true, want{"recovered": {104}})
	// Younger than the pulled minimum age, or expired before its time.
	c = convValid()
	c.dels[0].CreatedAt = ms(45)
	findingHas(t, c.check(t), RetentionEarly, "younger than the pulled minimum age 10ms")
	c = convValid()
	c.dels[0].Reason = ledger.RetentionExpired
	v = c.check(t)
	expect(t, v, false, want{"recovered": {104}, RetentionEarly: {101}})
	findingHas(t, v, RetentionEarly, "deleted as expired, younger than the maximum age 1m0s")
	// Deletions without the settings in force cannot be judged.
	c = convValid()
	c.settings = nil
	v = c.check(t)
	if ch := checkOf(t, v, CheckRetention); ch.Made || ch.Unexercised || v.Findings[RetentionEarly].NotMade == "" {
		t.Fatalf("no settings: %+v", ch)
	}
}

// TestRetentionKnownDevices: retention-unpulled counts a device from the
// first time the ledger shows the target had heard of it (its first
// contact, delivery, accepted acknowledgement or answered conversation
// pull), not before: the server waits only for the devices it has heard
// of, so a device first heard of after a deletion does not make it
// unpulled, nor its miss of the row lost or skipped; one heard of before
// it does.
func TestRetentionKnownDevices(t *testing.T) {
	c := convValid()
	// Uid 1's seq 4 (106) deleted at 50 ms: device 0 acknowledged it at
	// 45 ms; device 1 acknowledged nothing, and got 106 at 15 ms (known).
	c.dels = append(c.dels, ledger.Deletion{UID: 1, Seq: 4, MsgID: 106, CreatedAt: ms(6), DeletedAt: ms(50), Reason: ledger.RetentionPulled})
	c.cursors = append(c.cursors, ledger.Cursor{Dev: 0, Seq: 4, Status: ledger.Accepted, At: ms(45)})
	v := c.check(t)
	expect(t, v, false, want{"recovered": {104}, RetentionUnpulled: {106}})
	findingHas(t, v, RetentionUnpulled, "deleted while device 1 had acknowledged only up to 0")
	if f := v.Findings[RetentionUnpulled]; f.Pairs != 1 {
		t.Fatalf("pairs %d, want device 1's only", f.Pairs)
	}
	// Device 1 first heard of after the deletion (its first visit came
	// late: every delivery 45 ms later, from 56 ms on): not counted; its
	// refused acknowledgement at 20 ms (valid's) does not show it known,
	// the server may refuse a device it does not know.
	for i := range c.deliveries {
		if c.deliveries[i].Dev == 1 {
			c.deliveries[i].At += ms(45)
		}
	}
	expect(t, c.check(t), true, want{"recovered": {104}})
	// Nor is 106 lost or skipped on device 1 if it never got it, the row
	// gone before its first visit (its acknowledgement past seq 4 then,
	// later than an acknowledgement in flight at the deletion).
	c.deliveries = slices.DeleteFunc(c.deliveries, func(d ledger.Delivery) bool { return d.Dev == 1 && d.MsgID == 106 })
	c.cursors = append(c.cursors, ledger.Cursor{Dev: 1, Seq: 4, Status: ledger.Accepted, At: ms(51) + retention.AckInFlight})
	expect(t, c.check(t), true, want{"recovered": {104}})
	// Known at the deletion's very time, or before it by a first contact
	// (the registering pull before the load): counted.
	c.contacts = []ledger.Contact{{Dev: 1, At: ms(50)}}
	expect(t, c.check(t), false, want{"recovered": {104}, RetentionUnpulled: {106}, Lost: {106}, Skipped: {106}})
	c.contacts = []ledger.Contact{{Dev: 1, At: -ms(100)}}
	expect(t, c.check(t), false, want{"recovered": {104}, RetentionUnpulled: {106}, Lost: {106}, Skipped: {106}})
	// Nor does a contact after the deletion count.
	c.contacts = []ledger.Contact{{Dev: 1, At: ms(52)}}
	expect(t, c.check(t), true, want{"recovered": {104}})
	// An answered conversation pull before it does.
	c.pulls = append(c.pulls, ledger.ConvPull{Act: act(1, c12, 30, 31, ledger.OK), Cursor: 4, Limit: 50, NextCursor: 4})
	expect(t, c.check(t), false, want{"recovered": {104}, RetentionUnpulled: {106}, Lost: {106}, Skipped: {106}})
}

// TestLostInStoreRetained: a row the server's retention deleted is not
// lost-in-store (retention-unpulled and retention-early judge the
// deletion); one gone without a deletion record is.
func TestLostInStoreRetained(t *testing.T) {
	c := convValid()
	c.stored = slices.DeleteFunc(slices.Clone(c.witness), func(x ledger.Witness) bool { return x.UID == 2 && x.MsgID == 101 })
	c.notes = append(c.notes, ledger.Note{Check: CheckStoreWitness, Made: true, UIDs: 3})
	expect(t, c.check(t), true, want{"recovered": {104}})
	c.dels = nil
	expect(t, c.check(t), false, want{"recovered": {104}, LostInStore: {101}})
}

// TestOlderLedgerConversation: a version 2 ledger has none of the
// conversation evidence: its checks are named, not exercised, no gap; the
// findings they feed say why they are not made.
func TestOlderLedgerConversation(t *testing.T) {
	v := check(t, withStore())
	for _, name := range []string{CheckHistoryPages, CheckConvPulls, CheckRetention, CheckHistoryWitness} {
		ch := checkOf(t, v, name)
		if ch.Made || !ch.Unexercised || !strings.Contains(ch.Detail, "the run recorded no") {
			t.Fatalf("%+v", ch)
		}
	}
	if u := v.Unmade(); !slices.Equal(u, []string{CheckReadAfterAck}) { // no probe in withStore
		t.Fatalf("unmade %v", u)
	}
	if f := v.Findings[HistoryView]; f.NotMade == "" || f.Count != 0 {
		t.Fatalf("history-view %+v", f)
	}
	if v.Conversations != nil {
		t.Fatalf("counts %+v", v.Conversations)
	}
	// The same written as version 2: the checks say it predates them.
	dir := withStore().write(t, 2)
	files, _ := ledger.Files(dir)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.Replace(b, []byte(fmt.Sprintf(`"version":%d,`, ledger.Version)), []byte(`"version":2,`), 1)
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v, err := Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, v, true, want{"recovered": {104}})
	if ch := checkOf(t, v, CheckHistoryWitness); v.LedgerVersion != 2 || !ch.Unexercised || !strings.Contains(ch.Detail, "ledger version 2 predates") {
		t.Fatalf("version %d: %+v", v.LedgerVersion, ch)
	}
	if u := v.Unmade(); !slices.Equal(u, []string{CheckReadAfterAck}) {
		t.Fatalf("unmade %v", u)
	}
}
