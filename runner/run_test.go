package runner

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"imlab/expect"
	"imlab/internal/testenv"
	"imlab/loadgen/summary"
	"imlab/result"
	"imlab/runner/lagpoll"
	"imlab/runner/proc"
	"imlab/scenario"
)

// e2eConfig is a runner config on a private database and Redis prefix of
// the real servers (kfake and the proxies are the run's own).
func e2eConfig(t *testing.T) Config {
	t.Helper()
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	cfg := DefaultConfig(t.TempDir())
	cfg.Mode = "external"
	cfg.MySQLDSN, cfg.RedisAddr, cfg.RedisPrefix = my.DSN, rd.Addr, rd.Keys.Prefix
	cfg.FreshDatabase = false
	cfg.ChildCommand = testChildCommand(t)
	return cfg
}

func runFile(t *testing.T, cfg Config, f *scenario.File) *result.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, cfg, f)
	if err != nil {
		t.Fatalf("run %s: %v", f.Name, err)
	}
	t.Logf("%s: passed=%v in %s\n%s", f.Name, res.Passed, time.Since(start).Round(time.Millisecond), expect.Table(res.Checks))
	for _, e := range res.Errors {
		t.Logf("%s: note: %s", f.Name, e)
	}
	if !res.Passed {
		for _, s := range res.Lag {
			t.Logf("%s: %s", f.Name, lagpoll.Line(s))
		}
	}
	checkOutputs(t, cfg.OutDir, res)
	return res
}

