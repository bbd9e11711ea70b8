package runpage

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"imlab/checker"
	"imlab/report"
	"imlab/result"
	"imlab/scenario"
)

func f64(v float64) *float64 { return &v }

func dur(d time.Duration) *scenario.Duration {
	x := scenario.Duration(d)
	return &x
}

func sampleResult() *result.Result {
	return &result.Result{
		Format: result.ResultFormat, Scenario: "sample", Description: "d", StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Seconds: 12.5,
		Settings: []result.Setting{{Name: "policy", Value: "strict"}, {Name: "backends", Value: "mysql=x"}}, Backends: "mysql=x",
		Findings: []result.FindingSummary{{Name: "lost", Count: 2, Pairs: 3, MsgIDs: []uint64{5, 6}, Examples: []string{"msg 5 missing on dev 1"}}},
		Checks: []result.Check{{Name: "verdict", Want: "valid", Got: "invalid", OK: false}, {Name: "max_lost", Want: "<= 0", Got: "2"},
			{Name: "drain_complete", Want: "true", Got: "true", OK: true}},
		Events: []result.FaultEvent{{At: 1, Fault: "redis_wipe", Kind: "redis_wipe", Action: "inject", Affected: 10}, {At: 1.1, Fault: "redis_wipe", Kind: "redis_wipe", Action: "heal"}},
		Sends:  []result.SendSecond{{T: 1.1, Started: 100, OK: 99, Fail: 1, AckP50: result.AckMs(99, 1500), AckP99: result.AckMs(99, 9000)}, {T: 2.1, Started: 100, OK: 100, AckP50: result.AckMs(100, 1000), AckP99: result.AckMs(100, 4000)}},
		Lag:    []result.LagSample{{T: 1, MaxAge: map[string]float64{"imlab-inbox": 0.5}, Records: map[string]int64{"imlab-inbox": 3}}, {T: 2, Err: "down"}},
		Spec:   &scenario.File{Name: "sample", Expect: scenario.ExpectSpec{MaxAckP99: dur(time.Second), MaxLagAge: dur(time.Second)}},
		Errors: []string{"a note"},
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
	down.Spec.Load.Config.Duration = 3 * time.Second
	down.Sends = append(down.Sends[:1], result.SendSecond{T: 2.1, Started: 100, Unknown: 100}, result.SendSecond{T: 3.1, Started: 100, OK: 100, AckP50: result.AckMs(100, 900), AckP99: result.AckMs(100, 1000)})
	lat := HTMLReport(down).Charts[1]
	for _, se := range lat.Series {
		if len(se.Points) != 2 || len(se.Gaps) != 1 || math.Abs(se.Gaps[0]-1.6) > 1e-9 {
			t.Fatalf("%s: points %v gaps %v, want the second ending at t=2.1 as a gap at its middle, 1.6", se.Name, se.Points, se.Gaps)
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
	slow.Spec.Load.Config.Duration = 2 * time.Second
	slow.Sends = []result.SendSecond{{T: slow.LoadOffset + 1, OK: 50}, {T: slow.LoadOffset + 20, OK: 50}, {T: slow.LoadOffset + 21}}
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
	res.Processes = []result.ProcessRun{
		{Name: "consumer", Exec: true, PID: 4242, StartedAt: res.TimeBase.Add(-time.Second), EndedAt: res.TimeBase.Add(2 * time.Second), End: "killed", State: "signal: killed"},
		{Name: "api", StartedAt: res.TimeBase.Add(-time.Second), End: "stopped"},
	}
	res.Repairs = result.RepairSummary{Known: true, Rows: 3, MsgIDs: []uint64{7, 8}}
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
		edit func(r *result.Result)
		why  string
	}{
		{"no ACK", func(r *result.Result) {
			r.Verdict = &checker.Verdict{Latency: map[string]checker.Latency{"response": {}}}
		}, "no send was ACKed"},
		{"not checked", func(r *result.Result) { r.Verdict = nil }, "the ledger was not checked"},
		{"incomplete", func(r *result.Result) { r.Verdict, r.Incomplete = nil, true }, "the run could not be carried out"},
		{"capacity", func(r *result.Result) {
			r.Verdict, r.Capacity = nil, &result.CapacitySummary{Result: "run/capacity/result.json", Checked: 5, Steps: 5}
		}, "a capacity search has no whole-run figure: each step's ACK latency is in its own report"},
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
	res.Repairs = result.RepairSummary{Known: true, Rows: 5, MsgIDs: []uint64{7, 8, 9, 11},
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
	res.Repairs = result.RepairSummary{Known: true}
	rep = HTMLReport(res)
	if row := rep.Tables[0].Rows[0]; row[2] != "0 (none repaired)" || !strings.HasPrefix(row[3], "0 (none repaired") || strings.Contains(rep.Verdict, "repaired") {
		t.Errorf("nothing repaired: row %q, verdict %q", row, rep.Verdict)
	}
}

// A capacity search's page says its steps were checked one by one (not
// "not checked"), and has no whole-run repairs table of zeros.
func TestCapacityPageSaysWhatWasChecked(t *testing.T) {
	r := sampleResult()
	r.Verdict, r.Capacity = nil, &result.CapacitySummary{Result: "run/capacity/result.json", Checked: 5, Invalid: 0, Steps: 5}
	rep := HTMLReport(r)
	if !strings.Contains(rep.Verdict, "0 of 5 checked steps invalid") {
		t.Errorf("verdict %q", rep.Verdict)
	}
	for _, tb := range rep.Tables {
		if strings.HasPrefix(tb.Title, "Repairs") {
			t.Errorf("a capacity page has a repairs table: %q", tb.Title)
		}
	}
}

// TestThroughputByIntendedSecond: a stall holds the first second's sends
// (100 offered) and their ACKs all come in the second after, with that
// second's own 100: by the second the answer came, 200 ACKed/s, twice the
// offered rate. The chart counts each send in the second it was intended
// in, as the offered rate does, and its title says so; it ends with the
// last second a send was intended in (the seconds after intend nothing:
// zeros there would draw the load's end as a collapse); a result written
// before the intended counts were recorded keeps the answer's second and
// says that.
func TestThroughputByIntendedSecond(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	res := sampleResult()
	res.Sends = []result.SendSecond{
		{T: 1.1, Started: 100, IntendedOK: u(100), IntendedFailed: u(0)},
		{T: 2.1, Started: 100, OK: 200, AckP50: result.AckMs(200, 900), AckP99: result.AckMs(200, 1000), IntendedOK: u(99), IntendedFailed: u(1)},
		{T: 3.1, Fail: 1, IntendedOK: u(0), IntendedFailed: u(0)},
	}
	th := HTMLReport(res).Charts[0]
	if !strings.Contains(th.Title, "by the second each send was intended") {
		t.Fatalf("throughput title %q", th.Title)
	}
	var ok, fail []float64
	for _, p := range th.Series[0].Points {
		ok = append(ok, p.V)
	}
	for _, p := range th.Series[1].Points {
		fail = append(fail, p.V)
	}
	if !reflect.DeepEqual(ok, []float64{100, 99}) || !reflect.DeepEqual(fail, []float64{0, 1}) {
		t.Fatalf("ok/s %v, failed/s %v; want by intended second [100 99], [0 1]", ok, fail)
	}
	for i := range res.Sends {
		res.Sends[i].IntendedOK, res.Sends[i].IntendedFailed = nil, nil
	}
	th = HTMLReport(res).Charts[0]
	if !strings.Contains(th.Title, "by the second each send's outcome came") || th.Series[0].Points[1].V != 200 {
		t.Fatalf("older result: title %q, second 2 %v", th.Title, th.Series[0].Points[1].V)
	}
}

// TestSecondsAtTheirMiddle: each second of sends is drawn at the middle
// of what it counts, so a fault injected inside a second is not drawn
// against the second before it; a second cut short by a fault (13 fast
// ACKs, the rest held up by the fault) is an open point, said under the
// chart, never a plain dip in the latency line.
func TestSecondsAtTheirMiddle(t *testing.T) {
	res := sampleResult()
	res.Events = []result.FaultEvent{{At: 2.09, Fault: "mysql_latency", Kind: "latency", Action: "inject"}, {At: 3.84, Fault: "mysql_latency", Kind: "latency", Action: "heal"}}
	res.Sends = []result.SendSecond{
		{T: 2.0, Started: 150, OK: 150, AckP50: result.AckMs(150, 4000), AckP99: result.AckMs(150, 6000)},
		{T: 3.0, Started: 150, OK: 13, Unknown: 0, AckP50: result.AckMs(13, 4800), AckP99: result.AckMs(13, 6600)},
		{T: 4.0, Started: 150, OK: 287, AckP50: result.AckMs(287, 900000), AckP99: result.AckMs(287, 1607000)},
	}
	charts, _ := sendCharts(res)
	if len(charts) != 2 {
		t.Fatalf("%d send charts", len(charts))
	}
	tput, lat := charts[0], charts[1]
	if p := tput.Series[0].Points; len(p) != 3 || p[0].T != 1.5 || p[1].T != 2.5 || p[2].T != 3.5 {
		t.Fatalf("throughput points %+v, want the seconds at 1.5, 2.5, 3.5", p)
	}
	p99 := lat.Series[1].Points
	if len(p99) != 3 || p99[1].T != 2.5 || !p99[1].Hollow || p99[0].Hollow || p99[2].Hollow {
		t.Fatalf("p99 points %+v, want the second of 13 ACKs open at 2.5 and the others filled", p99)
	}
	if !strings.Contains(lat.Hollow, "fewer than 20 ACKs") {
		t.Fatalf("open point meaning %q", lat.Hollow)
	}
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, HTMLReport(res)); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if !strings.Contains(page, `class="point hollow"`) || !strings.Contains(page, "open point: a second with fewer than 20 ACKs") {
		t.Error("the page draws no open point for the second of 13 ACKs, or does not say what it means")
	}
}
