package reconcile_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"imlab/internal/testenv"
	"imlab/ref/fanout"
	"imlab/ref/history"
	"imlab/ref/model"
	"imlab/ref/reconcile"
)

// newFerretHistory returns a history store on a fresh database of an
// embedded FerretDB started for this test.
func newFerretHistory(t *testing.T) *history.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := history.New(ctx, testenv.NewFerretDB(t), history.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// deliveredPipeline runs the store policy with a consumer, sends a mixed
// 1:1 / group load and waits until every inbox row is there.
func deliveredPipeline(t *testing.T, ctx context.Context) *pipeline {
	t.Helper()
	p := newPipeline(t, fanout.PolicyStore)
	p.createGroup(ctx)
	p.startConsumer()
	p.send(ctx, "a", 4, 12)
	if lost, total := p.waitDelivered(ctx, 20*time.Second); lost != 0 {
		t.Fatalf("%d of %d inbox rows missing", lost, total)
	}
	return p
}

func (p *pipeline) ackedIDs() []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]uint64, 0, len(p.acked))
	for id := range p.acked {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// TestReverseReportsAndRepairsFromHistory: inbox rows whose msg_content row
// is gone are reported (count and sample) by the reverse pass; without a
// history source nothing is repaired; with the history store (embedded
// FerretDB, found by conv_id and msg_id alone) the bodies it holds are
// restored exactly, the one it lacks stays reported; a re-run repairs
// nothing twice.
func TestReverseReportsAndRepairsFromHistory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	since := time.Now().Add(-time.Minute)
	p := deliveredPipeline(t, ctx)
	ids := p.ackedIDs()
	orig, err := fanout.LoadMessages(ctx, p.db, ids)
	if err != nil || len(orig) != len(ids) {
		t.Fatalf("load %d messages: %d, %v", len(ids), len(orig), err)
	}
	// The history tier holds every message but the last one deleted below.
	gone := []uint64{ids[0], ids[7], ids[19], ids[30], ids[len(ids)-1]}
	notInHistory := gone[len(gone)-1]
	hist := newFerretHistory(t)
	var toHistory []model.Message
	for _, id := range ids {
		if id != notInHistory {
			toHistory = append(toHistory, orig[id])
		}
	}
	if err := hist.WriteBatch(ctx, toHistory); err != nil {
		t.Fatal(err)
	}
	wantMissing, lastMissing := 0, 0
	for _, id := range gone {
		wantMissing += len(p.acked[id])
		if _, err := p.db.ExecContext(ctx, "DELETE FROM msg_content WHERE msg_id = ?", id); err != nil {
			t.Fatal(err)
		}
	}
	lastMissing = len(p.acked[notInHistory])
	until := time.Now().Add(time.Second)

	rep, err := p.rec.Reverse(ctx, since, until)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Missing != int64(wantMissing) || rep.Repaired != 0 || len(rep.Sample) == 0 || rep.Rows < int64(wantMissing) {
		t.Fatalf("without history: %+v, want %d missing, none repaired", rep, wantMissing)
	}

	reg := prometheus.NewRegistry()
	m, err := reconcile.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := reconcile.New(reconcile.DefaultConfig(), p.db, p.writer(nil), p.svc.Members, hist, m)
	if err != nil {
		t.Fatal(err)
	}
	rep, err = rec.Reverse(ctx, since, until)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Missing != int64(wantMissing) || rep.Repaired != int64(len(gone)-1) {
		t.Fatalf("with history: %+v, want %d missing and %d bodies restored", rep, wantMissing, len(gone)-1)
	}
	if got := testenv.Metric(t, reg, "imlab_reconcile_repairs_total", map[string]string{"kind": "reverse"}); got != float64(len(gone)-1) {
		t.Fatalf("imlab_reconcile_repairs_total{kind=reverse} = %v", got)
	}
	back, err := fanout.LoadMessages(ctx, p.db, gone)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range gone[:len(gone)-1] {
		b, w := back[id], orig[id]
		if b.MsgID != w.MsgID || b.ConvID != w.ConvID || b.ConvType != w.ConvType || b.ConvSeq != w.ConvSeq ||
			b.SenderUID != w.SenderUID || b.ClientMsgID != w.ClientMsgID || b.Content != w.Content || !b.CreatedAt.Equal(w.CreatedAt) {
			t.Fatalf("restored body of %d: %+v, want %+v", id, b, w)
		}
	}
	if _, ok := back[notInHistory]; ok {
		t.Fatal("a body no source holds came back")
	}
	rep, err = rec.Reverse(ctx, since, until)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Missing != int64(lastMissing) || rep.Repaired != 0 {
		t.Fatalf("re-run: %+v, want %d missing (the message history lacks), none repaired", rep, lastMissing)
	}
}

