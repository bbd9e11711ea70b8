package fanout

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/internal/testenv"
	"imlab/ref/model"
	"imlab/ref/send"
)

type fixture struct {
	brokers []string
	tp      Topics
	my      *testenv.MySQL
	rd      *testenv.Redis
	prod    *Producer
	groups  map[uint64][]uint64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{my: testenv.NewMySQL(t), rd: testenv.NewRedis(t), groups: map[uint64][]uint64{}}
	f.brokers, f.tp, f.prod = newKafka(t)
	return f
}

func (f *fixture) members(_ context.Context, g uint64) ([]uint64, error) {
	m, ok := f.groups[g]
	if !ok {
		return nil, fmt.Errorf("group %d: %w", g, model.ErrNotFound)
	}
	return m, nil
}

func (f *fixture) sink(t testing.TB, strategy string, hooks ...send.CommitHook) *InboxSink {
	t.Helper()
	return f.sinkOn(t, f.my.DB, strategy, hooks...)
}

// messages makes per messages of each conversation of convs, conv_seqs
// seq0+1..seq0+per, msg_ids after firstMsg, a group's sender its member at
// the conv_seq modulo its size; content "" is "m<msg_id>".
func (f *fixture) messages(t testing.TB, convs []uint64, seq0 uint64, per int, firstMsg uint64, content string) []model.Message {
	t.Helper()
	var ms []model.Message
	msg := firstMsg
	now := time.Now().UTC().Truncate(time.Millisecond)
	for s := seq0 + 1; s <= seq0+uint64(per); s++ {
		for _, cv := range convs {
			msg++
			typ, a, _, err := model.ParseConvID(cv)
			if err != nil {
				t.Fatal(err)
			}
			sender := a
			if typ == model.ConvGroup {
				sender = f.groups[a][int(s)%len(f.groups[a])]
			}
			body := content
			if body == "" {
				body = fmt.Sprintf("m%d", msg)
			}
			ms = append(ms, model.Message{MsgID: msg, ConvID: cv, ConvType: typ, ConvSeq: s, SenderUID: sender,
				ClientMsgID: fmt.Sprintf("c-%d", msg), Content: body, CreatedAt: now})
		}
	}
	return ms
}

// storeAndPublish stores n messages per conversation (content committed,
// as the store policy does) and publishes their locator events.
func (f *fixture) storeAndPublish(t *testing.T, ctx context.Context, convs []uint64, n int, firstMsg uint64) []model.Message {
	t.Helper()
	ms := f.messages(t, convs, 0, n, firstMsg, "")
	if err := StoreMessages(ctx, f.my.DB, ms); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for _, m := range ms {
		recs = append(recs, eventRecord(t, f.tp.Fanout, EventOf(m, false)))
	}
	if err := f.prod.PublishSync(ctx, recs); err != nil {
		t.Fatal(err)
	}
	return ms
}

type inboxRow struct{ UID, Seq, MsgID uint64 }

