package loadgen_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"imlab/checker"
	"imlab/checker/judge"
	"imlab/internal/testenv"
	"imlab/internal/testenv/refproc"
	"imlab/loadgen"
	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
	"imlab/ref/server"
)

// The load generator against the real reference server, started in
// process on a fresh MariaDB database and Redis prefix: a bounded load
// (300 sends; 20 users with 2 devices each: online on WebSocket, offline,
// crashy; 1:1 and group conversations) over each send transport (HTTP one
// request at a time per connection, HTTP pipelined, WebSocket), judged by
// the checker, which must find no loss, nothing unexpected and no skip.
// Only the generator's own package talks to the server here, through the
// contract; the test imports ref/server only to start it.
func TestRealServerNoLossNoSkip(t *testing.T) {
	const secret = "loadgen-e2e-secret-0123456789"
	target := startRef(t, secret, testenv.NewMySQL(t), testenv.NewRedis(t), true)
	for i, tr := range []struct {
		name, via string
		pipeline  int
	}{{"http", loadgen.ViaHTTP, 0}, {"http_pipelined", loadgen.ViaHTTP, 8}, {"ws", loadgen.ViaWS, 0}} {
		t.Run(tr.name, func(t *testing.T) {
			lc := loadgen.DefaultConfig(target, secret, t.TempDir())
			lc.SendVia = tr.via
			lc.Shape = schedule.Constant{PerSec: 150}
			lc.Duration = 2 * time.Second // 300 sends
			lc.Pop = loadgen.Population{
				Users: 20, DevicesPerUser: 2, UIDBase: 1000 + uint64(i)*100, GroupBase: 500 + uint64(i)*100,
				Online: 0.5, Crashy: 0.2, Groups: 3,
				GroupSizes: []loadgen.SizeWeight{{Size: 3, Weight: 1}, {Size: 8, Weight: 1}}, GroupShare: 0.2,
				ComeBackEvery: 400 * time.Millisecond, CrashEvery: 1,
			}
			lc.Pacer.Workers, lc.Pacer.MaxWorkers = 16, 64
			lc.Pacer.Grace = 4 * time.Minute // a loaded machine makes sends late, never missed
			lc.Conns = 32
			if tr.pipeline > 0 {
				lc.PipelineConns, lc.Pipeline, lc.PipelineDelay = 4, tr.pipeline, 100*time.Microsecond
			}
			lc.Timeout = 30 * time.Second
			lc.Settle = 500 * time.Millisecond
			lc.DrainTimeout = time.Minute
			lc.CeilingFor = 0
			lc.Shards = 4
			lc.ProbeFraction = 0.2
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			sum, err := loadgen.Run(ctx, lc)
			if err != nil {
				t.Fatal(err)
			}
			v, err := checker.Check(lc.RunDir)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			v.WriteTable(&buf)
			t.Logf("ok %d fail %d unknown %d retries %d late %d; drain %+v; errors %v\n%s",
				sum.OK, sum.Fail, sum.Unknown, sum.Retries, sum.Pacer.Late, sum.Drain, sum.Errors, buf.String())
			if sum.Pacer.Started != 300 || sum.Pacer.Missed != 0 || sum.OK+sum.Unknown != 300 || sum.Fail != 0 || sum.OK == 0 {
				t.Fatalf("sends: started %d missed %d ok %d fail %d unknown %d", sum.Pacer.Started, sum.Pacer.Missed, sum.OK, sum.Fail, sum.Unknown)
			}
			if g := sum.Generator; g.GOMAXPROCS < 1 || g.Conns != lc.Conns || g.Pipeline != lc.Pipeline || g.MaxWorkers != lc.Pacer.MaxWorkers {
				t.Fatalf("generator summary %+v does not say how it ran", g)
			}
			// A server without a queue has no lag to measure: "none", not
			// "unknown" (that is for a measurement that failed), in
			// summary.json and in the verdict's text.
			if q := sum.QueueLag; q == nil || !q.NoQueue || q.Unknown != "" || len(q.Groups) != 0 || q.String() != summary.NoQueueLine {
				t.Fatalf("queue lag at the end of a run on a server without a queue: %+v", q)
			}
			rep, err := judge.Dirs(ctx, judge.Options{Dirs: []string{lc.RunDir}, Out: filepath.Join(t.TempDir(), "verdict.json")})
			if err != nil {
				t.Fatal(err)
			}
			var check, checkJSON bytes.Buffer
			rep.WriteText(&check)
			if err := rep.WriteJSON(&checkJSON); err != nil {
				t.Fatal(err)
			}
			if want := "queue lag at the end: " + summary.NoQueueLine; !strings.Contains(check.String(), want) || !strings.Contains(checkJSON.String(), want) ||
				strings.Contains(check.String(), "queue lag at the end: unknown") {
				t.Fatalf("imlab check's text or JSON lacks %q:\n%s", want, check.String())
			}
			if !sum.Drain.Complete || sum.Drain.WitnessErrors != 0 || sum.Drain.WitnessUIDs != lc.Pop.Users {
				t.Fatalf("drain: %+v", sum.Drain)
			}
			if !v.Valid || v.Findings["lost"].Count != 0 || v.Findings["unexpected"].Count != 0 || v.Findings["skipped"].Count != 0 {
				t.Fatalf("the reference server lost, invented or skipped messages: %+v", v.Findings)
			}
			if v.Findings["reordered"].Count != 0 {
				t.Errorf("reordered within a conversation: %+v", v.Findings["reordered"])
			}
			if v.OK+v.Findings["recovered"].Count != 300 || v.Witnessed == 0 || v.Deliveries == 0 {
				t.Fatalf("ok %d recovered %d of 300 sends; witnessed %d; deliveries %d", v.OK, v.Findings["recovered"].Count, v.Witnessed, v.Deliveries)
			}
			// The store witness and the read-after-ACK probes were made
			// through the lab routes and found nothing amiss.
			if u := v.Unmade(); len(u) != 0 || v.Policy != "strict" || v.Stored < v.Witnessed || v.Probes == 0 {
				t.Fatalf("evidence: unmade %v policy %q stored %d (witnessed %d) probes %d; summary %+v", u, v.Policy, v.Stored, v.Witnessed, v.Probes, sum.Evidence)
			}
			for _, n := range []string{checker.LostInStore, checker.UnstoredAtAck, checker.DoubleStored, checker.SeqConflict, checker.AckMismatch} {
				if v.Findings[n].Count != 0 {
					t.Fatalf("%s on the reference server: %+v", n, v.Findings[n])
				}
			}
		})
	}
}

// startRef starts the reference server in process (every role its backends
// allow) on my and rd, with the lab routes when lab, until t ends, and
// returns its API's URL.
func startRef(t *testing.T, secret string, my *testenv.MySQL, rd *testenv.Redis, lab bool) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Auth.Secret = secret
	cfg.Redis.KeyPrefix = rd.Keys.Prefix
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.LabRoutes = lab
	p := refproc.Start(t, cfg, server.Backends{MySQLDSN: my.DSN, RedisAddr: rd.Addr}, server.DefaultRoles())
	return "http://" + p.APIAddr().String()
}