// checkOutputs reads back what a run wrote.
func checkOutputs(t *testing.T, dir string, res *result.Result) {
	t.Helper()
	back, err := result.ReadResult(filepath.Join(dir, result.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	if back.Passed != res.Passed || len(back.Checks) != len(res.Checks) || back.Scenario != res.Scenario {
		t.Fatalf("result.json differs from the result")
	}
	b, err := os.ReadFile(filepath.Join(dir, result.JUnitFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("junit.xml: %v", err)
	}
	failed := 0
	for _, c := range res.Checks {
		if !c.OK {
			failed++
		}
	}
	if doc.Tests != len(res.Checks) || doc.Failures != failed {
		t.Fatalf("junit.xml: %d tests %d failures, want %d and %d", doc.Tests, doc.Failures, len(res.Checks), failed)
	}
	html, err := os.ReadFile(filepath.Join(dir, result.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(html, []byte("<svg")) || !bytes.Contains(html, []byte(res.Scenario)) {
		t.Fatal("report.html has no chart or does not name the scenario")
	}
	// The lab's own share of the machine while it sent: in result.json
	// (unless the load was split in segments) and on the page.
	if l := back.LabCPU; (l == nil) != (res.LabCPU == nil) || (l == nil && res.Spec.Load.Segments <= 1) ||
		(l != nil && (l.CPUs < 1 || l.WindowSeconds <= 0 || l.OverHalf != (l.Share > 0.5))) {
		t.Fatalf("result.json lab_cpu %+v (the run's %+v)", l, res.LabCPU)
	}
	if !bytes.Contains(html, []byte("of the machine&#39;s CPU during the measured window")) && !bytes.Contains(html, []byte("of the machine's CPU during the measured window")) {
		t.Fatal("report.html does not say the generator's share of the machine")
	}
	checkCPULine(t, back, html)
	checkInProcess(t, back, html)
	if _, err := os.Stat(filepath.Join(dir, result.LoadDir, "summary.json")); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, result.LoadDir, "seg-1", "summary.json")); serr != nil {
			t.Fatalf("load directory: %v", err)
		}
	}
	if len(res.Sends) == 0 {
		t.Fatal("no send timeline")
	}
	// The late sends the load verdict is judged on are the load's own.
	if sum, err := summary.Read(filepath.Join(dir, result.LoadDir)); err == nil {
		var perSec uint64
		for _, s := range back.Sends {
			perSec += s.Late
		}
		if back.LateSends == nil || *back.LateSends != sum.Pacer.Late || perSec > sum.Pacer.Late || back.LateAfterMs <= 0 {
			t.Fatalf("result.json late_sends %v (%d in the timeline, bound %g ms), the load summary's pacer %+v", back.LateSends, perSec, back.LateAfterMs, sum.Pacer)
		}
	}
}

// checkCPULine: the CPU timeline as result.json holds it, read back: the
// runner's own line (this test process) measured in the run's seconds,
// every figure a real number of cores, and the page's chart of it.
func checkCPULine(t *testing.T, back *result.Result, html []byte) {
	t.Helper()
	line := back.CPU
	if line == nil || line.CPUs < 1 || len(line.Seconds) == 0 || len(line.Procs) == 0 {
		t.Fatalf("result.json cpu %+v", line)
	}
	self := line.Procs[0]
	if !strings.HasPrefix(self.Name, "runner (generator") || len(self.PIDs) != 1 || self.PIDs[0] != os.Getpid() {
		t.Fatalf("the runner's line %+v: want this process's pid %d first", self, os.Getpid())
	}
	measured := 0
	for _, s := range line.Seconds {
		c, ok := s.Cores[self.Name]
		if ok {
			measured++
		}
		if c < 0 || c > float64(4*line.CPUs) || (s.Machine != nil && (*s.Machine < 0 || *s.Machine > float64(2*line.CPUs))) {
			t.Fatalf("second %+v: a figure out of range", s)
		}
	}
	if measured < len(line.Seconds)-1 {
		t.Fatalf("the runner measured in %d of %d seconds", measured, len(line.Seconds))
	}
	if !bytes.Contains(html, []byte("CPU by process (cores of the machine")) {
		t.Fatal("report.html has no CPU chart")
	}
}

// checkInProcess: the lab's CPU figure is the runner's whole process, and
// says so when anything of the run runs inside it: result.json's lab_cpu
// names the same parts as the CPU timeline's runner line (a load segment's
// generator runs alone in its own process: none), and the page says the
// generator's own share is not separable (plain wording when the generator
// is alone).
func checkInProcess(t *testing.T, back *result.Result, html []byte) {
	t.Helper()
	l := back.LabCPU
	if l == nil {
		return
	}
	want := "runner (" + strings.Join(append([]string{"generator"}, l.InProcess...), ", ") + ")"
	if segs := back.SpecOrEmpty().Load.Segments; (segs > 1 && len(l.InProcess) > 0) || (segs <= 1 && back.CPU.Procs[0].Name != want) {
		t.Fatalf("lab_cpu in_process %q, the CPU timeline's runner line %q", l.InProcess, back.CPU.Procs[0].Name)
	}
	shared := bytes.Contains(html, []byte("the generator&#39;s own share is not separable"))
	if shared != (len(l.InProcess) > 0) || (shared && !bytes.Contains(html, []byte("the runner process (the generator and, inside it, "+strings.Join(l.InProcess, ", ")+") used"))) {
		t.Fatalf("lab_cpu in_process %q: the page's generator_cpu does not say so (or says it of a generator alone)", l.InProcess)
	}
}

// settingOf is the value of the named setting ("" without it).
func settingOf(settings []result.Setting, name string) string {
	for _, s := range settings {
		if s.Name == name {
			return s.Value
		}
	}
	return ""
}

// TestRunShipped runs shipped scenarios end to end against the real
// MariaDB and Redis with kfake; each must pass.
func TestRunShipped(t *testing.T) {
	for _, c := range []struct {
		file string
		dur  time.Duration
	}{{"redis-wipe.yaml", 4 * time.Second}, {"queue-loss-unsafe.yaml", 0}, {"offline-month.yaml", 4 * time.Second}, {"relay-stop.yaml", 4 * time.Second}, {"queue-loss-store.yaml", 0}} {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			f, err := scenario.ReadFile(filepath.Join("../scenarios", c.file))
			if err != nil {
				t.Fatal(err)
			}
			cfg := e2eConfig(t)
			cfg.Duration = c.dur
			res := runFile(t, cfg, f)
			if !res.Passed || res.Incomplete {
				t.Fatalf("%s did not pass:\n%s", c.file, expect.Table(res.Checks))
			}
			// None of these faults acts on a proxy: the servers reach
			// every backend directly.
			if got := settingOf(res.Settings, "proxies"); !strings.HasPrefix(got, "none") {
				t.Fatalf("proxies setting %q: want none", got)
			}
			checks := byName(res.Checks)
			switch f.Name {
			case "redis-wipe":
				if len(res.Events) != 2 || res.Events[0].Err != "" || res.Events[0].Affected == 0 {
					t.Fatalf("wipe events %+v", res.Events)
				}
				// Its server process "all" runs inside the runner: the
				// lab's CPU figure is not the generator's alone.
				if res.LabCPU == nil || !slices.Contains(res.LabCPU.InProcess, "all[all]") {
					t.Fatalf("lab_cpu %+v: want the in-process server process named", res.LabCPU)
				}
			case "queue-loss-unsafe":
				// The negative control: the loss is caught and named.
				if res.Verdict == nil || res.Verdict.Valid || !checks["min_lost"].OK {
					t.Fatalf("the unsafe policy's loss was not caught: %+v", res.Checks)
				}
				for _, fd := range res.Findings {
					if fd.Name == "lost" && (fd.Count == 0 || len(fd.MsgIDs) == 0 || len(fd.Examples) == 0) {
						t.Fatalf("lost finding does not name the messages: %+v", fd)
					}
				}
				if len(res.Lag) == 0 {
					t.Fatal("no lag samples")
				}
			case "relay-stop":
				// A graceful stop of an in-process process, started again.
				var relay []result.ProcessRun
				for _, p := range res.Processes {
					if p.Name == "relay" {
						relay = append(relay, p)
					}
				}
				if len(relay) != 2 || relay[0].Exec || relay[0].End != proc.EndStopped || relay[1].End != proc.EndStopped || relay[1].Addr != relay[0].Addr {
					t.Fatalf("relay incarnations %+v: want two in-process ones, stopped, on one address", relay)
				}
				for _, e := range res.Events {
					if e.Fault != "stop(relay)" || e.Err != "" {
						t.Fatalf("stop events %+v", res.Events)
					}
				}
			case "queue-loss-store":
				// Reconciliation repaired what the queue lost, and the
				// checker followed each repaired message to its end:
				// every one delivered (late), none lost, all in the
				// ledger; the page says so.
				rep := res.Repairs
				if rep.Rows == 0 || len(rep.MsgIDs) == 0 || rep.Fate == nil {
					t.Fatalf("repairs %+v: want rows, msg_ids and their fate", rep)
				}
				if f := rep.Fate; f.Messages != len(rep.MsgIDs) || f.Delivered != f.Messages || len(f.Lost) != 0 || len(f.Unexplained) != 0 {
					t.Fatalf("fate of the %d repaired messages %+v: want every one delivered", len(rep.MsgIDs), f)
				}
				html, err := os.ReadFile(filepath.Join(cfg.OutDir, result.ReportFile))
				if err != nil {
					t.Fatal(err)
				}
				if line := rep.FateLine(); !bytes.Contains(html, []byte(line)) {
					t.Fatalf("report.html does not say %q", line)
				}
			case "offline-month":
				if !checks["min_truncated_pulls"].OK {
					t.Fatal("the truncated path was not taken")
				}
			}
		})
	}
}

