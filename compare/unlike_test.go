package compare_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"

	"imlab/capacity"
	"imlab/checker"
	"imlab/compare"
	"imlab/loadgen/summary"
	"imlab/result"
	"imlab/scenario"
)

// scenarioRun is the result.json the scenario runner writes (result.Result's
// own writer) for a strict run without a queue, ACK p99 p99ms, on these
// backends, cpus CPUs and this 1-minute load at its start; read back as
// compare reads it.
func scenarioRun(t *testing.T, name, backends string, cpus int, load1 float64, p99ms int64) *compare.Run {
	t.Helper()
	res := &result.Result{Format: result.ResultFormat, Scenario: "burst", Passed: true, Backends: backends,
		Spec:        &scenario.File{Name: "burst", Server: scenario.ServerSpec{Policy: "strict"}},
		LoadAverage: &result.LoadAverage{Start: [3]float64{load1, load1, load1}, End: [3]float64{load1, load1, load1}},
		LabCPU:      &summary.LabCPU{CPUs: cpus, WindowSeconds: 6, CPUSeconds: 1, Share: 1.0 / 6 / float64(cpus)},
		Verdict: &checker.Verdict{Format: checker.VerdictFormat, Valid: true,
			Latency: map[string]checker.Latency{"response": {Count: 1000, P50: p99ms * 300, P90: p99ms * 700, P99: p99ms * 1000, P999: p99ms * 1100, Max: p99ms * 1200}}},
		Checks: []result.Check{{Name: "verdict", Want: "valid", Got: "valid", OK: true}}}
	var b bytes.Buffer
	if err := res.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	r, err := compare.Parse(name+"/"+result.ResultFile, b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const (
	embedded = "mysql=embedded go-mysql-server; redis=embedded miniredis; kafka=embedded kfake"
	external = "mysql=external mariadb 10.11; redis=external redis 7.0.15; kafka=embedded kfake"
)

// TestUnlikeSidesAreSaid: a latency regression between a run on embedded
// backends and one on external backends, or between a quiet and a busy
// machine, is labelled as a comparison of unlike sides in every form (text,
// Markdown, JSON, JUnit) and still fails the gate; runs alike are gated as
// before, without the label.
func TestUnlikeSidesAreSaid(t *testing.T) {
	alike, err := compare.Compare([]*compare.Run{scenarioRun(t, "main", external, 2, 0.4, 100)}, []*compare.Run{scenarioRun(t, "change", external, 2, 0.6, 300)}, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(alike.Unlike) != 0 || !alike.Regressed() || strings.Contains(alike.Outcome(), "UNLIKE") {
		t.Fatalf("alike sides: unlike %v, regressed %v, %q", alike.Unlike, alike.Regressed(), alike.Outcome())
	}
	for _, c := range []struct {
		name, backends string
		cpus           int
		load1          float64
		want           string
	}{
		{"backends", embedded, 2, 0.4, "backends differ: base " + external + ", new " + embedded},
		{"machine", external, 8, 0.4, "machines (CPUs) differ: base 2, new 8"},
		{"load", external, 2, 3.5, "machine load differs: 1-minute load average per CPU at the start 0.20–0.20 in the base, 1.75–1.75 in the new runs (1.55 apart, more than 0.5)"},
		// 0.7009 per CPU against 0.2: 0.5009 apart, which two decimals
		// would print as 0.70 and 0.20, exactly 0.5 apart.
		{"load-near-the-gap", external, 2, 1.4018, "machine load differs: 1-minute load average per CPU at the start 0.200–0.200 in the base, 0.701–0.701 in the new runs (0.501 apart, more than 0.5)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := compare.Compare([]*compare.Run{scenarioRun(t, "main", external, 2, 0.4, 100)},
				[]*compare.Run{scenarioRun(t, "change", c.backends, c.cpus, c.load1, 300)}, compare.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Unlike) != 1 || !strings.HasPrefix(rep.Unlike[0], c.want) {
				t.Fatalf("unlike %q, want %q", rep.Unlike, c.want)
			}
			var p99 compare.Row
			for _, r := range rep.Rows {
				if r.Metric == compare.MAckP99 {
					p99 = r
				}
			}
			if p99.Verdict != compare.VUnlike || !p99.Bad() || !strings.Contains(p99.Note, "not a like-for-like comparison") || !rep.Regressed() {
				t.Fatalf("ack p99 row %+v: want REGRESSED (unlike sides), failing the gate", p99)
			}
			var text, md, junit, js bytes.Buffer
			if err := rep.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if err := rep.WriteMarkdown(&md); err != nil {
				t.Fatal(err)
			}
			if err := rep.WriteJUnit(&junit); err != nil {
				t.Fatal(err)
			}
			if err := json.NewEncoder(&js).Encode(rep); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(strings.SplitN(text.String(), "\n", 3)[1], "UNLIKE SIDES: "+c.want) {
				t.Errorf("text does not say it at the top:\n%s", text.String())
			}
			if !strings.Contains(md.String(), "> **Unlike sides**: "+c.want) || !strings.Contains(md.String(), "**REGRESSED (unlike sides)**") {
				t.Errorf("markdown:\n%s", md.String())
			}
			var doc struct {
				Suite struct {
					Out string `xml:"system-out"`
				} `xml:"testsuite"`
			}
			if err := xml.Unmarshal(junit.Bytes(), &doc); err != nil || !strings.Contains(doc.Suite.Out, "UNLIKE SIDES") || !strings.Contains(junit.String(), `type="REGRESSED (unlike sides)"`) {
				t.Errorf("junit (%v):\n%s", err, junit.String())
			}
			if !strings.Contains(js.String(), `"unlike_sides":["`+c.want) {
				t.Errorf("json:\n%s", js.String())
			}
		})
	}
}

// TestNoQueueIsNotAFailedPoll: a strict run's result.json has no lag
// timeline (nothing to poll): compare says there is no queue, not that
// no lag poll answered.
func TestNoQueueIsNotAFailedPoll(t *testing.T) {
	r := scenarioRun(t, "main", external, 2, 0.4, 100)
	notes := strings.Join(r.Notes, "\n")
	if !strings.Contains(notes, "lag: no queue in this topology") || strings.Contains(notes, "no lag poll answered") {
		t.Fatalf("notes:\n%s", notes)
	}
}

// capacityRun is a capacity search's result.json (capacity.Result as the
// search writes it) with this sustainable rate, on 2 CPUs, and this
// 1-minute load average at the search's start, its generator as a
// search's default.
func capacityRun(t *testing.T, name string, load1, sustainable float64) *compare.Run {
	t.Helper()
	return capacityRunOf(t, name, load1, sustainable, capacity.Generator{GOMAXPROCS: 2, SpinMs: 0, LateAfterMs: 2})
}

// capacityRunOf is capacityRun with this generator.
func capacityRunOf(t *testing.T, name string, load1, sustainable float64, gen capacity.Generator) *compare.Run {
	t.Helper()
	res := &capacity.Result{Kind: compare.CapacityKind, Format: capacity.ResultFormat, Target: "http://127.0.0.1:1", SLO: "ack_p99<=2000ms", WarmUpS: 2, StepS: 6,
		Sustainable: &sustainable, Machine: capacity.Machine{CPUs: 2, Hostname: "lab"}, Generator: gen,
		LoadAverage: &capacity.LoadAverage{Start: [3]float64{load1, load1, load1}, End: [3]float64{load1, load1, load1}}}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	r, err := compare.Parse(name+"/"+capacity.ResultFile, b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCapacityLoadsUnlike: two capacity searches, one begun on a quiet
// machine and one on a busy one, are compared as unlike sides, and the
// sustainable rate's fall is labelled so.
func TestCapacityLoadsUnlike(t *testing.T) {
	rep, err := compare.Compare([]*compare.Run{capacityRun(t, "quiet", 0.4, 400)}, []*compare.Run{capacityRun(t, "busy", 5.2, 250)}, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "machine load differs: 1-minute load average per CPU at the start 0.20–0.20 in the base, 2.60–2.60 in the new runs"
	if len(rep.Unlike) != 1 || !strings.HasPrefix(rep.Unlike[0], want) {
		t.Fatalf("unlike %q, want %q", rep.Unlike, want)
	}
	for _, r := range rep.Rows {
		if r.Metric == compare.MSustainable && (r.Verdict != compare.VUnlike || !strings.Contains(r.Note, "not a like-for-like comparison")) {
			t.Errorf("sustainable rate row %+v: want REGRESSED (unlike sides)", r)
		}
	}
	alike, err := compare.Compare([]*compare.Run{capacityRun(t, "quiet", 0.4, 400)}, []*compare.Run{capacityRun(t, "quiet2", 0.6, 400)}, compare.Options{})
	if err != nil || len(alike.Unlike) != 0 {
		t.Fatalf("alike loads: unlike %q (%v)", alike.Unlike, err)
	}
}

// TestCapacityGeneratorsUnlike: two searches whose generators ran
// differently (imlab load's pacer and GOMAXPROCS against the search's) are
// unlike sides, whatever else they share: the generator's CPU per message
// and the latencies depend on it.
func TestCapacityGeneratorsUnlike(t *testing.T) {
	rep, err := compare.Compare([]*compare.Run{capacityRunOf(t, "old", 0.4, 400, capacity.Generator{GOMAXPROCS: 4, SpinMs: 2, LateAfterMs: 1})},
		[]*compare.Run{capacityRun(t, "new", 0.4, 400)}, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "generators differ: base GOMAXPROCS 4, pacer spin 2 ms, late after 1 ms, new GOMAXPROCS 2, pacer spin 0 ms, late after 2 ms"
	if len(rep.Unlike) != 1 || rep.Unlike[0] != want {
		t.Fatalf("unlike %q, want %q", rep.Unlike, want)
	}
}

// TestCapacityNotMeasured: a search the target refused (limit
// "credentials", as capacity writes it) is read as not measured, not as
// a search in which no step held the SLO.
func TestCapacityNotMeasured(t *testing.T) {
	res := &capacity.Result{Kind: compare.CapacityKind, Format: capacity.ResultFormat, Target: "http://127.0.0.1:1", SLO: "ack_p99<=2000ms",
		WarmUpS: 2, StepS: 6, Limit: capacity.LimitCredentials, Machine: capacity.Machine{CPUs: 2}}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	r, err := compare.Parse("refused/"+capacity.ResultFile, b)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Join(r.Notes, "; "); !strings.Contains(n, "not measured: the target refused the lab's credentials") || strings.Contains(n, "no step held") {
		t.Fatalf("notes %q", n)
	}
	if _, ok := r.Metrics[compare.MSustainable]; ok {
		t.Fatal("a refused search has a sustainable rate")
	}
}
