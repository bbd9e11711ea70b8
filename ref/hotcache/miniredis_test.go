package hotcache_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"imlab/ref/hotcache"
	"imlab/ref/rkeys"
)

// TestMiniredisCompat runs the scripts on miniredis (the embedded topology's
// Redis): rebuild, chained appends, trim, range and the cursor max-set.
func TestMiniredisCompat(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	cfg := hotcache.DefaultConfig()
	cfg.InboxKeep = 10
	c, err := hotcache.New(rdb, rkeys.Keys{}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tr := newTruth(1, 1)
	c.Committed(ctx, tr.commit(3))
	if mr.Exists(rkeys.Keys{}.Inbox(1)) {
		t.Fatal("append created the key")
	}
	if err := c.RebuildFloor(ctx, 1, tr.snapshot(0), 0); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		c.Committed(ctx, tr.commit(4))
	}
	all := tr.seqs()
	floor := all[len(all)-11]
	sp, err := c.Span(ctx, 1, floor, 100)
	if err != nil || !sp.Covered || sp.Floor != floor || len(sp.Refs) != 10 || sp.Top != all[len(all)-1] {
		t.Fatalf("span %+v %v", sp, err)
	}
	page, ok, err := c.Range(ctx, 1, floor, 4)
	if err != nil || !ok {
		t.Fatalf("range %v %v", ok, err)
	}
	checkPage(t, all, floor, page)
	checkWhole(t, c, tr, 1, 0)
	c.Committed(ctx, tr.commit(1)[:0])
	lost := tr.commit(1)
	_ = lost
	c.Committed(ctx, tr.commit(1))
	if mr.Exists(rkeys.Keys{}.Inbox(1)) {
		t.Fatal("broken chain kept the key")
	}
	for _, v := range []uint64{4, 9, 2} {
		if err := c.SetCursor(ctx, 1, "d", v); err != nil {
			t.Fatal(err)
		}
	}
	if v, ok, err := c.GetCursor(ctx, 1, "d"); err != nil || !ok || v != 9 {
		t.Fatalf("cursor %d %v %v", v, ok, err)
	}
}