// TestPushRecordsUnpulledOnce: inbox rows no device of their uid has been
// served N minutes after they were written get one offline_push record
// each; rows at or below a device's served or acknowledged seq do not;
// nothing is recorded before N minutes; a re-run records nothing twice and
// a uid that has since pulled drops out of the unpulled count.
func TestPushRecordsUnpulledOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	since := time.Now().Add(-time.Minute)
	p := deliveredPipeline(t, ctx)
	until := time.Now().Add(time.Second)
	count := func(q string, args ...any) int64 {
		var n int64
		if err := p.db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	total := count("SELECT COUNT(*) FROM offline_msg")
	// uid 1 was served up to seq 3 on one device, uid 2 acknowledged seq 5.
	if _, err := p.db.ExecContext(ctx, "INSERT INTO sync_served (uid, device_id, served_seq, updated_at) VALUES (1, 'd1', 3, NOW(3)), (1, 'd2', 1, NOW(3))"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.db.ExecContext(ctx, "INSERT INTO sync_cursor (uid, device_id, pull_seq, updated_at) VALUES (2, 'd1', 5, NOW(3))"); err != nil {
		t.Fatal(err)
	}
	want := total - count("SELECT COUNT(*) FROM offline_msg WHERE (uid = 1 AND seq <= 3) OR (uid = 2 AND seq <= 5)")
	if want <= 0 || want == total {
		t.Fatalf("fixture: %d of %d rows unpulled", want, total)
	}

	rep, err := p.rec.Push(ctx, since, until, time.Now())
	if err != nil || rep.Unpulled != 0 || rep.Recorded != 0 {
		t.Fatalf("before N minutes: %+v, %v", rep, err)
	}
	later := time.Now().Add(reconcile.DefaultConfig().PushAfter + time.Minute)
	rep, err = p.rec.Push(ctx, since, until, later)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Unpulled != want || rep.Recorded != want || count("SELECT COUNT(*) FROM offline_push") != want {
		t.Fatalf("after N minutes: %+v, want %d unpulled and recorded", rep, want)
	}
	if n := count(`SELECT COUNT(*) FROM offline_push x JOIN offline_msg o ON o.uid = x.uid AND o.msg_id = x.msg_id
		WHERE o.seq = x.seq AND o.conv_id = x.conv_id AND x.status = 0`); n != want {
		t.Fatalf("%d of %d offline_push records match their inbox rows", n, want)
	}
	if n := count("SELECT COUNT(*) FROM offline_push WHERE (uid = 1 AND seq <= 3) OR (uid = 2 AND seq <= 5)"); n != 0 {
		t.Fatalf("%d records for rows already served", n)
	}
	rep, err = p.rec.Push(ctx, since, until, later)
	if err != nil || rep.Unpulled != want || rep.Recorded != 0 || count("SELECT COUNT(*) FROM offline_push") != want {
		t.Fatalf("re-run: %+v, %v; want %d unpulled, nothing recorded", rep, err, want)
	}
	// uid 3 pulls everything: it drops out of the unpulled rows.
	u3 := count("SELECT COUNT(*) FROM offline_msg WHERE uid = 3")
	if _, err := p.db.ExecContext(ctx, "INSERT INTO sync_served (uid, device_id, served_seq, updated_at) SELECT 3, 'd1', MAX(seq), NOW(3) FROM offline_msg WHERE uid = 3"); err != nil {
		t.Fatal(err)
	}
	rep, err = p.rec.Push(ctx, since, until, later)
	if err != nil || rep.Unpulled != want-u3 || rep.Recorded != 0 {
		t.Fatalf("after uid 3 pulled: %+v, %v; want %d unpulled", rep, err, want-u3)
	}
}

// TestForwardReorderCounted: the forward pass repairs a group message's
// missing inbox rows. For the conversation's first message every member
// already has later ones, so each repaired row lands behind them and is
// counted as reordered (exactly what the lab checker would flag); for its
// newest message the repaired rows append in order and are not counted.
// The count equals the deviations measured in the inboxes.
func TestForwardReorderCounted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	since := time.Now().Add(-time.Minute)
	p := deliveredPipeline(t, ctx)
	if d := orderDeviations(t, p.db); d != 0 {
		t.Fatalf("%d deviations before the test", d)
	}
	conv, err := model.GroupConvID(9)
	if err != nil {
		t.Fatal(err)
	}
	var first, last uint64
	if err := p.db.QueryRowContext(ctx, `SELECT
		(SELECT msg_id FROM msg_content WHERE conv_id = ? ORDER BY conv_seq LIMIT 1),
		(SELECT msg_id FROM msg_content WHERE conv_id = ? ORDER BY conv_seq DESC LIMIT 1)`, conv, conv).Scan(&first, &last); err != nil {
		t.Fatal(err)
	}
	if first == last {
		t.Fatal("fixture: one group message only")
	}
	res, err := p.db.ExecContext(ctx, "DELETE FROM offline_msg WHERE msg_id IN (?, ?)", first, last)
	if err != nil {
		t.Fatal(err)
	}
	deleted, _ := res.RowsAffected()
	rep, err := p.rec.Forward(ctx, since, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if rep.MissingRows != deleted || rep.Repaired != deleted || rep.Reordered != deleted/2 {
		t.Fatalf("forward: %+v; want %d missing and repaired, %d reordered (the first message's rows)", rep, deleted, deleted/2)
	}
	if d := orderDeviations(t, p.db); int64(d) != rep.Reordered {
		t.Fatalf("%d rows out of conversation order in the inboxes, the pass counted %d", d, rep.Reordered)
	}
	if lost, total := p.lost(ctx); lost != 0 {
		t.Fatalf("%d of %d rows missing after the repair", lost, total)
	}
}