// TestRunFailingExpectation: a threshold that cannot hold makes the
// runner report failure, in the result, the JUnit file and the checks.
func TestRunFailingExpectation(t *testing.T) {
	t.Parallel()
	body := `
name: impossible-latency
load:
  rate: const:100
  duration: 2s
  users: 20
  settle: 500ms
faults:
  - at: 1s
    kind: redis_wipe
expect:
  max_lost: 0
  max_ack_p99: 1us
`
	f, err := scenario.Parse("impossible.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	cfg := e2eConfig(t)
	res := runFile(t, cfg, f)
	if res.Passed || res.Incomplete {
		t.Fatalf("passed=%v incomplete=%v: want a failed run", res.Passed, res.Incomplete)
	}
	m := byName(res.Checks)
	if m["max_ack_p99"].OK || !m["max_lost"].OK || !m["verdict"].OK {
		t.Fatalf("checks: %+v", res.Checks)
	}
	b, err := os.ReadFile(filepath.Join(cfg.OutDir, result.JUnitFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `<failure message="max_ack_p99: want &lt;= 1µs`) {
		t.Fatalf("junit.xml does not carry the failure:\n%s", b)
	}
	// A second run into the same directory is refused: nothing is overwritten.
	if _, err := Run(context.Background(), cfg, f); err == nil {
		t.Fatal("a second run into the same output directory was accepted")
	}
}

// TestRunConsumerKill runs consumer-kill.yaml, scaled down, end to end:
// the consumer is a separate OS process (this test binary as the child
// command) that is SIGKILLed in the middle of the load and replaced by a
// new one on the same address. The run must pass with nothing lost or
// skipped; the first consumer must have died by SIGKILL and a new pid must
// have consumed afterwards.
func TestRunConsumerKill(t *testing.T) {
	t.Parallel()
	f, err := scenario.ReadFile("../scenarios/consumer-kill.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := e2eConfig(t)
	cfg.Duration = 4 * time.Second
	res := runFile(t, cfg, f)
	if !res.Passed || res.Incomplete || res.Verdict == nil || !res.Verdict.Valid {
		t.Fatalf("consumer-kill did not pass:\n%s", expect.Table(res.Checks))
	}
	for _, fd := range res.Findings {
		if (fd.Name == "lost" || fd.Name == "skipped") && fd.Count != 0 {
			t.Fatalf("%s: %d", fd.Name, fd.Count)
		}
	}
	var kill, heal *result.FaultEvent
	for i, e := range res.Events {
		if e.Fault == "kill(consumer)" && e.Action == "inject" {
			kill = &res.Events[i]
		}
		if e.Fault == "kill(consumer)" && e.Action == "heal" {
			heal = &res.Events[i]
		}
	}
	if kill == nil || heal == nil || kill.Err != "" || heal.Err != "" {
		t.Fatalf("kill events %+v", res.Events)
	}
	// Recovery counts from the new consumer's start, and the run waited
	// for it to hold.
	rf := res.Recovery
	if rf == nil || rf.Status != "recovered" || rf.Since != "heal of kill(consumer)" || rf.From != heal.At || rf.RecoverySeconds == nil ||
		len(rf.Groups) == 0 || rf.Groups[0].PeakAge <= 0 || !byName(res.Checks)["lag_recovered"].OK {
		t.Fatalf("recovery figures %+v, checks:\n%s", rf, expect.Table(res.Checks))
	}
	t.Logf("recovery: %.1fs after the heal, peak age %.2fs, drain %s records/s, rows %s/s (%s)", *rf.RecoverySeconds, rf.Groups[0].PeakAge,
		result.OptRate(rf.Groups[0].DrainRecordsPerSec), result.OptRate(rf.DrainRowsPerSec), rf.DrainRowsNote)
	var consumer []result.ProcessRun
	for _, p := range res.Processes {
		switch p.Name {
		case "consumer":
			consumer = append(consumer, p)
		case "api":
			if p.Exec || p.PID != 0 || p.End != proc.EndStopped {
				t.Fatalf("api process %+v: want one in-process incarnation", p)
			}
		}
	}
	if len(consumer) != 2 {
		t.Fatalf("consumer incarnations %+v: want the killed one and its replacement", consumer)
	}
	dead, next := consumer[0], consumer[1]
	t.Logf("killed %+v\nreplacement %+v\nevents %+v", dead, next, res.Events)
	if !dead.Exec || dead.PID == 0 || dead.End != proc.EndKilled || dead.Signal != "killed" || dead.State != "signal: killed" {
		t.Fatalf("first consumer %+v: want an exec process ended by SIGKILL", dead)
	}
	if next.PID == dead.PID || next.Addr != dead.Addr || next.StartedAt.Before(dead.EndedAt) {
		t.Fatalf("replacement %+v: want a new pid on %s started after %s", next, dead.Addr, dead.EndedAt)
	}
	if next.End != proc.EndStopped || next.State != "exit status 0" || next.ConsumerRecords == 0 {
		t.Fatalf("replacement %+v: want a process that consumed and stopped gracefully", next)
	}
	if gap := next.StartedAt.Sub(dead.EndedAt); gap < time.Second {
		t.Fatalf("the consumer was down %s: want about the fault's for", gap)
	}
	// The CPU timeline follows the consumer through its kill: one line,
	// both incarnations' pids.
	for _, p := range res.CPU.Procs {
		if strings.HasPrefix(p.Name, "consumer[") && (len(p.PIDs) != 2 || p.PIDs[0] != dead.PID || p.PIDs[1] != next.PID) {
			t.Fatalf("the consumer's CPU line %+v: want pids %d then %d", p, dead.PID, next.PID)
		}
	}
	b, err := os.ReadFile(dead.Log)
	if err != nil || !bytes.Contains(b, []byte("child ready")) {
		t.Fatalf("process log %s: %v", dead.Log, err)
	}
}

// TestRunFaultAffectsNothing: an allocator rollback at 0s, before the
// load made (most) counters. The faults_reached check must agree with what
// the fault reported end to end: affected nothing → the check and the run
// fail (everything else passing); affected something → the check passes.
// With may_miss the run passes either way. (Whether a counter exists at 0s
// depends on the machine's speed; TestFaultReach pins the rule itself.)
func TestRunFaultAffectsNothing(t *testing.T) {
	t.Parallel()
	body := `
name: rollback-before-anything
load:
  rate: const:20
  duration: 2s
  users: 20
  settle: 500ms
faults:
  - at: 0s
    kind: allocator_rollback
    by: 10
expect:
  max_lost: 0
`
	f, err := scenario.Parse("nothing.yaml", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	res := runFile(t, e2eConfig(t), f)
	m := byName(res.Checks)
	var affected int64 = -1
	for _, e := range res.Events {
		if e.Action == "inject" {
			affected = e.Affected
		}
	}
	t.Logf("the rollback at 0s set back %d counters", affected)
	switch {
	case affected < 0:
		t.Fatalf("no inject event: %+v", res.Events)
	case affected == 0 && (res.Passed || m["faults_reached"].OK || !strings.Contains(m["faults_reached"].Got, "affected nothing") || !m["verdict"].OK):
		t.Fatalf("a fault that affected nothing: passed=%v\n%s", res.Passed, expect.Table(res.Checks))
	case affected > 0 && !m["faults_reached"].OK:
		t.Fatalf("a fault that set back %d counters failed faults_reached\n%s", affected, expect.Table(res.Checks))
	}
	f.Faults[0].MayMiss = true
	if res := runFile(t, e2eConfig(t), f); !byName(res.Checks)["faults_reached"].OK {
		t.Fatalf("may_miss: faults_reached failed\n%s", expect.Table(res.Checks))
	}
}

// TestRunEmbedded runs a shipped scenario on the embedded topology (the
// Go-only path: in-process go-mysql-server and miniredis) end to end: it
// must pass at the per-topology rate scale, and every output must say the
// rate was scaled. allocator-rollback: a safety scenario with a
// population the embedded engine serves in time under -race.
func TestRunEmbedded(t *testing.T) {
	t.Parallel()
	f, err := scenario.ReadFile("../scenarios/allocator-rollback.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(t.TempDir())
	cfg.Mode = "embedded"
	cfg.DataDir = t.TempDir()
	// A fifth of the file's users: under -race on a busy machine the
	// embedded engine answers the first sends of 200 devices only after
	// the rollback at 3s, which then finds no counter to set back
	// (faults_reached). The rates, faults and expectations are the file's.
	f.Load.Config.Pop.Users = 20
	res := runFile(t, cfg, f)
	if !res.Passed || res.Incomplete || res.Verdict == nil || !res.Verdict.Valid {
		t.Fatalf("%s on the embedded topology did not pass:\n%s", f.Name, expect.Table(res.Checks))
	}
	if !strings.Contains(res.Backends, "embedded go-mysql-server") {
		t.Fatalf("backends %q: want the embedded MySQL", res.Backends)
	}
	rs := res.RateScale
	if rs == nil || rs.Factor != scenario.DefaultEmbeddedRateScale || rs.For != result.RateScaleEmbedded || rs.FileRate != f.Load.Rate || rs.RunRate != "const:20" {
		t.Fatalf("rate scale %+v: want ×%g of %s for the embedded topology", rs, scenario.DefaultEmbeddedRateScale, f.Load.Rate)
	}
	if len(res.Events) != 2 || res.Events[0].Err != "" || res.Events[0].Affected == 0 {
		t.Fatalf("rollback events %+v", res.Events)
	}
	for _, name := range []string{result.ResultFile, result.JUnitFile, result.ReportFile} {
		b, err := os.ReadFile(filepath.Join(cfg.OutDir, name))
		if err != nil {
			t.Fatal(err)
		}
		// JSON and XML escape differently; the run's rate is in every one.
		if !bytes.Contains(b, []byte("run const:20")) {
			t.Fatalf("%s does not say the rate was scaled", name)
		}
	}
}
