package scenarios

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"imlab/checker"
	"imlab/report"
	"imlab/loadgen"
	"imlab/loadgen/schedule"
)

func u64(v uint64) *uint64   { return &v }
func f64(v float64) *float64 { return &v }
func dur(d time.Duration) *Duration {
	x := Duration(d)
	return &x
}

func byName(cs []Check) map[string]Check {
	m := map[string]Check{}
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

func TestEvaluate(t *testing.T) {
	e := ExpectSpec{MaxLost: u64(0), MaxSkipped: u64(0), MaxDuplicated: u64(10), MaxAckP99: dur(time.Second),
		MinRateRatio: f64(0.9), MaxLagAge: dur(5 * time.Second), MaxSendFailRatio: f64(0.01), MinTruncatedPulls: u64(1)}
	good := Observed{Checked: true, Valid: true, Findings: map[string]uint64{"duplicated": 3}, AckP99: 200 * time.Millisecond,
		AchievedPerSec: 95, TargetPerSec: 100, LagSamples: 4, MaxLagAge: time.Second, Attempts: 1000, Failed: 5,
		TruncatedPulls: 2, DrainComplete: true}
	cs := Evaluate(e, good)
	if !Passed(cs) {
		t.Fatalf("good run failed:\n%s", Table(cs))
	}
	want := []string{"verdict", "max_lost", "max_skipped", "max_duplicated", "max_ack_p99", "min_rate_ratio", "max_lag_age", "max_send_fail_ratio", "min_truncated_pulls", "drain_complete"}
	var got []string
	for _, c := range cs {
		got = append(got, c.Name)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("checks %v, want %v", got, want)
	}
	if !reflect.DeepEqual(cs, Evaluate(e, good)) {
		t.Fatal("Evaluate is not deterministic")
	}

	// Each failure flips exactly its check.
	for name, mut := range map[string]func(*Observed){
		"verdict":             func(o *Observed) { o.Valid = false },
		"max_lost":            func(o *Observed) { o.Findings = map[string]uint64{"lost": 1} },
		"max_skipped":         func(o *Observed) { o.Findings = map[string]uint64{"skipped": 2} },
		"max_duplicated":      func(o *Observed) { o.Findings = map[string]uint64{"duplicated": 11} },
		"max_ack_p99":         func(o *Observed) { o.AckP99 = 2 * time.Second },
		"min_rate_ratio":      func(o *Observed) { o.AchievedPerSec = 50 },
		"max_lag_age":         func(o *Observed) { o.MaxLagAge = 6 * time.Second },
		"max_send_fail_ratio": func(o *Observed) { o.Failed = 11 },
		"min_truncated_pulls": func(o *Observed) { o.TruncatedPulls = 0 },
		"drain_complete":      func(o *Observed) { o.DrainComplete = false },
	} {
		o := good
		mut(&o)
		m := byName(Evaluate(e, o))
		for n, c := range m {
			if fails := !c.OK; fails != (n == name) && !(name == "max_lost" && n == "verdict") && !(name == "max_skipped" && n == "verdict") {
				t.Errorf("%s broken: check %s ok=%v (%s / %s)", name, n, c.OK, c.Want, c.Got)
			}
		}
		if m[name].OK {
			t.Errorf("%s: check did not fail", name)
		}
	}

	// No lag samples: a lag bound cannot pass.
	o := good
	o.LagSamples = 0
	if byName(Evaluate(e, o))["max_lag_age"].OK {
		t.Error("max_lag_age passed without samples")
	}
	// Not checked: every finding check fails.
	o = good
	o.Checked = false
	m := byName(Evaluate(e, o))
	if m["verdict"].OK || m["max_lost"].OK || m["verdict"].Got != "not checked" {
		t.Errorf("unchecked run passed: %+v", m)
	}
}

// TestEvaluateNegativeControl: an invalid verdict with losses passes an
// "invalid, min_lost 1" expectation; a valid run fails it.
func TestEvaluateNegativeControl(t *testing.T) {
	e := ExpectSpec{Verdict: VerdictInvalid, MinLost: u64(1)}
	caught := Observed{Checked: true, Valid: false, Findings: map[string]uint64{"lost": 7}, DrainComplete: true}
	if cs := Evaluate(e, caught); !Passed(cs) {
		t.Fatalf("caught loss failed:\n%s", Table(cs))
	}
	missed := Observed{Checked: true, Valid: true, Findings: map[string]uint64{}, DrainComplete: true}
	m := byName(Evaluate(e, missed))
	if m["verdict"].OK || m["min_lost"].OK {
		t.Fatalf("a run that lost nothing passed the negative control: %+v", m)
	}
}

func TestMeanRate(t *testing.T) {
	sh, err := schedule.Parse("burst:base=100,peak=1100,at=2s,len=2s")
	if err != nil {
		t.Fatal(err)
	}
	if got := MeanRate(sh, 10*time.Second); got < 299 || got > 301 {
		t.Fatalf("mean %g, want 300", got)
	}
}

func sampleResult() *Result {
	return &Result{
		Format: ResultFormat, Scenario: "sample", Description: "d", StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Seconds: 12.5,
		Settings: []Setting{{"policy", "strict"}, {"backends", "mysql=x"}}, Backends: "mysql=x",
		Findings: []FindingSummary{{Name: "lost", Count: 2, Pairs: 3, MsgIDs: []uint64{5, 6}, Examples: []string{"msg 5 missing on dev 1"}}},
		Checks: []Check{{Name: "verdict", Want: "valid", Got: "invalid", OK: false}, {Name: "max_lost", Want: "<= 0", Got: "2"},
			{Name: "drain_complete", Want: "true", Got: "true", OK: true}},
		Events: []FaultEvent{{At: 1, Fault: "redis_wipe", Action: "inject", Affected: 10}, {At: 1.1, Fault: "redis_wipe", Action: "heal"}},
		Sends:  []SendSecond{{T: 1.1, Started: 100, OK: 99, Fail: 1, AckP50: ackMs(99, 1500), AckP99: ackMs(99, 9000)}, {T: 2.1, Started: 100, OK: 100, AckP50: ackMs(100, 1000), AckP99: ackMs(100, 4000)}},
		Lag:    []LagSample{{T: 1, MaxAge: map[string]float64{"imlab-inbox": 0.5}, Records: map[string]int64{"imlab-inbox": 3}}, {T: 2, Err: "down"}},
		Spec:   &File{Name: "sample", Expect: ExpectSpec{MaxAckP99: dur(time.Second), MaxLagAge: dur(time.Second)}},
		Errors: []string{"a note"},
	}
}

func TestJUnit(t *testing.T) {
	r1 := sampleResult()
	r2 := &Result{Scenario: "broken", Incomplete: true, Errors: []string{"backends: unavailable"}}
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, r1, r2); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName  xml.Name `xml:"testsuites"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Errors   int      `xml:"errors,attr"`
		Suites   []struct {
			Name     string `xml:"name,attr"`
			Tests    int    `xml:"tests,attr"`
			Failures int    `xml:"failures,attr"`
			Errors   int    `xml:"errors,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
				Error *struct {
					Message string `xml:"message,attr"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("junit does not parse: %v\n%s", err, buf.String())
	}
	if doc.Tests != 4 || doc.Failures != 2 || doc.Errors != 1 || len(doc.Suites) != 2 {
		t.Fatalf("counts: tests %d failures %d errors %d suites %d\n%s", doc.Tests, doc.Failures, doc.Errors, len(doc.Suites), buf.String())
	}
	s := doc.Suites[0]
	if s.Name != "sample" || s.Tests != 3 || s.Failures != 2 || s.Errors != 0 {
		t.Fatalf("suite %+v", s)
	}
	if s.Cases[1].Failure == nil || !strings.Contains(s.Cases[1].Failure.Message, "want <= 0, got 2") || !strings.Contains(s.Cases[1].Failure.Text, "msg 5 missing") {
		t.Fatalf("failure %+v", s.Cases[1].Failure)
	}
	if s.Cases[2].Failure != nil {
		t.Fatal("a passing check has a failure")
	}
	if doc.Suites[1].Errors != 1 || doc.Suites[1].Cases[0].Error == nil {
		t.Fatalf("incomplete run: %+v", doc.Suites[1])
	}
}

func TestResultRoundTrip(t *testing.T) {
	r := sampleResult()
	p := filepath.Join(t.TempDir(), ResultFile)
	if err := writeFile(p, r.WriteJSON); err != nil {
		t.Fatal(err)
	}
	back, err := ReadResult(p)
	if err != nil {
		t.Fatal(err)
	}
	if back.Path != p {
		t.Fatalf("read from %q, want %q", back.Path, p)
	}
	back.Path = ""
	if !reflect.DeepEqual(r, back) {
		t.Fatalf("round trip differs:\n%+v\n%+v", r, back)
	}
	if _, err := ReadResult(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Fatal("missing file read")
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadResult(bad); err == nil {
		t.Fatal("bad json read")
	}
}

func TestHTMLReport(t *testing.T) {
	rep := HTMLReport(sampleResult())
	// Strict with lag polled: throughput, ACK and lag charts; no outbox
	// chart (the policy writes none), a note says so and one that the
	// failed lag poll is left out.
	if len(rep.Charts) != 3 || len(rep.Markers) != 2 || len(rep.Checks) != 3 || rep.Passed {
		t.Fatalf("report: %d charts, %d markers, %d checks", len(rep.Charts), len(rep.Markers), len(rep.Checks))
	}
	if notes := strings.Join(rep.Notes, "\n"); !strings.Contains(notes, "No outbox chart") || !strings.Contains(notes, "1 of 2 lag polls failed") {
		t.Fatalf("notes %q", notes)
	}
	// The failed lag poll is a gap in the lag line, not a point left out
	// (the line would be drawn across it).
	if g := rep.Charts[2].Series[0].Gaps; len(g) != 1 || g[0] != 2 {
		t.Fatalf("lag gaps %v, want the failed poll at t=2", g)
	}
	// A second of the sending phase without an ACK (MySQL down) is a gap
	// in both ACK latency lines.
	down := sampleResult()
	down.Spec.Load.Duration = Duration(3 * time.Second)
	down.Sends = append(down.Sends[:1], SendSecond{T: 2.1, Started: 100, Unknown: 100}, SendSecond{T: 3.1, Started: 100, OK: 100, AckP50: ackMs(100, 900), AckP99: ackMs(100, 1000)})
	lat := HTMLReport(down).Charts[1]
	for _, se := range lat.Series {
		if len(se.Points) != 2 || len(se.Gaps) != 1 || se.Gaps[0] != 2.1 {
			t.Fatalf("%s: points %v gaps %v, want t=2.1 as a gap", se.Name, se.Points, se.Gaps)
		}
	}
	outbox := sampleResult()
	outbox.Spec.Server.Policy = "outbox"
	if n := len(HTMLReport(outbox).Charts); n != 4 {
		t.Fatalf("outbox policy: %d charts, want 4 with the outbox backlog", n)
	}
	noQueue := sampleResult()
	noQueue.Lag = nil
	if notes := strings.Join(HTMLReport(noQueue).Notes, "\n"); !strings.Contains(notes, "nothing goes through a queue") {
		t.Fatalf("strict without history: notes %q lack why there is no lag chart", notes)
	}
	if rep.Load == nil || !strings.Contains(rep.Load.Detail, "ACKed sends/s") || rep.Load.Label == "" {
		t.Fatalf("load %+v: want the load outcome in the header", rep.Load)
	}
	for _, s := range rep.Settings {
		if s[0] == "backends" {
			t.Fatalf("backends listed in the settings as well as the header")
		}
	}
	// Every send ended ok but a tenth needed a second try: the page's load
	// line says OVERLOADED, as imlab check does; a result without the
	// count says its retries are unknown.
	retried := sampleResult()
	var ok uint64
	for _, sec := range retried.Sends {
		ok += sec.OK
	}
	n := ok / 10
	retried.RetriedSends = &n
	if l := HTMLReport(retried).Load; !l.Overloaded || !strings.Contains(l.Label, "OVERLOADED") || strings.Contains(l.Detail, "retried 0.0%") {
		t.Fatalf("retried run's load %+v: want its retries and OVERLOADED", l)
	}
	if line := rep.Load.Detail; !strings.Contains(line, "retried 0.0% is unknown") {
		t.Fatalf("load line %q of a result without a retried count does not say it is unknown", line)
	}
	// A slow server ACKs a burst long after the schedule's duration: the
	// achieved rate counts the sends over the time they took, not over
	// the file's duration.
	slow := sampleResult()
	slow.Spec.Load.Duration = Duration(2 * time.Second)
	slow.Sends = []SendSecond{{T: slow.LoadOffset + 1, OK: 50}, {T: slow.LoadOffset + 20, OK: 50}, {T: slow.LoadOffset + 21}}
	if got := HTMLReport(slow).Load.Detail; !strings.Contains(got, "achieved 5 ACKed sends/s") || !strings.Contains(got, "over 20 s, from the first send") {
		t.Fatalf("load line %q: want 100 sends over 20 s", got)
	}
	if rep.Charts[1].Threshold != 1000 || rep.Charts[2].Threshold != 1 {
		t.Fatalf("thresholds %g %g", rep.Charts[1].Threshold, rep.Charts[2].Threshold)
	}
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "sample") {
		t.Fatal("the page does not name the scenario")
	}

	// Process incarnations become a table, times from the time base.
	res := sampleResult()
	res.TimeBase = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	res.Processes = []ProcessRun{
		{Name: "consumer", Exec: true, PID: 4242, StartedAt: res.TimeBase.Add(-time.Second), EndedAt: res.TimeBase.Add(2 * time.Second), End: "killed", State: "signal: killed"},
		{Name: "api", StartedAt: res.TimeBase.Add(-time.Second), End: "stopped"},
	}
	res.Repairs = RepairSummary{Known: true, Rows: 3, MsgIDs: []uint64{7, 8}}
	rep = HTMLReport(res)
	if len(rep.Tables) != 2 {
		t.Fatalf("%d tables, want the repairs and the processes table", len(rep.Tables))
	}
	if got := rep.Tables[0].Rows; len(got) != 1 || got[0][0] != "3" || got[0][1] != "2" || got[0][4] != "7 8" {
		t.Fatalf("repairs rows %q", got)
	}
	res.Processes[0].Log, res.Processes[1].Log = "/out/process-consumer.log", "/out/process-api.log"
	rep = HTMLReport(res)
	want := [][]string{{"consumer", "4242", "-1.00", "2.00", "killed", "signal: killed", "/out/process-consumer.log"}, {"api", "in the runner", "-1.00", "", "stopped", "none: runs inside the runner's process", "/out/process-api.log"}}
	if got := rep.Tables[1].Rows; !reflect.DeepEqual(got, want) {
		t.Fatalf("process rows %q, want %q", got, want)
	}
	buf.Reset()
	if err := report.WriteHTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
}

// TestHTMLReportAckLatency: the page's header carries the whole run's ACK
// latency from the checker's response histogram (ACKed sends only), and
// says unknown, never 0, when nothing was measured.
func TestHTMLReportAckLatency(t *testing.T) {
	res := sampleResult()
	res.Verdict = &checker.Verdict{Latency: map[string]checker.Latency{
		"response": {Count: 199, P50: 1200, P90: 3000, P99: 9000, P999: 9500, Max: 9800},
		"service":  {Count: 199, P50: 1, P90: 1, P99: 1, P999: 1, Max: 1},
	}}
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, HTMLReport(res)); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	head := page[:strings.Index(page, `<section id="checks">`)]
	for _, want := range []string{"ACK latency, whole run", "p50 1.2 ms · p90 3 ms · p99 9 ms · p99.9 9.5 ms · max 9.8 ms", "over 199 ACKed sends only; from the intended send time to the ACK"} {
		if !strings.Contains(head, want) {
			t.Errorf("page header lacks %q", want)
		}
	}
	for _, c := range []struct {
		name string
		edit func(r *Result)
		why  string
	}{
		{"no ACK", func(r *Result) { r.Verdict = &checker.Verdict{Latency: map[string]checker.Latency{"response": {}}} }, "no send was ACKed"},
		{"not checked", func(r *Result) { r.Verdict = nil }, "the ledger was not checked"},
		{"incomplete", func(r *Result) { r.Verdict, r.Incomplete = nil, true }, "the run could not be carried out"},
	} {
		r := sampleResult()
		c.edit(r)
		l := HTMLReport(r).Latencies
		if len(l) != 1 || l[0].Count != 0 || len(l[0].Quantiles) != 0 || l[0].Unknown != c.why {
			t.Errorf("%s: latency %+v, want unknown because %q", c.name, l, c.why)
		}
	}
}

// TestHTMLReportRepairedVsLost: the page tells the repaired messages
// that were delivered in the end (late) from those still lost, as the
// checker's ledger judged them, in the verdict line and in the repairs
// table; a data fault's label says how much it affected.
func TestHTMLReportRepairedVsLost(t *testing.T) {
	res := sampleResult()
	res.Verdict = &checker.Verdict{}
	res.Repairs = RepairSummary{Known: true, Rows: 5, MsgIDs: []uint64{7, 8, 9, 11},
		Fate: &checker.Fate{Messages: 4, Delivered: 2, Lost: []uint64{9}, Unexplained: []uint64{11},
			LastCopy: checker.Latency{Count: 2, P50: 2_000_000, Max: 4_000_000}}}
	rep := HTMLReport(res)
	if !strings.Contains(rep.Verdict, "2 messages repaired late by reconciliation and delivered in the end, 1 repaired but still lost, 1 not in the ledger") {
		t.Errorf("verdict %q does not tell the repaired-and-delivered from the lost", rep.Verdict)
	}
	row := rep.Tables[0].Rows[0]
	if row[2] != "2 of 4; the last recipient device's first copy 2s (p50), 4s (max) after the intended send" || row[3] != "1: msg_ids 9" {
		t.Errorf("repairs row %q: want 2 of 4 delivered late, 1 lost (9)", row)
	}
	if !strings.Contains(row[5], "1 repaired messages are not in the ledger") || !strings.Contains(row[5], `"recovered" is not these`) {
		t.Errorf("note %q", row[5])
	}
	if got := rep.Markers[0].Label; got != "inject redis_wipe (10 keys deleted)" {
		t.Errorf("fault label %q: want what the fault affected", got)
	}

	// Not judged: unknown, never 0; nothing repaired: 0 and no verdict line.
	res.Repairs.Fate = nil
	rep = HTMLReport(res)
	if row := rep.Tables[0].Rows[0]; !strings.HasPrefix(row[2], "unknown") || !strings.HasPrefix(row[3], "unknown") ||
		!strings.Contains(rep.Verdict, "delivered or lost unknown") {
		t.Errorf("fate not judged: row %q, verdict %q", row, rep.Verdict)
	}
	res.Repairs = RepairSummary{Known: true}
	rep = HTMLReport(res)
	if row := rep.Tables[0].Rows[0]; row[2] != "0 (none repaired)" || !strings.HasPrefix(row[3], "0 (none repaired") || strings.Contains(rep.Verdict, "repaired") {
		t.Errorf("nothing repaired: row %q, verdict %q", row, rep.Verdict)
	}
}

// TestMergedSummaryOutcome: the segments' merged summary carries the
// outcome of the summed counts (one segment's unknowns make the whole run
// OVERLOADED when they exceed the limit of all its sends).
func TestMergedSummaryOutcome(t *testing.T) {
	a := &loadgen.Summary{OK: 500, LoadSeconds: 5, StartedPerSec: 100, AchievedPerSec: 100}
	b := &loadgen.Summary{OK: 450, Unknown: 50, LoadSeconds: 5.2, StartedPerSec: 100, AchievedPerSec: 90}
	m := mergeSummaries([]*loadgen.Summary{a, b})
	if m.OK != 950 || m.LoadSeconds != 5.2 || m.StartedPerSec != 200 || !m.Outcome.Overloaded || m.Outcome.UnknownFrac != 0.05 {
		t.Fatalf("merged: ok %d load %gs started %g/s outcome %+v", m.OK, m.LoadSeconds, m.StartedPerSec, m.Outcome)
	}
	// The ACK window is the longest segment's (its last ACK), not the
	// first segment's; retried sends are summed.
	a.AckSeconds, b.AckSeconds, a.RetriedSends, b.RetriedSends = 5.1, 6, 3, 4
	if m := mergeSummaries([]*loadgen.Summary{a, b}); m.AckSeconds != 6 || m.RetriedSends != 7 {
		t.Fatalf("merged: ack window %gs, retried %d; want 6s, 7", m.AckSeconds, m.RetriedSends)
	}
}

// A data fault's count says what it counts: Kafka's record loss deletes
// consumed records too, so its count is not the messages lost.
func TestAffectedUnit(t *testing.T) {
	for fault, want := range map[string]string{
		"kafka_record_loss(imlab.fanout)":    "records deleted, already consumed or not",
		"kafka_topic_recreate(imlab.fanout)": "records dropped with the topic, already consumed or not",
		"redis_wipe":                         "keys deleted",
		"allocator_rollback(5)":              "seq counters set back",
		"down(mysql)":                        "affected",
	} {
		if got := affectedUnit(fault); got != want {
			t.Errorf("%s: %q, want %q", fault, got, want)
		}
	}
}
