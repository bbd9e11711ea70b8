package compare

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scen is a synthetic scenario result.
type scen struct {
	name          string
	p99ms         float64
	ok, fail, unk uint64
	lost          uint64
	lagS          *float64 // nil: no lag poll answered
	passed        bool
	noVerdict     bool
	incomplete    bool
	recovery      map[string]any
	rateScale     float64 // > 0: the run's rates were scaled
}

func (s scen) json() map[string]any {
	m := map[string]any{
		"format":   ScenarioResultFormat,
		"scenario": s.name, "checks": []map[string]any{{"name": "verdict", "want": "VALID", "got": "VALID", "ok": s.passed}},
		"spec":   map[string]any{"load": map[string]any{"duration": "10s"}},
		"passed": s.passed, "incomplete": s.incomplete,
	}
	if !s.noVerdict {
		m["verdict"] = map[string]any{
			"valid":    s.lost == 0,
			"attempts": map[string]uint64{"ok": s.ok, "fail": s.fail, "unknown": s.unk},
			"latency":  map[string]any{"response": map[string]int64{"count": int64(s.ok), "p50_us": int64(s.p99ms * 500), "p99_us": int64(s.p99ms * 1000), "p999_us": int64(s.p99ms * 1200)}},
		}
		// As the runner writes them: every finding at the top level, the
		// verdict without its own.
		var fs []map[string]any
		for _, f := range SafetyFindings {
			n := uint64(0)
			if f == "lost" {
				n = s.lost
			}
			fs = append(fs, map[string]any{"name": f, "count": n})
		}
		m["findings"] = fs
	}
	var lag []map[string]any
	if s.lagS != nil {
		lag = append(lag, map[string]any{"t_s": 1, "max_age_s": map[string]float64{"g": *s.lagS}})
	} else {
		lag = append(lag, map[string]any{"t_s": 1, "error": "connection refused"})
	}
	m["lag_timeline"] = lag
	if s.recovery != nil {
		m["recovery"] = s.recovery
	}
	if s.rateScale > 0 {
		m["rate_scale"] = map[string]any{"factor": s.rateScale, "for": "the embedded topology"}
	}
	return m
}

func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func f64(v float64) *float64 { return &v }

