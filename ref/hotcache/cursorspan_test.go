package hotcache_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"

	"imlab/ref/hotcache"
)

// CursorSpanAlong answers what GetCursor and then Span at that cursor
// answer, in every state of the two keys: no cursor, a cursor that is not a
// number, no set, a set whose floor is above the cursor, a covered set (at,
// below and past its top), and runs the queued commands in the same
// pipeline.
func TestCursorSpanAlongMatchesTheTwoReads(t *testing.T) {
	ctx := context.Background()
	c, r, _ := newCache(t, 200)
	const uid = 4
	tr := newTruth(uid, 4)
	rows := tr.commit(40)
	all := tr.seqs()
	same := func(name string, n int) {
		t.Helper()
		var queued *redis.StatusCmd
		got, err := c.CursorSpanAlong(ctx, uid, "d", n, func(ctx context.Context, p redis.Pipeliner) {
			queued = p.Set(ctx, r.Keys.Prefix+"queued", "1", 0)
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if queued == nil || queued.Err() != nil {
			t.Fatalf("%s: the queued command did not run: %v", name, queued)
		}
		cur, ok, err := c.GetCursor(ctx, uid, "d")
		if err != nil {
			t.Fatal(err)
		}
		want := hotcache.CursorSpan{Cursor: cur, Found: ok}
		if ok {
			want.Span, want.SpanErr = c.Span(ctx, uid, cur, n)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %+v\nwant %+v", name, got, want)
		}
	}
	same("no cursor", 10)
	if err := r.Client.Set(ctx, r.Keys.Cursor(uid, "d"), "x1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	same("cursor not a number", 10)
	if err := r.Client.Del(ctx, r.Keys.Cursor(uid, "d")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetCursor(ctx, uid, "d", all[3]); err != nil {
		t.Fatal(err)
	}
	same("no set", 10)
	if err := c.RebuildFloor(ctx, uid, rows[10:], all[9]); err != nil {
		t.Fatal(err)
	}
	same("floor above the cursor", 10)
	for _, at := range []uint64{all[9], all[20], all[38], all[39], all[39] + 5} {
		if err := c.SetCursor(ctx, uid, "d", at); err != nil {
			t.Fatal(err)
		}
		same("covered", 10)
		same("covered, no members asked", 0)
	}
	if got, err := c.CursorSpanAlong(ctx, uid, "d", 10, nil); err != nil || !got.Found || got.Cursor != all[39]+5 {
		t.Fatalf("without a queue: %+v %v", got, err)
	}
}
