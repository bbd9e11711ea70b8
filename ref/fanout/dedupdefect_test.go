package fanout

import (
	"context"
	"testing"
	"time"

	"imlab/ref/defect"
	"imlab/ref/inbox"
)

// TestDedupAbortedTransaction: a strategy's check runs inside the inbox
// transaction; when that transaction is rolled back (a reset connection, a
// timeout, a consumer killed mid-batch) the redelivery must find its items
// fresh again, or the record is acknowledged with no inbox row. The shipped
// defects of the redis (mark set before COMMIT) and mq_dedup (rows written
// outside the transaction) strategies break exactly that.
func TestDedupAbortedTransaction(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cases := []struct {
		strategy, defect string
		wantFresh        int // items Fresh still finds after the rolled-back attempt
	}{
		{DedupUK, "", 3},
		{DedupTable, "", 3},
		{DedupRedis, "", 3},
		{DedupTable, defect.MQDedupOutsideTx, 0},
		{DedupRedis, defect.RedisDedupMarkBeforeCommit, 0},
	}
	for i, c := range cases {
		t.Run(c.strategy+"/"+c.defect, func(t *testing.T) {
			ds, err := defect.Parse(c.defect)
			if err != nil {
				t.Fatal(err)
			}
			st, err := NewStrategy(c.strategy, StrategyDeps{Redis: f.rd.Client, Keys: f.rd.Keys, DB: f.my.DB, Defects: ds})
			if err != nil {
				t.Fatal(err)
			}
			msg := uint64(9_000_000 + 100*i)
			items := []inbox.Item{{UID: 71, MsgID: msg}, {UID: 72, MsgID: msg}, {UID: 71, MsgID: msg + 1}}
			attempt := func() int {
				tx, err := f.my.DB.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback() }() // the inbox transaction fails after the check
				fresh, err := st.Fresh(ctx, tx, items)
				if err != nil {
					t.Fatal(err)
				}
				return len(fresh)
			}
			if n := attempt(); n != len(items) {
				t.Fatalf("first attempt: %d fresh of %d", n, len(items))
			}
			if n := attempt(); n != c.wantFresh {
				t.Fatalf("after a rolled-back attempt: %d of %d items fresh; want %d", n, len(items), c.wantFresh)
			}
		})
	}
}