// runs writes one result per p99 value and reads them back.
func runs(t *testing.T, side string, base scen, p99s ...float64) []*Run {
	t.Helper()
	dir := t.TempDir()
	var out []*Run
	for i, p := range p99s {
		s := base
		s.p99ms = p
		path := writeJSON(t, dir, fmt.Sprintf("%s-%d/result.json", side, i), s.json())
		r, err := Read(filepath.Dir(path)) // a directory reads its result.json
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func healthy() scen {
	return scen{name: "smoke", ok: 10000, lagS: f64(0.5), passed: true}
}

func row(t *testing.T, rep *Report, metric string) Row {
	t.Helper()
	for _, r := range rep.Rows {
		if r.Metric == metric {
			return r
		}
	}
	t.Fatalf("no row %s in %+v", metric, rep.Rows)
	return Row{}
}

func TestClearRegressionIsNoiseTested(t *testing.T) {
	base := runs(t, "base", healthy(), 100, 103, 98, 101, 99)
	nw := runs(t, "new", healthy(), 150, 148, 155, 151, 149)
	rep, err := Compare(base, nw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := row(t, rep, MAckP99)
	if r.Verdict != VRegressed || r.Method != MethodUTest || !(r.P < 0.05) {
		t.Fatalf("ack_p99: %+v", r)
	}
	if r.Base != 100 || r.New != 150 {
		t.Fatalf("medians %v %v", r.Base, r.New)
	}
	if !rep.Regressed() || !rep.NoiseRun {
		t.Fatal("report must be a noise-tested regression")
	}
	if row(t, rep, MRate).Verdict != VSame {
		t.Fatalf("rate identical on both sides: %+v", row(t, rep, MRate))
	}
}

// TestNoiseOnly: medians differ by more than the tolerance, but the runs
// overlap so much that the U test cannot tell them apart: not a regression.
func TestNoiseOnly(t *testing.T) {
	base := runs(t, "base", healthy(), 100, 140, 90, 130, 110)
	nw := runs(t, "new", healthy(), 125, 95, 135, 105, 145)
	rep, err := Compare(base, nw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := row(t, rep, MAckP99)
	if r.Pct < 10 {
		t.Fatalf("test set-up: medians should differ beyond 10%%: %+v", r)
	}
	if r.Verdict != VSame || r.Method != MethodUTest || r.P < 0.05 {
		t.Fatalf("ack_p99: %+v", r)
	}
	if rep.Regressed() {
		t.Fatal("noise reported as a regression")
	}
}

func TestOnePairIsToleranceOnlyAndSaysSo(t *testing.T) {
	base := runs(t, "base", healthy(), 100)
	nw := runs(t, "new", healthy(), 115)
	rep, err := Compare(base, nw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := row(t, rep, MAckP99)
	if r.Verdict != VRegressed || r.Method != MethodTolerance || !strings.Contains(r.Note, "no noise test") {
		t.Fatalf("%+v", r)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "no noise test was possible") {
		t.Fatalf("text must say no noise test was possible:\n%s", b.String())
	}
	// A wider tolerance lets the same pair pass.
	ts, err := ParseTolerances("ack_p99:+20%")
	if err != nil {
		t.Fatal(err)
	}
	rep, err = Compare(base, nw, Options{Tolerances: ts})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, rep, MAckP99); r.Bad() {
		t.Fatalf("within +20%%: %+v", r)
	}
}

func TestThreeRunsAreTooFewForTheUTest(t *testing.T) {
	base := runs(t, "base", healthy(), 100, 101, 99)
	nw := runs(t, "new", healthy(), 150, 151, 149)
	rep, err := Compare(base, nw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := row(t, rep, MAckP99)
	if r.Verdict != VRegressed || r.Method != MethodTolerance || !strings.Contains(r.Note, "too few") {
		t.Fatalf("%+v", r)
	}
}

func TestMissingMetricsFailTheGate(t *testing.T) {
	base := runs(t, "base", healthy(), 100, 100, 100, 100)
	s := healthy()
	s.lagS = nil // no lag poll answered: unknown, not zero
	nw := runs(t, "new", s, 100, 100, 100, 100)
	rep, err := Compare(base, nw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, rep, MLag); r.Verdict != VMissing || !r.Bad() {
		t.Fatalf("lag: %+v", r)
	}
	if !rep.Regressed() {
		t.Fatal("a metric the new runs did not measure must not pass")
	}
	// No checker verdict: findings, latency and outcomes are missing.
	s = healthy()
	s.noVerdict = true
	nw = runs(t, "new", s, 100)
	rep, err = Compare(base[:1], nw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"lost", MAckP99, MRate, MErrors} {
		if r := row(t, rep, m); r.Verdict != VMissing {
			t.Fatalf("%s: %+v", m, r)
		}
	}
	// A metric only the new side has is reported, not failed.
	s = healthy()
	s.recovery = map[string]any{"status": "recovered", "recovery_s": 3.5, "backlog_peak": 900, "samples": 20}
	nw = runs(t, "new", s, 100)
	rep, err = Compare(base[:1], nw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, rep, MRecovery); r.Verdict != VNew || r.Bad() || r.New != 3.5 {
		t.Fatalf("recovery: %+v", r)
	}
	// A run that did not recover has no recovery time: missing, not 0.
	s.recovery = map[string]any{"status": "not recovered", "reason": "lag above bound at the end", "recovery_s": nil, "samples": 20, "backlog_peak": 5000}
	never := runs(t, "never", s, 100)
	rep, err = Compare(nw, never, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, rep, MRecovery); r.Verdict != VMissing {
		t.Fatalf("not recovered: %+v", r)
	}
	if r := row(t, rep, MRecoveryBacklog); r.Verdict != VRegressed {
		t.Fatalf("backlog 900 -> 5000: %+v", r)
	}
}

func TestMismatchedScenarios(t *testing.T) {
	base := runs(t, "base", healthy(), 100)
	other := healthy()
	other.name = "burst"
	nw := runs(t, "new", other, 100)
	if _, err := Compare(base, nw, Options{}); !errors.Is(err, ErrInput) {
		t.Fatalf("want ErrInput, got %v", err)
	}
	rep, err := Compare(base, nw, Options{AllowMismatch: true})
	if err != nil || rep.Mismatch == "" {
		t.Fatalf("allowed mismatch: %v %+v", err, rep)
	}
	// A run at scaled rates is another subject than one at the file's.
	scaled := healthy()
	scaled.rateScale = 0.1
	if _, err := Compare(base, runs(t, "scaled", scaled, 100), Options{}); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "×0.1") {
		t.Fatalf("scaled rates: want ErrInput naming the scale, got %v", err)
	}
	// Different kinds never compare.
	dir := t.TempDir()
	p := writeJSON(t, dir, "summary.json", loadSum(1000, 0, 0, 5000))
	ld, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compare(base, []*Run{ld}, Options{AllowMismatch: true}); !errors.Is(err, ErrInput) {
		t.Fatalf("kinds: want ErrInput, got %v", err)
	}
}

func TestSafetyFindingIsNeverNoise(t *testing.T) {
	base := runs(t, "base", healthy(), 100, 100, 100, 100, 100)
	s := healthy()
	s.lost = 1
	nw := runs(t, "new", s, 100, 100, 100, 100, 100)
	rep, err := Compare(base, nw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, rep, "lost"); r.Verdict != VRegressed {
		t.Fatalf("lost: %+v", r)
	}
}

func TestMustHold(t *testing.T) {
	base := runs(t, "base", healthy(), 100)
	s := healthy()
	s.passed = false
	nw := runs(t, "new", s, 100)
	rep, err := Compare(base, nw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, rep, MPassed); r.Verdict != VFailed {
		t.Fatalf("passed: %+v", r)
	}
	if r := row(t, rep, MVerdict); r.Verdict != VFailed {
		t.Fatalf("verdict: %+v", r)
	}
}

func loadSum(ok, fail, unknown uint64, p99us int64) map[string]any {
	return map[string]any{
		"run_id": "x", "shape": "const:1000", "send_via": "http", "duration": "10s", "pacer": map[string]any{"started": ok + fail + unknown},
		"ok": ok, "fail": fail, "unknown": unknown, "achieved_per_sec": float64(ok+fail+unknown) / 10,
		"latency": map[string]any{"response": map[string]int64{"count": int64(ok), "p50_us": p99us / 2, "p99_us": p99us, "p999_us": p99us}},
	}
}

// TestLoadSummaryRateIsACKed: the rate counts ACKed sends only, so a run
// whose sends mostly timed out regresses on rate and errors.
func TestLoadSummaryRateIsACKed(t *testing.T) {
	dir := t.TempDir()
	b, err := Read(writeJSON(t, dir, "a/summary.json", loadSum(10000, 0, 0, 5000)))
	if err != nil {
		t.Fatal(err)
	}
	n, err := Read(writeJSON(t, dir, "b/summary.json", loadSum(2000, 0, 8000, 5000)))
	if err != nil {
		t.Fatal(err)
	}
	if b.Metrics[MRate] != 1000 || n.Metrics[MRate] != 200 || n.Metrics[MUnknown] != 0.8 {
		t.Fatalf("metrics %v %v", b.Metrics, n.Metrics)
	}
	// A summary with the measured sending phase and its outcome: the rate
	// is over load_seconds, and an OVERLOADED run fails the gate.
	over := loadSum(2000, 0, 8000, 5000)
	over["load_seconds"] = 8.0
	over["outcome"] = map[string]any{"overloaded": true, "overload_limit": 0.01}
	o, err := Read(writeJSON(t, dir, "c/summary.json", over))
	if err != nil || o.Metrics[MRate] != 250 || o.Metrics[MWithinLoad] != 0 {
		t.Fatalf("outcome: %v %v", err, o.Metrics)
	}
	fine := loadSum(10000, 0, 0, 5000)
	fine["outcome"] = map[string]any{"overloaded": false, "overload_limit": 0.01}
	f, err := Read(writeJSON(t, dir, "d/summary.json", fine))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Compare([]*Run{f}, []*Run{o}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, rep, MWithinLoad); r.Verdict != VFailed {
		t.Fatalf("overloaded: %+v", r)
	}
	rep, err = Compare([]*Run{b}, []*Run{n}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{MRate, MErrors, MUnknown} {
		if r := row(t, rep, m); r.Verdict != VRegressed {
			t.Fatalf("%s: %+v", m, r)
		}
	}
	if r := row(t, rep, MAckP99); r.Verdict != VWithin {
		t.Fatalf("ack: %+v", r)
	}
}

func TestReadRejects(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"notjson.json": "nope",
		"other.json":   `{"hello": 1}`,
		"array.json":   `[1,2]`,
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(p); !errors.Is(err, ErrInput) {
			t.Errorf("%s: want ErrInput, got %v", name, err)
		}
	}
	if _, err := Read(filepath.Join(dir, "absent.json")); !errors.Is(err, ErrInput) {
		t.Errorf("absent: %v", err)
	}
	if _, err := Read(dir); !errors.Is(err, ErrInput) {
		t.Errorf("dir without a result: %v", err)
	}
	s := healthy()
	s.incomplete = true
	if _, err := Read(writeJSON(t, dir, "inc/result.json", s.json())); !errors.Is(err, ErrInput) {
		t.Errorf("incomplete: %v", err)
	}
}

// TestFormats: a file of a format this package does not read is refused,
// naming the file and both formats; a scenario result without a format
// is refused (written before the field), a load summary without one is
// read. A load run's verdict.json beside its summary adds its findings.
func TestFormats(t *testing.T) {
	dir := t.TempDir()
	s := healthy().json()
	s["format"] = "imlab-scenario-result/99"
	p := writeJSON(t, dir, "future/result.json", s)
	if _, err := Read(filepath.Dir(p)); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), p) ||
		!strings.Contains(err.Error(), "imlab-scenario-result/99") || !strings.Contains(err.Error(), ScenarioResultFormat) {
		t.Errorf("unknown result format: %v", err)
	}
	delete(s, "format")
	p = writeJSON(t, dir, "old/result.json", s)
	if _, err := Read(p); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "older imlab") {
		t.Errorf("result without a format: %v", err)
	}

	sum := loadSum(1000, 0, 0, 5000)
	if _, err := Read(writeJSON(t, dir, "legacy/summary.json", sum)); err != nil {
		t.Errorf("summary without a format: %v", err)
	}
	sum["format"] = "imlab-load-summary/2"
	p = writeJSON(t, dir, "next/summary.json", sum)
	if _, err := Read(filepath.Dir(p)); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), LoadSummaryFormat) {
		t.Errorf("unknown summary format: %v", err)
	}

	sum["format"] = LoadSummaryFormat
	run := filepath.Dir(writeJSON(t, dir, "checked/summary.json", sum))
	r, err := Read(run)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Metrics["lost"]; ok || !strings.Contains(strings.Join(r.Notes, "\n"), "verdict.json") {
		t.Fatalf("no verdict.json: findings must be absent and said so: %v %v", r.Metrics, r.Notes)
	}
	findings := map[string]any{}
	for _, f := range SafetyFindings {
		findings[f] = map[string]any{"count": 0}
	}
	findings["lost"] = map[string]any{"count": 3}
	v := map[string]any{"format": VerdictFormat, "valid": false, "findings": findings}
	writeJSON(t, run, "verdict.json", v)
	if r, err = Read(run); err != nil || r.Metrics["lost"] != 3 || r.Metrics["skipped"] != 0 {
		t.Fatalf("verdict.json: %v %v", err, r.Metrics)
	}
	v["format"] = "imlab-verdict/7"
	vp := writeJSON(t, run, "verdict.json", v)
	if _, err := Read(run); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), vp) || !strings.Contains(err.Error(), VerdictFormat) {
		t.Errorf("unknown verdict format: %v", err)
	}
}

