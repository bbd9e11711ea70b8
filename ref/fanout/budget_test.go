package fanout

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/internal/budget"
	"imlab/ref/model"
)

// inboxTierBudget is what one inbox-tier transaction of the uk_uid_msg
// strategy sends to MySQL, by statement kind, per committed transaction,
// (ARCHITECTURE.md, "The inbox tier's budget"): one INSERT, no savepoint,
// because a transaction's rows (at most InboxSinkConfig.MaxRowsPerTx) fit
// one INSERT (inbox.Config.InsertChunk). The body comes from the event and the
// already-delivered check is the INSERT's own: no SELECT msg_content, no
// SELECT offline_msg in a batch without duplicates. A change that adds a
// round trip must change this table.
var inboxTierBudget = map[string]map[string]int64{
	// The same recipients again: their fence rows exist.
	"again": {
		"BEGIN":              1,
		"SELECT seq_fence":   1, // lock the recipients' fence rows
		"INSERT offline_msg": 1,
		"UPDATE seq_fence":   1, // raise them
		"COMMIT":             1,
	},
	// Everything redelivered (a replay from offset 0): the INSERT is
	// refused on uk_uid_msg, the lookup finds every row, nothing is written
	// and the fence is not moved.
	"replay": {
		"BEGIN":              1,
		"SELECT seq_fence":   1,
		"INSERT offline_msg": 1, // refused: 1062 on uk_uid_msg
		"SELECT offline_msg": 1, // the rows that exist, 500 pairs per statement (one more per 500 rows)
		"COMMIT":             1,
	},
}

// replayLookupChunk is inbox's pairs per already-delivered lookup.
const replayLookupChunk = 500

// TestInboxTierBatchBudget pins the round trips of the inbox tier on
// MariaDB and kfake: the consumer drains stored-body events (what the
// store and outbox policies publish) of 1:1 and group conversations, and
// every committed transaction of each shape sends exactly
// inboxTierBudget's statements and one Redis pipeline (the seqs),
// whatever the batch sizes turned out to be.
func TestInboxTierBatchBudget(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, counted, err := budget.OpenMySQL(f.my.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxIdleConns(32)
	rc := budget.CountRedis(f.rd.Client)
	var convs []uint64
	for i := uint64(1); i <= 48; i++ {
		convs = append(convs, convIDs(t, [][2]uint64{{i, i + 100}})[0])
	}
	for g := uint64(1); g <= 2; g++ {
		var ms []uint64
		for u := uint64(1); u <= model.MaxGroupMembers; u++ {
			ms = append(ms, 1000*g+u)
		}
		f.groups[g] = ms
		convs = append(convs, g)
	}
	// Messages per conversation and phase: a group's 6 are 3,000 rows in
	// one partition, more than one INSERT of 2,000 rows would carry.
	const per = 6
	rowsPer := per * (48*2 + 2*model.MaxGroupMembers)
	cfg := testConsumerConfig(f.brokers, f.tp)
	nextMsg, nextSeq := uint64(5_000_000), uint64(0)

	drain := func(shape string, publish bool) {
		t.Helper()
		n := per * len(convs)
		if publish {
			f.publishStored(t, ctx, convs, nextSeq, per, nextMsg)
			nextMsg += uint64(n)
			nextSeq += per
		} else {
			n *= 2 // the replay: both phases' records
			resetGroup(t, ctx, f.brokers, cfg.Group, f.tp.Fanout)
		}
		s := f.sinkOn(t, db, DedupUK)
		h := &benchHandler{h: s, want: int64(n), done: make(chan struct{})}
		s0, r0 := counted.Snapshot(), rc.Snapshot()
		stop := runConsumer(t, cfg, h, f.prod)
		select {
		case <-h.done:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		// A batch handled but not yet marked when the consumer stops is
		// delivered again to the next phase: wait for the commits.
		waitCaughtUp(t, ctx, f.brokers, f.tp, cfg.Group)
		stop()
		d, r1 := counted.Snapshot().Sub(s0), rc.Snapshot()
		txs := d.Commits
		got := map[string]int64{}
		for k, v := range d.Kinds {
			got[k] = v.N
		}
		if shape == "first" {
			// "again"'s statements, plus per transaction at most one
			// fence creation, each followed by one more lock.
			want := map[string]int64{}
			for k, v := range inboxTierBudget["again"] {
				want[k] = v * txs
			}
			if created := got["INSERT seq_fence"]; created >= 1 && created <= txs {
				want["INSERT seq_fence"] = created
				want["SELECT seq_fence"] += created
			} else {
				t.Errorf("first: %d fence creations in %d transactions of new recipients", created, txs)
			}
			if !maps.Equal(got, want) {
				t.Errorf("first: %d transactions sent\n%v\nwant\n%v", txs, sortedKinds(got), sortedKinds(want))
			}
		} else {
			want := map[string]int64{}
			for k, v := range inboxTierBudget[shape] {
				want[k] = v * txs
			}
			if l := got["SELECT offline_msg"]; shape == "replay" && l > txs && l <= txs+int64(2*rowsPer/replayLookupChunk) {
				want["SELECT offline_msg"] = l // a transaction of more than 500 rows looks them up in chunks
			}
			if !maps.Equal(got, want) {
				t.Errorf("%s: %d transactions sent\n%v\nwant\n%v", shape, txs, sortedKinds(got), sortedKinds(want))
			}
		}
		if p := r1.Pipelines - r0.Pipelines; p != txs {
			t.Errorf("%s: %d Redis pipelines for %d transactions, want 1 each (the seq proposals)", shape, p, txs)
		}
		if d.Rollbacks != 0 {
			t.Errorf("%s: %d rollbacks", shape, d.Rollbacks)
		}
		rows := rowsPer
		if shape == "replay" {
			rows *= 2
		}
		t.Logf("%s: %d deliveries, %d rows in %d transactions: %.1f round trips each, %.4f statements per row",
			shape, n, rows, txs, float64(d.RoundTrips())/float64(max(txs, 1)), float64(d.Statements())/float64(rows))
	}
	drain("first", true)
	drain("again", true)
	before := inboxRows(t, f.my.DB)
	if len(before) != 2*rowsPer {
		t.Fatalf("%d inbox rows, want %d", len(before), 2*rowsPer)
	}
	checkConvOrder(t, f.my.DB)
	drain("replay", false)
	if after := inboxRows(t, f.my.DB); !slices.Equal(before, after) {
		t.Fatalf("the replay changed the inbox: %d rows before, %d after", len(before), len(after))
	}
}

func sortedKinds(m map[string]int64) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return out
}

// publishStored stores per messages of each conversation (conv_seqs after
// seq0) and publishes their stored-body events, as the store policy does.
func (f *fixture) publishStored(t testing.TB, ctx context.Context, convs []uint64, seq0 uint64, per int, firstMsg uint64) {
	t.Helper()
	ms := f.messages(t, convs, seq0, per, firstMsg, "budget")
	if err := StoreMessages(ctx, f.my.DB, ms); err != nil {
		t.Fatal(err)
	}
	recs := make([]*kgo.Record, 0, len(ms))
	for _, m := range ms {
		recs = append(recs, eventRecord(t, f.tp.Fanout, StoredEvent(m)))
	}
	if err := f.prod.PublishSync(ctx, recs); err != nil {
		t.Fatal(err)
	}
}
