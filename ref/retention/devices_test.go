package retention_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/ref/model"
	"imlab/ref/pull"
	"imlab/ref/retention"
)

// inboxRows writes uid's rows from..to of conversation 7 (created at) and
// raises the fence, as the write path leaves them.
func inboxRows(t *testing.T, db *sql.DB, uid, from, to uint64, at time.Time) {
	t.Helper()
	for seq := from; seq <= to; seq++ {
		if _, err := db.Exec(`INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES (?,?,?,7,2,9,?)`,
			uid, seq, uid*1000+seq, at); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`INSERT INTO seq_fence (uid, max_seq, updated_at) VALUES (?,?,?) ON DUPLICATE KEY UPDATE max_seq = VALUES(max_seq)`, uid, to, at); err != nil {
		t.Fatal(err)
	}
}

func rowsOf(t *testing.T, db *sql.DB, uid uint64) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM offline_msg WHERE uid = ?", uid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// pullAll pulls a device from its stored cursor to the end and acks it.
func pullAll(t *testing.T, p *pull.Service, uid uint64, did string) int {
	t.Helper()
	ctx := context.Background()
	got := 0
	for {
		res, err := p.Pull(ctx, uid, did, nil, 0, true)
		if err != nil {
			t.Fatal(err)
		}
		got += len(res.Msgs)
		if len(res.Msgs) > 0 {
			if _, err := p.Ack(ctx, uid, did, res.NextCursor); err != nil {
				t.Fatal(err)
			}
		}
		if !res.HasMore {
			return got
		}
	}
}

// TestEarlyDeletionWaitsForEveryKnownDevice (real MariaDB): a device the
// server has heard of — one that pulled an empty inbox, pulled a
// conversation, or connected (Register, as the WebSocket upgrade does) —
// holds back the early deletion of its uid's rows until it pulled and
// acknowledged past them, although it was never served a row; another
// device's acknowledgement alone deletes nothing.
func TestEarlyDeletionWaitsForEveryKnownDevice(t *testing.T) {
	my := testenv.NewMySQL(t)
	ctx := context.Background()
	pc := pull.DefaultConfig()
	pc.RateLimit, pc.RateBurst = 1e5, 100000
	p, err := pull.New(my.DB, nil, pc, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := retention.DefaultConfig()
	rc.PulledMinAge = 0
	rc.Pause = 0
	log := &retention.Log{}
	r, err := retention.New(rc, my.DB, log)
	if err != nil {
		t.Fatal(err)
	}
	conv, _ := model.GroupConvID(7)
	// uid 1: device "late" pulled while the inbox was empty. uid 2: device
	// "conv" only entered a conversation. uid 3: device "ws" only
	// connected. uid 4: its only other device is unknown to the server.
	if res, err := p.Pull(ctx, 1, "late", nil, 0, true); err != nil || len(res.Msgs) != 0 {
		t.Fatalf("empty pull: %+v %v", res, err)
	}
	if _, err := p.ConvPull(ctx, 2, "conv", conv, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Register(ctx, 3, "ws"); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for uid := uint64(1); uid <= 4; uid++ {
		inboxRows(t, my.DB, uid, 1, 5, now.Add(-time.Minute))
		if n := pullAll(t, p, uid, "phone"); n != 5 {
			t.Fatalf("uid %d phone pulled %d", uid, n)
		}
	}
	rep, err := r.Run(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	for uid, want := range map[uint64]int{1: 5, 2: 5, 3: 5, 4: 0} {
		if got := rowsOf(t, my.DB, uid); got != want {
			t.Errorf("uid %d: %d rows left, want %d (report %+v)", uid, got, want, rep)
		}
	}
	// Each waiting device pulls and acknowledges: now its rows may go.
	for uid, did := range map[uint64]string{1: "late", 2: "conv", 3: "ws"} {
		if n := pullAll(t, p, uid, did); n != 5 {
			t.Fatalf("uid %d %s pulled %d", uid, did, n)
		}
	}
	if _, err := r.Run(ctx, now); err != nil {
		t.Fatal(err)
	}
	for uid := uint64(1); uid <= 4; uid++ {
		if got := rowsOf(t, my.DB, uid); got != 0 {
			t.Errorf("uid %d: %d rows left after every device pulled", uid, got)
		}
	}
	snap := log.Snapshot()
	if snap.Deleted != 20 || snap.Pulled != 20 || snap.Expired != 0 || len(snap.Rows) != 20 || snap.Passes != 2 {
		t.Fatalf("log %+v", snap)
	}
	for _, d := range snap.Rows {
		if d.Reason != retention.ReasonPulled || d.MsgID != d.UID*1000+d.Seq || d.ConvID != 7 || !d.DeletedAt.Equal(now) || d.CreatedAt.After(now) {
			t.Fatalf("logged %+v", d)
		}
	}
}