func TestParseTolerances(t *testing.T) {
	ts, err := ParseTolerances("ack_p99:+10%,rate:-5%,recovery:+20%,lag:+500ms,errors:+0.1%,e2e_p99:3")
	if err != nil {
		t.Fatal(err)
	}
	want := Tolerances{MAckP99: {Rel: 0.1}, MRate: {Rel: 0.05}, MRecovery: {Rel: 0.2}, MLag: {Abs: 0.5}, MErrors: {Abs: 0.001}, ME2EP99: {Abs: 3}}
	for k, v := range want {
		if got := ts[k]; fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("%s: got %+v want %+v", k, got, v)
		}
	}
	ts2, err := ParseTolerances("cpu_us_per_msg:+30%")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := Lookup("cpu_us_per_msg.generator")
	if ts2.For(d).Rel != 0.3 {
		t.Errorf("group tolerance not applied: %+v", ts2.For(d))
	}
	for _, bad := range []string{"ack_p99:-10%", "rate:+5%", "nosuch:+1%", "ack_p99", "ack_p99:x", "passed:+1%", "ack_p99:+1%,ack_p99:+2%", "lag:-1s"} {
		if _, err := ParseTolerances(bad); !errors.Is(err, ErrInput) {
			t.Errorf("%q: want ErrInput, got %v", bad, err)
		}
	}
}

