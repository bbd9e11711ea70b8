package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"imlab/checker"
	"imlab/ledger"
	"imlab/loadgen/faketarget"
	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
)

const testSecret = "imlab-test-secret-0123456789"

// testBound bounds a test run (and the pacer's grace): far above what a
// loaded machine needs, so a run ends by its count, not by a clock.
const testBound = 4 * time.Minute

// testConfig sizes a run for correctness on a loaded CI machine: what it
// proves depends on how many sends are made (rate × duration ticks, every
// one of them started), never on how fast. Timeouts are generous so that
// every send reaches the target and every ACK reaches the generator however
// slow the machine is; the pool is capped so that a starved machine makes
// sends late instead of piling up goroutines waiting for connections.
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
	cfg.Pacer.MaxWorkers = 64
	cfg.Pacer.Grace = testBound // a loaded machine makes sends late, never missed
	cfg.Conns = 64
	cfg.Timeout = time.Minute
	cfg.Settle = 300 * time.Millisecond
	cfg.DrainTimeout = testBound
	cfg.Shards = 4
	cfg.CeilingFor = 0
	cfg.AckEvery = 50 * time.Millisecond
	return cfg
}

func runAgainst(t *testing.T, faults faketarget.Faults, rate float64, dur time.Duration) (*summary.Summary, *checker.Verdict, faketarget.Counters) {
	t.Helper()
	return runVia(t, ViaHTTP, faults, rate, dur)
}

