package lagpoll

import (
	"context"
	"testing"
	"time"

	"imlab/internal/testenv"
)

// TestRowCountSpacedByItsCost: the lab's inbox row count on a real MySQL
// (a COUNT(*) walks the whole table) is taken again only RowCountDuty
// times its own duration after it started; a sample before that has none,
// and the count it gives is the table's.
func TestRowCountSpacedByItsCost(t *testing.T) {
	my := testenv.NewMySQL(t)
	ctx := context.Background()
	if _, err := my.DB.ExecContext(ctx, `INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at)
		VALUES (1, 1, 11, 5, 1, 2, UTC_TIMESTAMP(3)), (1, 2, 12, 5, 1, 2, UTC_TIMESTAMP(3)), (3, 1, 11, 5, 1, 2, UTC_TIMESTAMP(3))`); err != nil {
		t.Fatal(err)
	}
	c := rowCounter{db: my.DB}
	t0 := time.Now()
	n := c.count(ctx)
	took := time.Since(t0)
	if n == nil || *n != 3 {
		t.Fatalf("first count = %v, want 3", n)
	}
	if !c.next.After(t0) || c.next.Sub(t0) > took*RowCountDuty {
		t.Fatalf("next count at %v after the first, want within (0, %v]", c.next.Sub(t0), took*RowCountDuty)
	}
	// Force a long previous count: the next one is not due for a minute.
	c.next = time.Now().Add(time.Minute)
	if n := c.count(ctx); n != nil {
		t.Fatalf("a count before it was due = %d, want none", *n)
	}
	c.next = time.Now()
	if n := c.count(ctx); n == nil || *n != 3 {
		t.Fatalf("a due count = %v, want 3", n)
	}
	if n := (&rowCounter{}).count(ctx); n != nil {
		t.Fatal("a counter without a database counted")
	}
}
