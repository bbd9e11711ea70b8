package fanout

import (
	"context"
	"testing"

	"imlab/internal/testenv"
	"imlab/ref/model"
)

// TestOutboxStatus finds a message's mq_outbox row by its event, as the
// outbox policy writes it, through the row's life.
func TestOutboxStatus(t *testing.T) {
	ctx := context.Background()
	f := &fixture{my: testenv.NewMySQL(t), tp: Topics{Fanout: "imlab.outbox.status"}, groups: map[uint64][]uint64{}}
	conv, err := model.SingleConvID(3, 4)
	if err != nil {
		t.Fatal(err)
	}
	ms := f.storeToOutbox(t, ctx, []uint64{conv}, 3, 1000, 1)
	for _, m := range ms {
		if st, err := OutboxStatus(ctx, f.my.DB, m.MsgID); err != nil || st != model.OutboxPending {
			t.Fatalf("msg %d: status %d, %v", m.MsgID, st, err)
		}
	}
	if _, err := f.my.DB.ExecContext(ctx, "UPDATE mq_outbox SET status = 2 WHERE id = (SELECT MIN(id) FROM (SELECT id FROM mq_outbox) x)"); err != nil {
		t.Fatal(err)
	}
	if st, err := OutboxStatus(ctx, f.my.DB, ms[0].MsgID); err != nil || st != model.OutboxConfirmed {
		t.Fatalf("confirmed row: status %d, %v", st, err)
	}
	if st, err := OutboxStatus(ctx, f.my.DB, 999999); err != nil || st != model.OutboxNone {
		t.Fatalf("no row: status %d, %v", st, err)
	}
}