func TestMarkdownAndJUnit(t *testing.T) {
	base := runs(t, "base", healthy(), 100, 103, 98, 101, 99)
	nw := runs(t, "new", healthy(), 150, 148, 155, 151, 149)
	rep, err := Compare(base, nw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var md, ju bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| ack_p99 | 100.00ms | 150.00ms | +50.0% |") || !strings.Contains(md.String(), "**REGRESSED**") {
		t.Fatalf("markdown:\n%s", md.String())
	}
	if err := rep.WriteJUnit(&ju); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ju.String(), `<failure message="ack_p99 REGRESSED`) || !strings.Contains(ju.String(), `failures="3"`) {
		t.Fatalf("junit:\n%s", ju.String())
	}
}

// recoveryFig is a full recovery object as recovery writes it:
// settings (from_s, bound_s, hold_s, deadline_s, samples) beside outcomes.
func recoveryFig(recS, drain, rows, age float64, recs, backlog, outbox int64, outboxDrain float64) map[string]any {
	return map[string]any{
		"from_s": 12.0, "since": "end of the burst", "bound_s": 2.0, "hold_s": 3.0, "deadline_s": 60.0,
		"status": "recovered", "recovered_at_s": 12 + recS, "recovery_s": recS,
		"groups": []map[string]any{
			{"name": "inbox", "peak_age_s": age, "peak_age_t_s": 13.0, "peak_records": recs, "peak_records_t_s": 13.0, "status": "recovered",
				"relapses": 0, "drain_from_s": 12.0, "drain_to_s": 20.0, "drain_records_per_s": drain, "peak_drain_records_per_s": 2 * drain},
			{"name": "inbox-b", "peak_age_s": age / 2, "peak_records": recs / 2, "status": "recovered", "drain_records_per_s": 3 * drain},
		},
		"backlog_peak": backlog, "backlog_peak_t_s": 13.0, "drain_rows_per_s": rows,
		"outbox":  map[string]any{"peak_backlog": outbox, "peak_t_s": 13.0, "peak_age_s": 1.0, "status": "drained", "drained_at_s": 14.0, "drain_s": outboxDrain},
		"samples": 40, "unknown_samples": 1,
	}
}

