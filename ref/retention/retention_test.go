package retention

import (
	"context"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/ref/defect"
)

func TestRetentionRules(t *testing.T) {
	my := testenv.NewMySQL(t)
	db := my.DB
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now().UTC()
	old := now.Add(-40 * 24 * time.Hour)
	ins := func(uid, seq uint64, at time.Time) {
		if _, err := db.ExecContext(ctx, `INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at)
			VALUES (?,?,?,?,2,1,?)`, uid, seq, uid*1000+seq, 7, at); err != nil {
			t.Fatal(err)
		}
	}
	for s := uint64(1); s <= 10; s++ {
		ins(1, s, now)
		ins(3, s, now)
	}
	for s := uint64(1); s <= 5; s++ {
		at := now
		if s <= 2 {
			at = old
		}
		ins(2, s, at)
	}
	exec := func(q string, args ...any) {
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	// uid 1: two devices at 5 and 3 → seqs 1..3 go.
	exec(`INSERT INTO sync_cursor (uid, device_id, pull_seq, updated_at) VALUES (1,'a',5,?),(1,'b',3,?)`, now, now)
	exec(`INSERT INTO sync_served (uid, device_id, served_seq, updated_at) VALUES (1,'a',6,?),(1,'b',3,?)`, now, now)
	// uid 3: one device pulled all, another was served but never acknowledged → nothing goes.
	exec(`INSERT INTO sync_cursor (uid, device_id, pull_seq, updated_at) VALUES (3,'a',10,?)`, now)
	exec(`INSERT INTO sync_served (uid, device_id, served_seq, updated_at) VALUES (3,'a',10,?),(3,'c',4,?)`, now, now)
	// uid 2: no device; only rows past MaxAge go.
	exec(`INSERT INTO seq_fence (uid, max_seq, updated_at) VALUES (1,10,?),(2,5,?),(3,10,?)`, now, now, now)
	exec(`INSERT INTO mq_dedup (msg_id, uid, created_at) VALUES (1,1,?),(2,1,?)`, now.Add(-72*time.Hour), now)

	cfg := DefaultConfig()
	cfg.DeleteBatch = 2
	cfg.ScanPage = 4
	r, err := New(cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	// Just pulled: within PulledMinAge nothing pulled goes, only what is
	// past MaxAge. The pass reads only the rows older than PulledMinAge,
	// the two expired ones.
	rep, err := r.Run(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeletedPulled != 0 || rep.DeletedAged != 2 || rep.DedupDeleted != 1 || rep.Scanned != 2 {
		t.Fatalf("report %+v: rows pulled a moment ago went before PulledMinAge", rep)
	}
	// A day later the pulled rows go too.
	later := now.Add(cfg.PulledMinAge + time.Minute)
	rep, err = r.Run(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeletedPulled != 3 || rep.DeletedAged != 0 || rep.DedupDeleted != 0 || rep.Scanned != 23 {
		t.Fatalf("report %+v", rep)
	}
	left := map[uint64][]uint64{}
	rows, err := db.QueryContext(ctx, "SELECT uid, seq FROM offline_msg ORDER BY uid, seq")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var u, s uint64
		if err := rows.Scan(&u, &s); err != nil {
			t.Fatal(err)
		}
		left[u] = append(left[u], s)
	}
	rows.Close()
	if len(left[1]) != 7 || left[1][0] != 4 || len(left[2]) != 3 || left[2][0] != 3 || len(left[3]) != 10 {
		t.Fatalf("rows left: %v", left)
	}
	var fence int
	if err := db.QueryRowContext(ctx, "SELECT CAST(SUM(max_seq) AS SIGNED) FROM seq_fence").Scan(&fence); err != nil || fence != 25 {
		t.Fatalf("fence changed: %d %v", fence, err)
	}
	rep2, err := r.Run(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	if rep2.DeletedAged+rep2.DeletedPulled+rep2.DedupDeleted != 0 {
		t.Fatalf("second run deleted again: %+v", rep2)
	}
}

// TestLabShortAges: ages and interval in seconds only with the lab switch.
func TestLabShortAges(t *testing.T) {
	short := DefaultConfig()
	short.MaxAge, short.PulledMinAge, short.Interval = 20*time.Second, 2*time.Second, 500*time.Millisecond
	if err := short.Validate(); err == nil {
		t.Fatal("seconds accepted without the lab switch")
	}
	short.LabShortAges = true
	if err := short.Validate(); err != nil {
		t.Fatalf("with the lab switch: %v", err)
	}
	for name, mut := range map[string]func(*Config){
		"max age below the lab floor":  func(c *Config) { c.MaxAge = LabMinMaxAge / 2 },
		"interval below the lab floor": func(c *Config) { c.Interval = LabMinInterval / 2 },
		"grace above the max age":      func(c *Config) { c.PulledMinAge = c.MaxAge + time.Second },
		"negative grace":               func(c *Config) { c.PulledMinAge = -time.Second },
	} {
		c := short
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	for name, mut := range map[string]func(*Config){
		"max age below 1h":  func(c *Config) { c.MaxAge = 59 * time.Minute },
		"interval below 1m": func(c *Config) { c.Interval = 59 * time.Second },
	} {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("production config: %s accepted", name)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestRetentionDefects (real MariaDB): uid 1 has two devices, one at 10
// and one at 4; uid 2 one device that has not acknowledged anything. Rows
// are a minute old, the grace 10 s, the window 1 h. The correct server
// deletes uid 1's rows 1..4 only; retention-most-advanced-device deletes
// up to 10 (what the lagging device never pulled);
// retention-expiry-from-pulled-age deletes every row (the grace taken for
// the window).
func TestRetentionDefects(t *testing.T) {
	for _, c := range []struct {
		defect string
		left   map[uint64]int
		reason string
	}{
		{"", map[uint64]int{1: 6, 2: 10}, ReasonPulled},
		{defect.RetentionMostAdvancedDevice, map[uint64]int{1: 0, 2: 10}, ReasonPulled},
		{defect.RetentionExpiryFromPulledAge, map[uint64]int{1: 0, 2: 0}, ReasonExpired},
	} {
		t.Run("defect="+c.defect, func(t *testing.T) {
			db := testenv.NewMySQL(t).DB
			ctx := context.Background()
			now := time.Now().UTC()
			for uid := uint64(1); uid <= 2; uid++ {
				for s := uint64(1); s <= 10; s++ {
					if _, err := db.ExecContext(ctx, `INSERT INTO offline_msg (uid, seq, msg_id, conv_id, conv_type, sender_uid, created_at) VALUES (?,?,?,7,2,1,?)`,
						uid, s, uid*1000+s, now.Add(-time.Minute)); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, q := range []string{
				`INSERT INTO sync_served (uid, device_id, served_seq, updated_at) VALUES (1,'a',10,NOW()),(1,'b',4,NOW()),(2,'a',3,NOW())`,
				`INSERT INTO sync_cursor (uid, device_id, pull_seq, updated_at) VALUES (1,'a',10,NOW()),(1,'b',4,NOW())`,
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			cfg := DefaultConfig()
			cfg.LabShortAges, cfg.MaxAge, cfg.PulledMinAge, cfg.Interval = true, time.Hour, 10*time.Second, time.Second
			var err error
			if cfg.Defects, err = defect.Parse(c.defect); err != nil {
				t.Fatal(err)
			}
			log := &Log{}
			r, err := New(cfg, db, log)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Run(ctx, now); err != nil {
				t.Fatal(err)
			}
			for uid, want := range c.left {
				var n int
				if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM offline_msg WHERE uid = ?", uid).Scan(&n); err != nil || n != want {
					t.Errorf("uid %d: %d rows left (%v), want %d", uid, n, err, want)
				}
			}
			snap := log.Snapshot()
			if int(snap.Deleted) != 20-c.left[1]-c.left[2] || len(snap.Rows) != int(snap.Deleted) {
				t.Fatalf("log %+v", snap)
			}
			for _, d := range snap.Rows {
				if d.Reason != c.reason {
					t.Fatalf("deleted %+v, want reason %s", d, c.reason)
				}
			}
		})
	}
}

// TestLogBounded: the log keeps the first MaxLogged rows and counts all.
func TestLogBounded(t *testing.T) {
	var l Log
	batch := make([]Deletion, 1000)
	for i := range batch {
		batch[i] = Deletion{UID: 1, Seq: uint64(i + 1), Reason: ReasonPulled}
	}
	for range MaxLogged/len(batch) + 2 {
		l.Deleted(batch)
	}
	l.Deleted([]Deletion{{UID: 2, Seq: 1, Reason: ReasonExpired}})
	l.Passed(Report{}, nil)
	l.Passed(Report{}, context.DeadlineExceeded)
	s := l.Snapshot()
	if len(s.Rows) != MaxLogged || !s.Truncated || s.Deleted != MaxLogged+2001 || s.Expired != 1 || s.Pulled != MaxLogged+2000 ||
		s.Passes != 1 || s.FailedPasses != 1 || s.LastError == "" || s.LastPass.IsZero() {
		t.Fatalf("snapshot: %d rows, %+v", len(s.Rows), struct {
			Truncated                bool
			Deleted, Expired, Pulled uint64
		}{s.Truncated, s.Deleted, s.Expired, s.Pulled})
	}
}