// runFake runs a load against a fake with faults (mutate adjusts the
// config) and judges it; buf holds the verdict table.
func runFake(t *testing.T, faults faketarget.Faults, rate float64, dur time.Duration, mutate func(*Config)) (*summary.Summary, *checker.Verdict, faketarget.Counters, *bytes.Buffer, Config) {
	t.Helper()
	fc := faketarget.DefaultConfig(testSecret)
	fc.Faults = faults
	srv, err := faketarget.Start(fc)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg := testConfig(t, srv.URL(), rate, dur)
	mutate(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
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
	return sum, v, srv.Counters(), &buf, cfg
}

func runVia(t *testing.T, via string, faults faketarget.Faults, rate float64, dur time.Duration) (*summary.Summary, *checker.Verdict, faketarget.Counters) {
	t.Helper()
	sum, v, c, buf, cfg := runFake(t, faults, rate, dur, func(c *Config) { c.SendVia = via })
	t.Logf("summary: ok %d fail %d unknown %d late %d missed %d deliveries %d ledger %d bytes errors %v\n%s",
		sum.OK, sum.Fail, sum.Unknown, sum.Pacer.Late, sum.Pacer.Missed, sum.Deliveries, sum.LedgerBytes, sum.Errors, buf.String())
	if !sum.Drain.Complete || sum.Drain.WitnessErrors != 0 || sum.Drain.WitnessUIDs != cfg.Pop.Users {
		t.Fatalf("drain: %+v", sum.Drain)
	}
	want := schedule.Count(cfg.Shape, cfg.Duration)
	if sum.Pacer.Started != want || sum.Pacer.Missed != 0 || sum.OK+sum.Fail+sum.Unknown != want {
		t.Fatalf("sends: started %d missed %d ok %d fail %d unknown %d, want %d started", sum.Pacer.Started, sum.Pacer.Missed, sum.OK, sum.Fail, sum.Unknown, want)
	}
	// Every send reaches the fake and is ACKed: nothing fails, nothing is
	// left unknown, and the fake saw each tick's client_msg_id exactly once.
	if sum.OK != want || uint64(c.Sends) != want {
		t.Fatalf("sends: ok %d fail %d unknown %d, the fake accepted %d, want %d", sum.OK, sum.Fail, sum.Unknown, c.Sends, want)
	}
	if uint64(v.Attempts["ok"]) != sum.OK {
		t.Fatalf("ledger has %d ok attempts, summary %d", v.Attempts["ok"], sum.OK)
	}
	return sum, v, c
}

func TestCorrectServerIsValid(t *testing.T) {
	for _, via := range []string{ViaHTTP, ViaWS} {
		t.Run(via, func(t *testing.T) { testCorrectServerIsValid(t, via) })
	}
}

func testCorrectServerIsValid(t *testing.T, via string) {
	sum, v, c := runVia(t, via, faketarget.Faults{}, 1000, time.Second)
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
	// One definition of end_to_end: the summary counts what the checker
	// counts (the first copy per device of an ACKed send).
	if s, c := sum.Latency["end_to_end"], v.Latency["end_to_end"]; s.Count != c.Count {
		t.Fatalf("end_to_end: summary counts %d, checker %d", s.Count, c.Count)
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
	if sum.SendVia != via {
		t.Fatalf("summary says sends went over %q, want %q", sum.SendVia, via)
	}
	// The fake has no lab routes: the run says which checks it could not
	// make, and why, instead of passing them silently.
	if u := v.Unmade(); !slices.Equal(u, []string{checker.CheckStoreWitness, checker.CheckReadAfterAck}) ||
		sum.Evidence.StoreWitness.Made || !strings.Contains(sum.Evidence.StoreWitness.Reason, "404") {
		t.Fatalf("unmade %v, evidence %+v", u, sum.Evidence)
	}
	s2, err := summary.Read(t.TempDir())
	if err == nil || s2 != nil {
		t.Fatal("ReadSummary of an empty dir must fail")
	}

}

// TestDropOneIn10000IsLost: 10,500 sends, every one accepted by the fake
// (runAgainst checks it), so the fake drops exactly the 10,000th; the
// checker must report exactly the dropped msg_ids as lost, nothing more.
func TestDropOneIn10000IsLost(t *testing.T) {
	_, v, c := runAgainst(t, faketarget.Faults{DropEvery: 10000}, 5000, 2100*time.Millisecond)
	if c.Dropped != 1 || len(c.DroppedMsgIDs) != 1 {
		t.Fatalf("the fake dropped %d of %d sends, want exactly 1", c.Dropped, c.Sends)
	}
	lost := v.Findings["lost"]
	if v.Valid || lost.Count != c.Dropped || !slices.Equal(sorted(lost.MsgIDs), sorted(c.DroppedMsgIDs)) {
		t.Fatalf("lost %d %v, the fake dropped %d %v", lost.Count, lost.MsgIDs, c.Dropped, c.DroppedMsgIDs)
	}
	if v.Findings["unexpected"].Count != 0 || v.Findings["skipped"].Count != 0 {
		t.Fatalf("a drop must show as lost only: %+v", v.Findings)
	}
}

func sorted(s []uint64) []uint64 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestAdvanceCursorOnPullIsCaught(t *testing.T) {
	_, v, _ := runAgainst(t, faketarget.Faults{AdvanceCursorOnPull: true}, 1000, time.Second)
	if v.Valid || v.Findings["lost"].Count == 0 || v.Findings["skipped"].Count == 0 {
		t.Fatalf("cursor advanced on pull not caught: %+v", v.Findings)
	}
}

func TestReusedSeqIsCaught(t *testing.T) {
	_, v, c := runAgainst(t, faketarget.Faults{ReuseSeqEvery: 50}, 1000, time.Second)
	if c.Reused == 0 {
		t.Fatal("the fake reused no seq")
	}
	if v.Valid || v.Findings["lost"].Count == 0 || v.Findings["skipped"].Count == 0 || v.Findings[checker.SeqConflict].Count == 0 {
		t.Fatalf("reused seq not caught: %+v", v.Findings)
	}
}

func TestCeilingEachTransport(t *testing.T) {
	for _, c := range []CeilingConfig{
		{Via: ViaHTTP, Conns: 4, Workers: 8},
		{Via: ViaHTTP, Conns: 2, Pipeline: 16, Workers: 32},
		{Via: ViaWS, Conns: 4, Workers: 8},
	} {
		c.Secret, c.For = testSecret, 200*time.Millisecond
		got, err := MeasureCeiling(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if got.Requests == 0 || got.Via != c.Via || got.PerSec <= 0 || got.Pipeline != c.Pipeline {
			t.Fatalf("ceiling over %s pipeline %d: %+v", c.Via, c.Pipeline, got)
		}
		t.Logf("ceiling over %s, pipeline %d: %.0f/s (a test figure, not a measure)", c.Via, c.Pipeline, got.PerSec)
	}
}

// TestRetriesResendTheSameClientMsgID: the fake answers the first try of
// one send in 50 only after the client's timeout (it stored the message),
// so the generator retries it with the same client_msg_id, as a real
// client does. A server that dedupes answers the retry with the first
// message: valid. A server that stores the retry again holds two messages
// for one send, and the checker says so (unexpected: one client_msg_id,
// two messages).
func TestRetriesResendTheSameClientMsgID(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(map[bool]string{false: "deduped", true: "stored-twice"}[broken], func(t *testing.T) {
			faults := faketarget.Faults{SlowFirstTryEvery: 50, SlowFor: 3 * time.Second, StoreRetries: broken}
			sum, v, c, buf, _ := runFake(t, faults, 400, time.Second, func(c *Config) {
				c.Timeout = time.Second // the slowed first tries time out; on a loaded machine some others may too
				c.Retries = 3
			})
			t.Logf("ok %d unknown %d retries %d; fake: slowed %d resends %d\n%s", sum.OK, sum.Unknown, sum.Retries, c.Slowed, c.Resends, buf.String())
			var retried uint64
			for _, b := range sum.FailedByIntended {
				retried += b.Retried
			}
			if retried != sum.RetriedSends || retried == 0 {
				t.Fatalf("retried sends %d, by intended second %d", sum.RetriedSends, retried)
			}
			if c.Slowed == 0 || c.Resends < c.Slowed || sum.Retries < uint64(c.Slowed) {
				t.Fatalf("slowed %d first tries but the fake saw %d resends of a known client_msg_id (generator retries %d)", c.Slowed, c.Resends, sum.Retries)
			}
			if !broken {
				if !v.Valid || sum.OK+sum.Unknown != 400 || sum.OK == 0 {
					t.Fatalf("a deduping server judged invalid (ok %d unknown %d): %v", sum.OK, sum.Unknown, buf.String())
				}
				return
			}
			if v.Valid || v.Findings[checker.Unexpected].Count < c.Slowed {
				t.Fatalf("a server that stored %d retries twice passed: %v", c.Slowed, buf.String())
			}
		})
	}
}

// TestQueuedModeIsValid: the pacer's queued mode (4 senders on a send pool
// of their own) makes every send once, records its start when it was
// queued, and a correct server is judged valid, as in the pool mode.
func TestQueuedModeIsValid(t *testing.T) {
	sum, v, c, _, cfg := runFake(t, faketarget.Faults{}, 1000, time.Second, func(c *Config) {
		c.Pacer.Senders, c.Pacer.MaxQueued = 4, 10_000
		c.InProcess = []string{"fake target"} // it runs inside this process
	})
	want := schedule.Count(schedule.Constant{PerSec: 1000}, time.Second)
	if !v.Valid || sum.OK != want || uint64(c.Sends) != want || sum.Pacer.Started != want || sum.Pacer.Missed != 0 {
		t.Fatalf("queued mode: valid %v, ok %d, the fake accepted %d, pacer %+v, want %d each", v.Valid, sum.OK, c.Sends, sum.Pacer, want)
	}
	if sum.Generator.Senders != 4 || sum.Generator.MaxQueued != 10_000 || sum.Pacer.Workers != 4 {
		t.Fatalf("generator %+v, pacer %+v: want the queued mode's 4 senders", sum.Generator, sum.Pacer)
	}
	if q := sum.Latency["queue_wait"]; q.Count != int64(want) {
		t.Fatalf("queue_wait counted %d sends, want %d", q.Count, want)
	}
	// The generator's share of the machine over the send window, as
	// summary.json has it: this process's CPU over CPUs x window.
	back, err := summary.Read(cfg.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	l := back.LabCPU
	if l == nil || l.CPUs != runtime.NumCPU() || l.WindowSeconds < 1 || l.CPUSeconds <= 0 ||
		math.Abs(l.Share-l.CPUSeconds/(float64(l.CPUs)*l.WindowSeconds)) > 1e-9 || l.OverHalf != (l.Share > 0.5) {
		t.Fatalf("lab cpu in summary.json: %+v", l)
	}
	if !strings.Contains(l.String(), "of the machine's CPU during the measured window") {
		t.Fatalf("lab cpu line: %s", l)
	}
	// What shares the process is in summary.json, and its line says so.
	if !slices.Equal(l.InProcess, cfg.InProcess) || !strings.HasPrefix(l.String(), "the runner process (the generator and, inside it, fake target) used") {
		t.Fatalf("lab cpu in_process %q (the config's %q): %s", l.InProcess, cfg.InProcess, l)
	}
}

// TestQueuedSendsPastTheTimeoutAreNotSent: behind a server that answers
// each send after 150 ms, one sender cannot make 1000 sends/s; a send that
// waited in the queue longer than the 300 ms send timeout is recorded as
// failed and never transmitted (the fake sees only the others), so the load
// phase ends within a bound instead of after the queue's worth of answers,
// and the verdict is still valid.
func TestQueuedSendsPastTheTimeoutAreNotSent(t *testing.T) {
	began := time.Now()
	sum, v, c, _, _ := runFake(t, faketarget.Faults{SlowFirstTryEvery: 1, SlowFor: 150 * time.Millisecond}, 1000, time.Second, func(c *Config) {
		c.Pacer.Senders, c.Pacer.MaxQueued, c.Timeout = 1, 10_000, 300*time.Millisecond
	})
	want := schedule.Count(schedule.Constant{PerSec: 1000}, time.Second)
	if !v.Valid {
		t.Fatalf("verdict invalid: %+v", v.Findings)
	}
	if sum.NotSent == 0 || sum.NotSent > sum.Fail || sum.OK+sum.Fail+sum.Unknown != want {
		t.Fatalf("ok %d fail %d unknown %d not sent %d, want %d outcomes with most not sent", sum.OK, sum.Fail, sum.Unknown, sum.NotSent, want)
	}
	if uint64(c.Sends) > want-sum.NotSent {
		t.Fatalf("the fake accepted %d sends; %d of %d were not to be sent", c.Sends, sum.NotSent, want)
	}
	if sum.OK > 50 {
		t.Fatalf("%d sends ACKed by a 150 ms server through one sender in about 1.3 s", sum.OK)
	}
	if el := time.Since(began); el > 30*time.Second {
		t.Fatalf("the run took %s: the queue was not cut at the send timeout", el)
	}
}

// TestRatesOverTheSendWindow: the started and achieved rates are over the
// send window, not over the wait for the last answers: 1000 sends/s for
// 1 s against a fake that answers at once except every 100th send, which
// times out after 1 s (unknown, no retry), report about 1000 started and
// 990 ACKed per second, not half that over the 2 s the last timeouts took.
func TestRatesOverTheSendWindow(t *testing.T) {
	sum, _, _, _, _ := runFake(t, faketarget.Faults{SlowFirstTryEvery: 100, SlowFor: 3 * time.Second}, 1000, time.Second, func(c *Config) {
		c.Timeout, c.Retries = time.Second, 0
	})
	if sum.Unknown == 0 || sum.LoadSeconds < 1.5 {
		t.Fatalf("unknown %d, load %.2fs: want the slow sends to time out after the window", sum.Unknown, sum.LoadSeconds)
	}
	// Loose bounds (a loaded machine starts some sends late), but well
	// above the rate over the whole load (OK / LoadSeconds, about 500/s).
	old := float64(sum.OK) / sum.LoadSeconds
	// The absolute bounds hold only when the generator kept its schedule:
	// a machine too busy to start the sends on time stretches the start
	// window itself (the summary says so through the pacer's late count),
	// and then only the rate against the whole load's is judged.
	onTime := sum.Pacer.Late*20 < sum.Pacer.Started
	if (onTime && (sum.StartedPerSec < 750 || sum.AchievedPerSec < 700)) || sum.AchievedPerSec < 1.3*old || sum.Outcome.AckedPerSec != sum.AchievedPerSec {
		t.Fatalf("started %.0f/s, achieved %.0f/s (outcome %.0f/s) over windows %.2fs/%.2fs, %.0f/s over the whole load; want about 1000 and 990",
			sum.StartedPerSec, sum.AchievedPerSec, sum.Outcome.AckedPerSec, sum.StartSeconds, sum.AckSeconds, old)
	}
	// The timeouts came in after the first second, but every one of those
	// sends was intended in it: the timeline and FailedByIntended say both.
	var late, intendedFirst, intended uint64
	for _, s := range sum.Timeline {
		if s.T > 1 {
			late += s.Unknown
		}
	}
	for _, b := range sum.FailedByIntended {
		if b.At < 1 {
			intendedFirst += b.Unknown
		}
		intended += b.Unknown
	}
	if late == 0 || intended != sum.Unknown || intendedFirst != sum.Unknown {
		t.Fatalf("unknown %d: %d came in after the first second; by intended time %d, %d of them in the first second (want all)", sum.Unknown, late, intended, intendedFirst)
	}
	// Every ACKed send was intended in the first second too, whichever
	// second its ACK came in.
	if len(sum.AckedByIntended) != 1 || sum.AckedByIntended[0] != sum.OK {
		t.Fatalf("ACKed %d, by intended second %v: want all in the first", sum.OK, sum.AckedByIntended)
	}
}

// TestInboxTierLateIsNotLost: a server whose inboxes are written by a
// queue 3 s after the ACK (past the 2 s settle) is valid: the final drain
// waits for its queue to drain before the witness. With a drain deadline
// shorter than that wait, the messages still queued are lost (they never
// arrived within the run) and the verdict says they may be late.
func TestInboxTierLateIsNotLost(t *testing.T) {
	late := faketarget.Faults{LateInbox: 3 * time.Second}
	sum, v, _, buf, _ := runFake(t, late, 200, time.Second, func(*Config) {})
	if !v.Valid || sum.Drain.InboxBehind != "" || !sum.Drain.Complete {
		t.Fatalf("late inbox tier judged as loss: drain %+v\n%s", sum.Drain, buf)
	}
	sum, v, _, buf, _ = runFake(t, late, 200, time.Second, func(c *Config) { c.Settle, c.DrainTimeout = 0, time.Second })
	lost := v.Findings["lost"]
	if v.Valid || lost.Count == 0 || !strings.Contains(sum.Drain.InboxBehind, "records of imlab-inbox") {
		t.Fatalf("queue still behind at the deadline: drain %+v, lost %d\n%s", sum.Drain, lost.Count, buf)
	}
	if ex := strings.Join(lost.Examples, "\n"); !strings.Contains(ex, "may be late rather than lost") {
		t.Fatalf("lost examples do not say the tier was behind: %q", ex)
	}
}

// TestLateSendsOverload: behind a server that answers each send after
// 20 ms, 2 senders with a queue of 1 carry about 100 sends/s; offered
// 300/s, most sends start late, waiting for a free sender, while every one
// is ACKed at its first try. The summary the run writes calls it
// OVERLOADED and says why, not "within load".
func TestLateSendsOverload(t *testing.T) {
	_, _, _, _, cfg := runFake(t, faketarget.Faults{SlowFirstTryEvery: 1, SlowFor: 20 * time.Millisecond}, 300, time.Second, func(c *Config) {
		c.Pacer.Senders, c.Pacer.MaxQueued = 2, 1
	})
	sum, err := summary.Read(cfg.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	o := sum.Outcome
	if sum.Fail+sum.Unknown != 0 || sum.RetriedSends != 0 {
		t.Fatalf("fail %d unknown %d retried %d: want every send ACKed at its first try", sum.Fail, sum.Unknown, sum.RetriedSends)
	}
	if sum.Pacer.Late*2 < sum.Pacer.Started || o.Late != sum.Pacer.Late || o.LateFrac <= summary.LateFraction {
		t.Fatalf("pacer %+v, outcome %+v: want most sends late", sum.Pacer, o)
	}
	// The start delay is measured when the outcome is judged (it was once
	// judged before the latencies were filled: "p99 unknown").
	if o.StartDelayP99Ms == nil || !o.Overloaded || !strings.HasPrefix(o.Label(), "OVERLOADED: ") ||
		!strings.Contains(o.Label(), "of sends started late, start delay p99 ") || !strings.Contains(o.Label(), "(the target did not keep up with the offered rate)") {
		t.Fatalf("outcome %+v label %q: want OVERLOADED by the late sends", o, o.Label())
	}
	var b bytes.Buffer
	sum.WriteText(&b)
	if !strings.Contains(b.String(), "late starts above their bound: more than 5.0% of sends late") {
		t.Fatalf("summary text does not give the late limit:\n%s", b.String())
	}
}

// TestRefusedCredentialsAreCounted: a load with another secret than the
// target's gets 401 for every send and every device request; the summary
// counts them (refused), says it in its text, and CredentialsRefused
// names it. A load with the target's secret has none.
func TestRefusedCredentialsAreCounted(t *testing.T) {
	srv, err := faketarget.Start(faketarget.DefaultConfig(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	cfg := testConfig(t, srv.URL(), 50, time.Second)
	cfg.Secret = "not-the-target-secret-0123456789"
	cfg.Pop.Groups, cfg.Pop.GroupShare = 0, 0 // creating one would end the run at once (401)
	cfg.DrainTimeout = 2 * time.Second
	sum, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK != 0 || sum.Refused < sum.Fail || sum.Fail == 0 {
		t.Fatalf("ok %d fail %d refused %d: want every send failed and refused", sum.OK, sum.Fail, sum.Refused)
	}
	if err := sum.CredentialsRefused(); !errors.Is(err, summary.ErrCredentials) {
		t.Fatalf("CredentialsRefused: %v", err)
	}
	var b bytes.Buffer
	sum.WriteText(&b)
	if !strings.Contains(b.String(), fmt.Sprintf("refused: %d requests answered 401 or 403", sum.Refused)) {
		t.Fatalf("the summary text does not name the refusals:\n%s", b.String())
	}
	good, err := Run(ctx, testConfig(t, srv.URL(), 50, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if good.Refused != 0 || good.CredentialsRefused() != nil || good.OK == 0 {
		t.Fatalf("with the target's secret: ok %d refused %d", good.OK, good.Refused)
	}
}
