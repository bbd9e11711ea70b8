package pull_test

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"slices"
	"testing"

	"imlab/ref/defect"
	"imlab/ref/hotcache"
	"imlab/ref/model"
	"imlab/ref/pull"
)

// devices lists uid's (device, served_seq) rows of sync_served.
func devices(t *testing.T, db *sql.DB, uid uint64) map[string]uint64 {
	t.Helper()
	rows, err := db.Query("SELECT device_id, served_seq FROM sync_served WHERE uid = ?", uid)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var did string
		var v uint64
		if err := rows.Scan(&did, &v); err != nil {
			t.Fatal(err)
		}
		out[did] = v
	}
	return out
}

// TestRegisterDevices: every contact of a device makes it known to the
// store (a sync_served row, served_seq 0 while nothing was served), before
// the answer: an empty pull, a conversation pull, an ack of 0, Register
// itself; a known device's mark is never lowered; bad input is refused.
func TestRegisterDevices(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if res, err := e.svc.Pull(ctx, 1, "empty", nil, 0, false); err != nil || len(res.Msgs) != 0 {
		t.Fatalf("empty pull: %+v %v", res, err)
	}
	if _, err := e.svc.ConvPull(ctx, 1, "conv", 100, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Ack(ctx, 1, "acker", 0); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Register(ctx, 1, "ws"); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"empty": 0, "conv": 0, "acker": 0, "ws": 0}
	if got := devices(t, e.db, 1); !maps.Equal(got, want) {
		t.Fatalf("devices %v, want %v", got, want)
	}
	ents := e.w.send(t, 1, 100, 3, false)
	if res, err := e.svc.Pull(ctx, 1, "empty", nil, 0, false); err != nil || len(res.Msgs) != 3 {
		t.Fatalf("pull: %+v %v", res, err)
	}
	// Registered again (another process, the memo cleared): the mark stays.
	fresh, err := pull.New(e.db, nil, pull.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.Register(ctx, 1, "empty"); err != nil {
		t.Fatal(err)
	}
	if got := devices(t, e.db, 1)["empty"]; got != ents[2].Seq {
		t.Fatalf("served mark after a second registration: %d, want %d", got, ents[2].Seq)
	}
	for _, bad := range []struct {
		uid uint64
		did string
	}{{0, "x"}, {1, ""}, {model.MaxUID + 1, "x"}} {
		if err := e.svc.Register(ctx, bad.uid, bad.did); !errors.Is(err, model.ErrInvalid) {
			t.Fatalf("Register(%d, %q): %v", bad.uid, bad.did, err)
		}
	}
	if n := len(devices(t, e.db, 0)); n != 0 {
		t.Fatalf("refused registrations wrote %d rows", n)
	}
}

// convPullState runs a device through two conversation pages of conv 100
// (page size 2) with a conv 200 message below them, and reports the pages
// and the device's stored cursor after.
func convPullState(t *testing.T, d ...string) (pages [][]uint64, want [][]uint64, cursor uint64, other uint64) {
	t.Helper()
	e := newEnv(t, func(p *pull.Config, _ *hotcache.Config) {
		s, err := defect.Parse(d...)
		if err != nil {
			t.Fatal(err)
		}
		p.Defects = s
	})
	ctx := context.Background()
	const uid = 9
	o := e.w.send(t, uid, 200, 1, false)
	a := seqs(e.w.send(t, uid, 100, 4, false))
	var c uint64
	for range 2 {
		res, err := e.svc.ConvPull(ctx, uid, "d", 100, c, 2)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, seqs(res.Msgs))
		c = res.NextCursor
	}
	cur, err := e.svc.Cursor(ctx, uid, "d")
	if err != nil {
		t.Fatal(err)
	}
	return pages, [][]uint64{a[:2], a[2:]}, cur, o[0].Seq
}

// TestConvPullDefects: by default conversation pages follow each other
// (seq > cursor) and leave the device's cursor alone; with
// conv-pull-cursor-inclusive the row at the cursor comes back; with
// conv-pull-acks-cursor the cursor jumps past the other conversation's
// unpulled message.
func TestConvPullDefects(t *testing.T) {
	pages, want, cur, _ := convPullState(t)
	if !slices.Equal(pages[0], want[0]) || !slices.Equal(pages[1], want[1]) || cur != 0 {
		t.Fatalf("correct server: pages %v (want %v), cursor %d", pages, want, cur)
	}
	pages, want, _, _ = convPullState(t, defect.ConvPullCursorInclusive)
	if !slices.Equal(pages[0], want[0]) || len(pages[1]) == 0 || pages[1][0] != want[0][1] {
		t.Fatalf("%s: pages %v, want the second to start again at %d", defect.ConvPullCursorInclusive, pages, want[0][1])
	}
	pages, want, cur, other := convPullState(t, defect.ConvPullAcksCursor)
	if !slices.Equal(pages[1], want[1]) || cur != want[1][1] || cur <= other {
		t.Fatalf("%s: pages %v, cursor %d (the other conversation's %d is below it)", defect.ConvPullAcksCursor, pages, cur, other)
	}
}
