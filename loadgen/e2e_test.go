package loadgen

import (
	"bytes"
	"context"
	"testing"
	"time"

	"imlab/loadgen/checker"
	"imlab/loadgen/faketarget"
	"imlab/loadgen/ledger"
	"imlab/loadgen/schedule"
)

const testSecret = "imlab-test-secret-0123456789"

func testConfig(t *testing.T, target string, rate float64, dur time.Duration) Config {
	cfg := DefaultConfig(target, testSecret, t.TempDir())
	cfg.Shape = schedule.Constant{PerSec: rate}
	cfg.Duration = dur
	cfg.Pop = Population{
		Users: 20, DevicesPerUser: 2, UIDBase: 1000, GroupBase: 50,
		Online: 0.5, Crashy: 0.25, Groups: 3,
		GroupSizes: []SizeWeight{{3, 1}, {8, 1}}, GroupShare: 0.2,
		ComeBackEvery: 300 * time.Millisecond, CrashEvery: 1,
	}
	cfg.Pacer.Workers = 16
	cfg.Pacer.Grace = 30 * time.Second // a loaded CI machine makes sends late, never missed
	cfg.Conns = 32
	cfg.Settle = 300 * time.Millisecond
	cfg.DrainTimeout = 30 * time.Second
	cfg.Shards = 4
	cfg.CeilingFor = 0
	cfg.AckEvery = 50 * time.Millisecond
	return cfg
}

func runAgainst(t *testing.T, faults faketarget.Faults, rate float64, dur time.Duration) (*Summary, *checker.Verdict, faketarget.Counters) {
	t.Helper()
	fc := faketarget.DefaultConfig(testSecret)
	fc.Faults = faults
	srv, err := faketarget.Start(fc)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg := testConfig(t, srv.URL(), rate, dur)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := checker.Check(cfg.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	v.WriteTable(&buf)
	t.Logf("summary: ok %d fail %d unknown %d late %d missed %d deliveries %d ledger %d bytes errors %v\n%s",
		sum.OK, sum.Fail, sum.Unknown, sum.Pacer.Late, sum.Pacer.Missed, sum.Deliveries, sum.LedgerBytes, sum.Errors, buf.String())
	if !sum.Drain.Complete || sum.Drain.WitnessErrors != 0 || sum.Drain.WitnessUIDs != cfg.Pop.Users {
		t.Fatalf("drain: %+v", sum.Drain)
	}
	if sum.OK == 0 || sum.OK+sum.Fail+sum.Unknown != sum.Pacer.Started || sum.Pacer.Missed != 0 {
		t.Fatalf("sends: %+v", sum)
	}
	if uint64(v.Attempts["ok"]) != sum.OK {
		t.Fatalf("ledger has %d ok attempts, summary %d", v.Attempts["ok"], sum.OK)
	}
	return sum, v, srv.Counters()
}

func TestCorrectServerIsValid(t *testing.T) {
	sum, v, c := runAgainst(t, faketarget.Faults{}, 2000, time.Second)
	if !v.Valid || v.OK != int(sum.OK) || v.Findings["reordered"].Count != 0 || v.Findings["recovered"].Count != 0 {
		t.Fatalf("correct server judged invalid or imperfect: %+v", v.Findings)
	}
	// Crashy devices crashed after storing, so duplicates were seen and counted.
	if v.Findings["duplicated"].Count == 0 {
		t.Fatalf("no duplicates counted although crashy devices crashed before acking")
	}
	if sum.Latency["end_to_end"].Count == 0 || sum.Latency["response"].Count != int64(sum.OK) || len(sum.Timeline) == 0 {
		t.Fatalf("latency figures missing: %+v", sum.Latency)
	}
	kinds := map[ledger.DeviceKind]bool{}
	for k, n := range sum.Population.Devices {
		if n > 0 {
			kinds[map[string]ledger.DeviceKind{"online": ledger.Online, "offline": ledger.Offline, "crashy": ledger.Crashy}[k]] = true
		}
	}
	if len(kinds) != 3 || c.Pulls == 0 {
		t.Fatalf("population %+v, pulls %d", sum.Population, c.Pulls)
	}
	s2, err := ReadSummary(t.TempDir())
	if err == nil || s2 != nil {
		t.Fatal("ReadSummary of an empty dir must fail")
	}
}

func TestDropOneIn10000IsLost(t *testing.T) {
	_, v, c := runAgainst(t, faketarget.Faults{DropEvery: 10000}, 5000, 2100*time.Millisecond)
	if c.Dropped < 1 {
		t.Fatalf("the fake dropped nothing: %+v", c)
	}
	if v.Valid || v.Findings["lost"].Count != c.Dropped {
		t.Fatalf("lost %d, the fake dropped %d", v.Findings["lost"].Count, c.Dropped)
	}
}

func TestAdvanceCursorOnPullIsCaught(t *testing.T) {
	_, v, _ := runAgainst(t, faketarget.Faults{AdvanceCursorOnPull: true}, 2000, time.Second)
	if v.Valid || v.Findings["lost"].Count == 0 || v.Findings["skipped"].Count == 0 {
		t.Fatalf("cursor advanced on pull not caught: %+v", v.Findings)
	}
}

func TestReusedSeqIsCaught(t *testing.T) {
	_, v, c := runAgainst(t, faketarget.Faults{ReuseSeqEvery: 50}, 2000, time.Second)
	if c.Reused == 0 {
		t.Fatal("the fake reused no seq")
	}
	if v.Valid || v.Findings["lost"].Count == 0 || v.Findings["skipped"].Count == 0 {
		t.Fatalf("reused seq not caught: %+v", v.Findings)
	}
}