func inboxRows(t testing.TB, db *sql.DB) []inboxRow {
	t.Helper()
	rows, err := db.Query(`SELECT uid, seq, msg_id FROM offline_msg ORDER BY uid, seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []inboxRow
	for rows.Next() {
		var r inboxRow
		if err := rows.Scan(&r.UID, &r.Seq, &r.MsgID); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func countRows(t testing.TB, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkConvOrder asserts that each recipient's inbox seqs follow conv_seq
// order within every conversation, with no duplicate (uid, msg_id).
func checkConvOrder(t testing.TB, db *sql.DB) {
	t.Helper()
	rows, err := db.Query(`SELECT o.uid, o.seq, o.msg_id, o.conv_id, c.conv_seq FROM offline_msg o
		JOIN msg_content c ON c.msg_id = o.msg_id ORDER BY o.uid, o.seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type key struct{ uid, conv uint64 }
	last := map[key]uint64{}
	seen := map[[2]uint64]bool{}
	bad := 0
	for rows.Next() {
		var uid, seq, msg, conv, cseq uint64
		if err := rows.Scan(&uid, &seq, &msg, &conv, &cseq); err != nil {
			t.Fatal(err)
		}
		if seen[[2]uint64{uid, msg}] {
			t.Errorf("uid %d has msg %d twice", uid, msg)
		}
		seen[[2]uint64{uid, msg}] = true
		k := key{uid, conv}
		if cseq <= last[k] && bad < 10 {
			bad++
			t.Errorf("uid %d conv %d: conv_seq %d at seq %d after conv_seq %d", uid, conv, cseq, seq, last[k])
		}
		last[k] = cseq
	}
}

func resetGroup(t testing.TB, ctx context.Context, brokers []string, group, topic string) {
	t.Helper()
	adm := kadm.NewClient(testenv.KafkaClient(t, brokers))
	os := kadm.Offsets{}
	for p := int32(0); p < DefaultPartitions; p++ {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: 0, LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(ctx, group, os)
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Error(); err != nil {
		t.Fatal(err)
	}
}

func convIDs(t testing.TB, pairs [][2]uint64, groups ...uint64) []uint64 {
	var out []uint64
	for _, p := range pairs {
		id, err := model.SingleConvID(p[0], p[1])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return append(out, groups...)
}

// TestReplayDedup: for each strategy, process a topic, then replay every
// partition from offset 0: no second inbox row, no second seq, and the
// strategy itself recognised every replayed (uid, msg_id).
func TestReplayDedup(t *testing.T) {
	for _, strategy := range []string{DedupUK, DedupTable, DedupRedis} {
		t.Run(strategy, func(t *testing.T) {
			f := newFixture(t)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			f.groups[77] = []uint64{11, 12, 13, 14, 15, 16, 17, 18}
			convs := convIDs(t, [][2]uint64{{11, 12}, {11, 13}, {14, 19}, {20, 21}}, 77)
			const per = 30
			ms := f.storeAndPublish(t, ctx, convs, per, 1_000_000)
			wantRows := per * (4*2 + 8)

			s := f.sink(t, strategy)
			cfg := testConsumerConfig(f.brokers, f.tp)
			stop := runConsumer(t, cfg, s, f.prod)
			waitFor(t, 30*time.Second, "inbox rows", func() bool {
				return countRows(t, f.my.DB, "SELECT COUNT(*) FROM offline_msg") >= wantRows
			})
			stop()
			before := inboxRows(t, f.my.DB)
			if len(before) != wantRows {
				t.Fatalf("%d inbox rows, want %d", len(before), wantRows)
			}
			checkConvOrder(t, f.my.DB)
			fence := countRows(t, f.my.DB, "SELECT CAST(SUM(max_seq) AS SIGNED) FROM seq_fence")
			if strategy == DedupTable {
				if n := countRows(t, f.my.DB, "SELECT COUNT(*) FROM mq_dedup"); n != wantRows {
					t.Fatalf("mq_dedup has %d rows, want %d", n, wantRows)
				}
			}
			skipped0 := s.Strategy().Skipped()
			lostMarks := 0
			if strategy == DedupRedis {
				// A crash between COMMIT and SET NX leaves rows without
				// marks: drop some marks; uk_uid_msg must still hold.
				for _, m := range ms[:10] {
					lostMarks += int(f.rd.Client.Del(ctx, f.rd.Keys.MQDedup(m.MsgID, m.SenderUID)).Val())
				}
				if lostMarks != 10 {
					t.Fatalf("deleted %d marks, want 10", lostMarks)
				}
			}

			// Replay from offset 0 with a fresh sink (a restarted process).
			resetGroup(t, ctx, f.brokers, cfg.Group, f.tp.Fanout)
			s2 := f.sink(t, strategy)
			stop = runConsumer(t, cfg, s2, f.prod)
			defer func() { t.Logf("replay skipped %d", s2.Strategy().Skipped()) }()
			waitFor(t, 30*time.Second, "replay recognised", func() bool {
				return s2.Strategy().Skipped() >= int64(wantRows-lostMarks)
			})
			waitCaughtUp(t, ctx, f.brokers, f.tp, cfg.Group)
			stop()
			after := inboxRows(t, f.my.DB)
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("replay changed the inbox: %d rows before, %d after", len(before), len(after))
			}
			if f2 := countRows(t, f.my.DB, "SELECT CAST(SUM(max_seq) AS SIGNED) FROM seq_fence"); f2 != fence {
				t.Fatalf("replay moved the fence: %d → %d", fence, f2)
			}
			t.Logf("%s: %d messages, %d rows; first run skipped %d, replay skipped %d", strategy, len(ms), wantRows,
				skipped0, s2.Strategy().Skipped())
		})
	}
}

// waitCaughtUp waits until the group has committed every record.
func waitCaughtUp(t testing.TB, ctx context.Context, brokers []string, tp Topics, group string) {
	t.Helper()
	mc := DefaultMonitorConfig()
	mc.Brokers, mc.Topic, mc.DLQTopic, mc.Groups = brokers, tp.Fanout, tp.DLQ, []string{group}
	mo, err := NewMonitor(mc, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mo.Close()
	waitFor(t, 30*time.Second, "group caught up", func() bool {
		s, err := mo.Poll(ctx)
		return err == nil && len(s.Errors) == 0 && len(s.Partitions) > 0 && s.Records[group] == 0
	})
}

// An event marked InboxDone (strict's history feed) is skipped by the inbox
// tier without any lookup: even one whose message has no stored body is
// handled, and nothing is written; the same event unmarked is refused.
func TestInboxSinkSkipsInboxDone(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := f.sink(t, DedupUK)
	conv := convIDs(t, [][2]uint64{{31, 32}})[0]
	ev := Event{MsgID: 987654321, ConvID: conv, ConvSeq: 1, SenderUID: 31, SentAt: time.Now().UTC(), InboxDone: true}
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalEvent(b)
	if err != nil || !back.InboxDone || back.HasBody {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	if err := s.Handle(ctx, []Delivery{{Event: back}}); err != nil {
		t.Fatalf("inbox-done event: %v", err)
	}
	if n := countRows(t, f.my.DB, "SELECT COUNT(*) FROM offline_msg"); n != 0 {
		t.Fatalf("%d inbox rows written for an inbox-done event", n)
	}
	back.InboxDone = false
	if err := s.Handle(ctx, []Delivery{{Event: back}}); err == nil {
		t.Fatal("an unmarked event without a stored body was accepted")
	}
}

// The direct path's chain rule on the real MariaDB: a message is written
// only when its predecessor is in every recipient's inbox or written ahead
// of it in the same call; the rest are deferred, and every inbox stays in
// conversation order.
func TestHandleChained(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := f.sink(t, DedupUK)
	c1, _ := model.SingleConvID(1, 2)
	c2, _ := model.SingleConvID(3, 4)
	f.groups[7] = []uint64{10, 11, 12}
	g, _ := model.GroupConvID(7)
	var all []model.Message
	id := uint64(1000)
	mk := func(conv uint64, typ model.ConvType, seq, sender uint64) model.Message {
		id++
		m := model.Message{MsgID: id, ConvID: conv, ConvType: typ, ConvSeq: seq, SenderUID: sender,
			ClientMsgID: fmt.Sprintf("c-%d", id), Content: "x", CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
		all = append(all, m)
		return m
	}
	a := []model.Message{mk(c1, model.ConvSingle, 1, 1), mk(c1, model.ConvSingle, 2, 2), mk(c1, model.ConvSingle, 3, 1), mk(c1, model.ConvSingle, 4, 2)}
	b := []model.Message{mk(c2, model.ConvSingle, 1, 3), mk(c2, model.ConvSingle, 2, 4), mk(c2, model.ConvSingle, 3, 3)}
	gm := []model.Message{mk(g, model.ConvGroup, 1, 10), mk(g, model.ConvGroup, 2, 11)}
	if err := StoreMessages(ctx, f.my.DB, all); err != nil {
		t.Fatal(err)
	}
	run := func(wantWritten, wantDeferred int, ms ...model.Message) {
		t.Helper()
		ds := make([]Delivery, len(ms))
		for i, m := range ms {
			ds[i] = Delivery{Event: EventOf(m, true)}
		}
		w, d, err := s.HandleChained(ctx, ds)
		if err != nil || w != wantWritten || d != wantDeferred {
			t.Fatalf("written %d deferred %d (%v), want %d and %d", w, d, err, wantWritten, wantDeferred)
		}
	}
	// c1#3 comes before its predecessor in the call, c2#2's predecessor is
	// nowhere: both deferred; c1#2 follows c1#1 written ahead of it.
	run(2, 2, a[0], a[2], b[1], a[1])
	// c1#2 is in both inboxes now: c1#3 and c1#4 go; c2#1 starts its chain.
	run(3, 0, a[2], a[3], b[0])
	// c2#2 was deferred, so c2#3 still waits.
	run(0, 1, b[2])
	// A member who joined after g#1 does not have it: g#2 waits for the
	// queue or reconciliation rather than land in an inbox without g#1.
	run(1, 0, gm[0])
	f.groups[7] = []uint64{10, 11, 12, 13}
	run(0, 1, gm[1])
	f.groups[7] = []uint64{10, 11, 12}
	run(1, 0, gm[1])

	// Every inbox holds its conversations in conv_seq order.
	rows, err := f.my.DB.Query(`SELECT o.uid, m.conv_id, m.conv_seq FROM offline_msg o JOIN msg_content m ON m.msg_id = o.msg_id ORDER BY o.uid, o.seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	last := map[[2]uint64]uint64{}
	n := 0
	for rows.Next() {
		var uid, conv, seq uint64
		if err := rows.Scan(&uid, &conv, &seq); err != nil {
			t.Fatal(err)
		}
		k := [2]uint64{uid, conv}
		if seq != last[k]+1 {
			t.Fatalf("uid %d conv %d: conv_seq %d after %d", uid, conv, seq, last[k])
		}
		last[k] = seq
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := 2*4 + 2*1 + 3*2; n != want {
		t.Fatalf("%d inbox rows, want %d", n, want)
	}
}

// A stored-body event (store and outbox policies) is written from the body
// it carries: nothing is read back from msg_content and nothing is stored
// there, so its inbox rows and hook entries appear even with no
// msg_content row, with the event's content; a queue-policy event (a body
// not stored) still stores its body.
func TestInboxSinkStoredBody(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conv := convIDs(t, [][2]uint64{{41, 42}})[0]
	m := model.Message{MsgID: 555_001, ConvID: conv, ConvType: model.ConvSingle, ConvSeq: 1, SenderUID: 41,
		ClientMsgID: "c-555001", Content: "carried", CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	var got []model.InboxEntry
	s := f.sink(t, DedupUK, send.HookFunc(func(_ context.Context, es []model.InboxEntry) { got = append(got, es...) }))
	if err := s.Handle(ctx, []Delivery{{Event: StoredEvent(m)}}); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, f.my.DB, "SELECT COUNT(*) FROM offline_msg WHERE msg_id = ?", m.MsgID); n != 2 {
		t.Fatalf("%d inbox rows, want 2", n)
	}
	if n := countRows(t, f.my.DB, "SELECT COUNT(*) FROM msg_content"); n != 0 {
		t.Fatalf("a stored-body event stored its body again (%d rows)", n)
	}
	if len(got) != 2 || got[0].Content != "carried" || got[1].Content != "carried" {
		t.Fatalf("hook entries %+v", got)
	}
	q := m
	q.MsgID, q.ConvSeq, q.ClientMsgID = 555_002, 2, "c-555002"
	if err := s.Handle(ctx, []Delivery{{Event: EventOf(q, true)}}); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, f.my.DB, "SELECT COUNT(*) FROM msg_content WHERE msg_id = ?", q.MsgID); n != 1 {
		t.Fatalf("a queue-policy event's body was not stored (%d rows)", n)
	}
	checkConvOrder(t, f.my.DB)
}