// TestRecoveryComparesOutcomesOnly: from a recovery object only outcomes
// become metrics, each with its direction: a slower drain regresses
// (higher is better), a larger peak lag or outbox regresses (lower is
// better), and settings such as deadline_s or samples never appear, so a
// run with another deadline cannot regress (or pass) on it.
func TestRecoveryComparesOutcomesOnly(t *testing.T) {
	s := healthy()
	s.recovery = recoveryFig(3, 1000, 2000, 4, 5000, 6000, 700, 2)
	base := runs(t, "base", s, 100)
	want := map[string]float64{MRecovery: 3, MDrainRate: 1000, MDrainRows: 2000, MPeakLagAge: 4, MPeakLagRecords: 5000,
		MRecoveryBacklog: 6000, MOutboxPeak: 700, MOutboxDrain: 2}
	for n, v := range want {
		if got, ok := base[0].Metrics[n]; !ok || got != v {
			t.Errorf("%s: %v %v, want %v", n, got, ok, v)
		}
	}
	for n := range base[0].Metrics {
		if _, ok := Lookup(n); !ok {
			t.Errorf("metric %q read but not defined", n)
		}
		for _, setting := range []string{"from", "deadline", "samples", "bound", "hold"} {
			if strings.Contains(n, setting) {
				t.Errorf("setting read as a metric: %s", n)
			}
		}
	}
	// Same outcomes, other settings: nothing regresses.
	same := s
	fig := recoveryFig(3, 1000, 2000, 4, 5000, 6000, 700, 2)
	fig["deadline_s"], fig["samples"], fig["from_s"] = 5.0, 400, 99.0
	same.recovery = fig
	rep, err := Compare(base, runs(t, "same", same, 100), Options{})
	if err != nil || rep.Regressed() {
		t.Fatalf("settings changed, outcomes not: %v %+v", err, rep)
	}
	// Slower drain (higher is better) and larger peaks (lower is better).
	worse := s
	worse.recovery = recoveryFig(3, 500, 900, 9, 12000, 6000, 2000, 8)
	rep, err = Compare(base, runs(t, "worse", worse, 100), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{MDrainRate, MDrainRows, MPeakLagAge, MPeakLagRecords, MOutboxPeak, MOutboxDrain} {
		if r := row(t, rep, m); r.Verdict != VRegressed {
			t.Errorf("%s: %+v", m, r)
		}
	}
	for _, m := range []string{MRecovery, MRecoveryBacklog} {
		if r := row(t, rep, m); r.Bad() {
			t.Errorf("%s unchanged: %+v", m, r)
		}
	}
	// The same changes the other way round improve.
	rep, err = Compare(runs(t, "worse2", worse, 100), base, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, rep, MDrainRate); r.Verdict != VImproved {
		t.Errorf("faster drain: %+v", r)
	}
	// An outbox that never drained has no drain time: missing.
	never := s
	fig = recoveryFig(3, 1000, 2000, 4, 5000, 6000, 700, 2)
	fig["outbox"] = map[string]any{"peak_backlog": 700, "status": "not drained", "reason": "backlog at the end"}
	never.recovery = fig
	rep, err = Compare(base, runs(t, "never", never, 100), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, rep, MOutboxDrain); r.Verdict != VMissing {
		t.Errorf("outbox never drained: %+v", r)
	}
}

// TestEveryFindingIsCompared: a finding the file names beyond
// SafetyFindings (the checker's list grows) is compared as a Safety metric
// too; one the checker could not judge (not_made) is not read as 0; a
// recovered send is no fault.
func TestEveryFindingIsCompared(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, historyLost uint64, notMade string) *Run {
		s := healthy().json()
		fs := s["findings"].([]map[string]any)
		fs = append(fs, map[string]any{"name": "history-lost", "count": historyLost, "not_made": notMade},
			map[string]any{"name": "recovered", "count": historyLost})
		s["findings"] = fs
		r, err := Read(writeJSON(t, dir, name+"/result.json", s))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	base, lossy := write("base", 0, ""), write("lossy", 4, "")
	rep, err := Compare([]*Run{base}, []*Run{lossy}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, rep, "history-lost"); r.Verdict != VRegressed || r.New != 4 {
		t.Fatalf("history-lost: %+v", r)
	}
	for _, r := range rep.Rows {
		if r.Metric == "recovered" {
			t.Fatalf("recovered compared: %+v", r)
		}
	}
	unjudged := write("unjudged", 0, "no history witness in this ledger")
	if _, ok := unjudged.Metrics["history-lost"]; ok || !strings.Contains(strings.Join(unjudged.Notes, "\n"), "no history witness") {
		t.Fatalf("a finding not judged is read as %v (notes %v)", unjudged.Metrics["history-lost"], unjudged.Notes)
	}
	rep, err = Compare([]*Run{base}, []*Run{unjudged}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, rep, "history-lost"); r.Verdict != VMissing {
		t.Fatalf("history-lost not judged in the new run: %+v, want MISSING", r)
	}
}
