package compare

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Kinds of result file.
const (
	KindScenario = "scenario" // scenarios' result.json
	KindLoad     = "load"     // loadgen's summary.json
	KindCapacity = "capacity" // capacity's result.json
)

// File names Read looks for in a directory.
const (
	resultFile  = "result.json"
	summaryFile = "summary.json"
	verdictFile = "verdict.json"
	loadDir     = "load"
)

// CapacityKind is the "kind" field of a capacity search's result.json.
const CapacityKind = "imlab-capacity"

// Formats of the files Read knows: the "format" field their producers
// write. A file of another format is refused, naming the file and both
// formats; so is a scenario result without one (written by an imlab older
// than the field). A load summary, verdict or capacity result without one
// is read as the layout those producers wrote before the field existed.
const (
	ScenarioResultFormat = "imlab-scenario-result/1" // scenarios' result.json
	LoadSummaryFormat    = "imlab-load-summary/1"    // loadgen's summary.json
	VerdictFormat        = "imlab-verdict/1"         // the checker's verdict.json
	CapacityFormat       = "imlab-capacity-result/1" // capacity's result.json
)

// Run is one result file's metrics.
type Run struct {
	Path string
	Kind string
	// Subject is what was measured (a scenario's name, a load shape, a
	// capacity target and SLO): runs of different subjects do not compare.
	Subject string
	Metrics map[string]float64
	// Findings names the metrics that are checker findings (compared as
	// Safety metrics whatever their name: the checker's list grows).
	Findings map[string]bool
	// Notes say why a metric is absent (not measured).
	Notes []string
	// Env is where the run was measured (zero: not recorded).
	Env Env
}

// Read reads one result: a file, or a directory holding result.json or
// summary.json. A load summary is read with the checker's verdict.json
// beside it, when there is one (imlab check wrote it): its findings are
// then compared too.
func Read(path string) (*Run, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		found := ""
		for _, n := range []string{resultFile, summaryFile} {
			if _, err := os.Stat(filepath.Join(path, n)); err == nil {
				found = filepath.Join(path, n)
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("%w: %s: no %s or %s in the directory", ErrInput, path, resultFile, summaryFile)
		}
		path = found
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	run, err := Parse(path, b)
	if err != nil || run.Kind != KindLoad {
		return run, err
	}
	vp := filepath.Join(filepath.Dir(path), verdictFile)
	vb, err := os.ReadFile(vp)
	switch {
	case errors.Is(err, os.ErrNotExist):
		run.note("findings: no %s beside the summary (imlab check writes it): findings not compared", verdictFile)
		return run, nil
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	if err := readVerdict(vp, vb, run); err != nil {
		return nil, err
	}
	return run, nil
}

// Parse reads one result's JSON; path names it in the report. A file of a
// format Read does not know is refused (see ScenarioResultFormat).
func Parse(path string, b []byte) (*Run, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("%w: %s: not a JSON object: %v", ErrInput, path, err)
	}
	format, err := formatOf(path, probe)
	if err != nil {
		return nil, err
	}
	run := &Run{Path: path, Metrics: map[string]float64{}}
	switch {
	case has(probe, "kind") && string(probe["kind"]) == `"`+CapacityKind+`"`:
		if err = knownFormat(path, format, CapacityFormat, true); err == nil {
			err = readCapacity(b, run)
		}
	case has(probe, "scenario") && has(probe, "checks"):
		if err = knownFormat(path, format, ScenarioResultFormat, false); err == nil {
			err = readScenario(b, run)
		}
	case has(probe, "run_id") && has(probe, "pacer") && has(probe, "latency"):
		if err = knownFormat(path, format, LoadSummaryFormat, true); err != nil {
			break
		}
		var s loadSummary
		if err = json.Unmarshal(b, &s); err == nil {
			run.Kind, run.Subject = KindLoad, fmt.Sprintf("load %s for %s via %s", s.Shape, s.Duration, s.SendVia)
			err = s.metrics(run)
		}
	default:
		return nil, fmt.Errorf("%w: %s: not a scenario result.json, a capacity result.json or a load summary.json", ErrInput, path)
	}
	if errors.Is(err, ErrInput) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInput, path, err)
	}
	run.Env = envOf(b)
	return run, nil
}

// envOf reads where a run was measured from any of the three files: a
// scenario's backends, load average and the generator's CPU count, a
// capacity search's machine and generator (GOMAXPROCS, pacer), a load
// summary's CPU count, host and generator's GOMAXPROCS.
func envOf(b []byte) Env {
	var f struct {
		Backends string `json:"backends"`
		LabCPU   *struct {
			CPUs int `json:"cpus"`
		} `json:"lab_cpu"`
		LoadAverage *struct {
			Start [3]float64 `json:"start"`
		} `json:"load_average"`
		Machine *struct {
			CPUs     int    `json:"cpus"`
			Hostname string `json:"hostname"`
		} `json:"machine"`
		Split *struct {
			Host string `json:"host"`
		} `json:"split"`
		Generator *struct {
			GOMAXPROCS  int      `json:"gomaxprocs"`
			SpinMs      *float64 `json:"spin_ms"`
			LateAfterMs *float64 `json:"late_after_ms"`
		} `json:"generator"`
	}
	if json.Unmarshal(b, &f) != nil {
		return Env{}
	}
	e := Env{Backends: f.Backends}
	if f.LabCPU != nil {
		e.CPUs = f.LabCPU.CPUs
	}
	if f.LoadAverage != nil {
		l := f.LoadAverage.Start[0]
		e.Load1 = &l
	}
	if m := f.Machine; m != nil {
		e.CPUs, e.Host = max(e.CPUs, m.CPUs), m.Hostname
	}
	if f.Split != nil {
		e.Host = f.Split.Host
	}
	if g := f.Generator; g != nil && g.GOMAXPROCS > 0 {
		e.Generator = fmt.Sprintf("GOMAXPROCS %d", g.GOMAXPROCS)
		if g.SpinMs != nil && g.LateAfterMs != nil {
			e.Generator += fmt.Sprintf(", pacer spin %g ms, late after %g ms", *g.SpinMs, *g.LateAfterMs)
		}
	}
	return e
}

// formatOf is the file's "format" field (nil when it has none).
func formatOf(path string, probe map[string]json.RawMessage) (*string, error) {
	raw, ok := probe["format"]
	if !ok {
		return nil, nil
	}
	var f string
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("%w: %s: \"format\" is not a string: %s", ErrInput, path, raw)
	}
	return &f, nil
}

// knownFormat refuses a file whose format is not want; a file without
// one is refused unless legacy (its producer's layout before the field).
func knownFormat(path string, got *string, want string, legacy bool) error {
	switch {
	case got == nil && legacy:
		return nil
	case got == nil:
		return fmt.Errorf("%w: %s: written by an older imlab (no \"format\"; this one reads %q): run it again", ErrInput, path, want)
	case *got != want:
		return fmt.Errorf("%w: %s: format %q, this imlab reads %q", ErrInput, path, *got, want)
	}
	return nil
}

func has(m map[string]json.RawMessage, k string) bool { _, ok := m[k]; return ok }

func (r *Run) note(format string, a ...any) { r.Notes = append(r.Notes, fmt.Sprintf(format, a...)) }

// quantiles is the JSON of a latency histogram's quantiles (µs), as
// loadgen and the checker write them.
type quantiles struct {
	Count int64 `json:"count"`
	P50   int64 `json:"p50_us"`
	P99   int64 `json:"p99_us"`
	P999  int64 `json:"p999_us"`
}

// ackQuantiles adds ack_p50/p99/p999 (ms) from the response histogram, or
// notes that nothing was measured.
func (r *Run) ackQuantiles(q quantiles, ok bool, what string) {
	if !ok || q.Count == 0 {
		r.note("ack latency: no ACKed send measured (%s)", what)
		return
	}
	r.Metrics[MAckP50] = float64(q.P50) / 1000
	r.Metrics[MAckP99] = float64(q.P99) / 1000
	r.Metrics[MAckP999] = float64(q.P999) / 1000
}

// outcomes adds rate, errors and unknown from send outcome counts.
func (r *Run) outcomes(ok, fail, unknown uint64, seconds float64) {
	att := ok + fail + unknown
	if att == 0 {
		r.note("sends: no attempt recorded")
		return
	}
	r.Metrics[MErrors] = float64(fail+unknown) / float64(att)
	r.Metrics[MUnknown] = float64(unknown) / float64(att)
	if seconds > 0 {
		r.Metrics[MRate] = float64(ok) / seconds
	} else {
		r.note("rate: the load's duration is unknown")
	}
}

// loadSummary is the part of loadgen's summary.json compared.
type loadSummary struct {
	Shape    string               `json:"shape"`
	SendVia  string               `json:"send_via"`
	Duration string               `json:"duration"`
	OK       uint64               `json:"ok"`
	Fail     uint64               `json:"fail"`
	Unknown  uint64               `json:"unknown"`
	Latency  map[string]quantiles `json:"latency"`
	// LoadSeconds is the measured sending phase (0 in older summaries:
	// the configured duration stands in); Outcome says whether the run
	// was OVERLOADED (nil in older summaries).
	LoadSeconds float64 `json:"load_seconds"`
	Outcome     *struct {
		Overloaded bool    `json:"overloaded"`
		Limit      float64 `json:"overload_limit"`
	} `json:"outcome"`
}

func (s loadSummary) metrics(r *Run) error {
	d, err := time.ParseDuration(s.Duration)
	if err != nil {
		return fmt.Errorf("duration %q: %v", s.Duration, err)
	}
	secs := d.Seconds()
	if s.LoadSeconds > 0 {
		secs = s.LoadSeconds
	}
	// The rate is ACKed sends over the sending phase, not sends started:
	// a send that timed out carried nothing.
	r.outcomes(s.OK, s.Fail, s.Unknown, secs)
	if s.Outcome != nil {
		r.Metrics[MWithinLoad] = b2f(!s.Outcome.Overloaded)
	}
	q, ok := s.Latency["response"]
	r.ackQuantiles(q, ok, "summary response histogram")
	if e, ok := s.Latency["end_to_end"]; ok && e.Count > 0 {
		r.Metrics[ME2EP99] = float64(e.P99) / 1000
	}
	return nil
}

// scenarioResult is the part of a scenario's result.json compared.
type scenarioResult struct {
	Scenario string `json:"scenario"`
	Spec     *struct {
		Load struct {
			Duration string `json:"duration"`
		} `json:"load"`
	} `json:"spec"`
	// Verdict is the checker's verdict without its findings: the runner
	// lists those in Findings, at the top level.
	Verdict *struct {
		Valid    bool                 `json:"valid"`
		Attempts map[string]uint64    `json:"attempts"`
		Latency  map[string]quantiles `json:"latency"`
	} `json:"verdict"`
	Findings []struct {
		Name    string `json:"name"`
		Count   uint64 `json:"count"`
		NotMade string `json:"not_made"`
	} `json:"findings"`
	Checks []struct {
		Name string `json:"name"`
		OK   bool   `json:"ok"`
	} `json:"checks"`
	Lag []struct {
		MaxAge map[string]float64 `json:"max_age_s"`
		Err    string             `json:"error"`
	} `json:"lag_timeline"`
	RunDir string `json:"run_dir"`
	// RateScale: the run sent at a fraction of the file's rates (a
	// different subject from a run at the file's rates).
	RateScale *struct {
		Factor float64 `json:"factor"`
		For    string  `json:"for"`
	} `json:"rate_scale"`
	Recovery *recoveryFigures `json:"recovery"`
	// Capacity: a capacity scenario's search (its sustainable rate, knee,
	// cost per message).
	Capacity   *capacityResult `json:"capacity"`
	Errors     []string        `json:"errors"`
	Incomplete bool            `json:"incomplete"`
	Passed     bool            `json:"passed"`
}

func readScenario(b []byte, r *Run) error {
	var s scenarioResult
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s.Incomplete {
		return fmt.Errorf("scenario %s: the run could not be carried out (%s)", s.Scenario, strings.Join(s.Errors, "; "))
	}
	r.Kind, r.Subject = KindScenario, "scenario "+s.Scenario
	if s.Spec != nil && s.Spec.Load.Duration != "" {
		r.Subject += " for " + s.Spec.Load.Duration
	}
	if rs := s.RateScale; rs != nil {
		r.Subject += fmt.Sprintf(" at rates ×%g for %s", rs.Factor, rs.For)
	}
	r.Metrics[MPassed] = b2f(s.Passed)
	for _, c := range s.Checks {
		if c.Name == "verdict" {
			r.Metrics[MVerdict] = b2f(c.OK)
		}
	}
	if s.Verdict == nil {
		r.note("checker: no verdict (findings, ack latency and outcomes not compared)")
	} else {
		counts, notMade := map[string]uint64{}, map[string]string{}
		for _, f := range s.Findings {
			counts[f.Name], notMade[f.Name] = f.Count, f.NotMade
		}
		r.findings(counts, notMade, "the result's findings")
		q, ok := s.Verdict.Latency["response"]
		r.ackQuantiles(q, ok, "checker response histogram")
		if e, ok := s.Verdict.Latency["end_to_end"]; ok && e.Count > 0 {
			r.Metrics[ME2EP99] = float64(e.P99) / 1000
		}
		secs := 0.0
		if s.Spec != nil {
			if d, err := time.ParseDuration(s.Spec.Load.Duration); err == nil {
				secs = d.Seconds()
			}
		}
		a := s.Verdict.Attempts
		r.outcomes(a["ok"], a["fail"], a["unknown"], secs)
	}
	if s.Capacity != nil {
		capacityMetrics(r, *s.Capacity)
		return nil // a search has no lag timeline of its own
	}
	lagMetric(r, s)
	recoveryMetrics(r, s.Recovery)
	return nil
}

// findings adds the safety findings' counts; a finding the file does not
// list was not judged, and is left out (missing, never 0).
// findings adds the checker's findings' counts, every one the file names
// but recovered (a send of unknown outcome stored anyway: not a fault);
// one the checker could not judge (notMade: its count of 0 says nothing)
// is left out, as is one of SafetyFindings the file does not list: not
// judged, so missing, never 0.
func (r *Run) findings(counts map[string]uint64, notMade map[string]string, where string) {
	if r.Findings == nil {
		r.Findings = map[string]bool{}
	}
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		if name == recoveredFinding {
			continue
		}
		if why := notMade[name]; why != "" {
			r.note("finding %s: not judged (%s)", name, why)
			continue
		}
		r.Metrics[name] = float64(counts[name])
		r.Findings[name] = true
	}
	var absent []string
	for _, f := range SafetyFindings {
		if _, ok := counts[f]; !ok {
			absent = append(absent, f)
		}
	}
	if len(absent) > 0 {
		r.note("findings %s: not in %s (not judged)", strings.Join(absent, ", "), where)
	}
}

// recoveredFinding is the checker's finding that is not a fault.
const recoveredFinding = "recovered"

// readVerdict adds the findings of a load run's verdict.json (the
// checker's, written by imlab check) to its metrics.
func readVerdict(path string, b []byte, r *Run) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return fmt.Errorf("%w: %s: not a JSON object: %v", ErrInput, path, err)
	}
	format, err := formatOf(path, probe)
	if err != nil {
		return err
	}
	if err := knownFormat(path, format, VerdictFormat, true); err != nil {
		return err
	}
	var v struct {
		Valid    *bool `json:"valid"`
		Findings map[string]*struct {
			Count   uint64 `json:"count"`
			NotMade string `json:"not_made"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Valid == nil || v.Findings == nil {
		return fmt.Errorf("%w: %s: not the checker's verdict (want \"valid\" and \"findings\")", ErrInput, path)
	}
	counts, notMade := map[string]uint64{}, map[string]string{}
	for name, f := range v.Findings {
		if f != nil {
			counts[name], notMade[name] = f.Count, f.NotMade
		}
	}
	r.findings(counts, notMade, path)
	return nil
}

// lagMetric is the largest lag age over the answered polls. A run
// without a single poll had no queue (the runner polls whenever the
// topology has consumer groups): that is said, not taken for a failed
// measurement.
func lagMetric(r *Run, s scenarioResult) {
	answered, unknown, most := 0, 0, 0.0
	for _, l := range s.Lag {
		if l.Err != "" || len(l.MaxAge) == 0 {
			unknown++
			continue
		}
		answered++
		for _, v := range l.MaxAge {
			most = max(most, v)
		}
	}
	switch {
	case len(s.Lag) == 0:
		r.note("lag: no queue in this topology (no consumer group: nothing to poll, no lag to compare)")
		return
	case answered == 0:
		r.note("lag: no lag poll answered (%d polls, every one failed or incomplete): unknown", len(s.Lag))
		return
	}
	r.Metrics[MLag] = most
	if unknown > 0 {
		r.note("lag: %d of %d polls incomplete (unknown); the figure is the largest of the %d complete ones", unknown, len(s.Lag), answered)
	}
}

// recoveryFigures is the part of a scenario's recovery figures compared
// (recovery.Figures): outcomes only. Its settings (from_s,
// bound_s, hold_s, deadline_s) and sample counts describe how the figures
// were taken, not how the build did, and are never metrics.
type recoveryFigures struct {
	Status          string   `json:"status"`
	Reason          string   `json:"reason"`
	Since           string   `json:"since"`
	RecoverySeconds *float64 `json:"recovery_s"`
	BacklogPeak     *int64   `json:"backlog_peak"`
	DrainRowsPerSec *float64 `json:"drain_rows_per_s"`
	Groups          []struct {
		Name               string   `json:"name"`
		PeakAge            *float64 `json:"peak_age_s"`
		PeakRecords        *int64   `json:"peak_records"`
		DrainRecordsPerSec *float64 `json:"drain_records_per_s"`
	} `json:"groups"`
	Outbox *struct {
		PeakBacklog  *int64   `json:"peak_backlog"`
		Status       string   `json:"status"`
		Reason       string   `json:"reason"`
		DrainSeconds *float64 `json:"drain_s"`
	} `json:"outbox"`
	Samples int `json:"samples"`
}

// recoveryMetrics adds the recovery outcomes (metric.go): recovery
// (seconds from the end of the burst or the heal of the last fault until
// the lag stayed within its bound), recovery_backlog, the drain rates, the
// peak lag age and records, the outbox's peak and drain time. A figure the
// run did not reach (not recovered, no drain rate, an outbox that never
// drained) is absent, and compares as missing against a run that had it;
// peaks need at least one sample.
func recoveryMetrics(r *Run, rec *recoveryFigures) {
	if rec == nil {
		return
	}
	if rec.RecoverySeconds != nil {
		r.Metrics[MRecovery] = *rec.RecoverySeconds
	} else {
		r.note("recovery: %s (%s)", rec.Status, rec.Reason)
	}
	if rec.Samples == 0 {
		r.note("recovery: no lag sample: no peak or drain figure")
		return
	}
	if rec.BacklogPeak != nil {
		r.Metrics[MRecoveryBacklog] = float64(*rec.BacklogPeak)
	}
	if rec.DrainRowsPerSec != nil {
		r.Metrics[MDrainRows] = *rec.DrainRowsPerSec
	}
	var age, recs, drain *float64
	for _, g := range rec.Groups {
		if g.PeakAge != nil && (age == nil || *g.PeakAge > *age) {
			age = g.PeakAge
		}
		if g.PeakRecords != nil && (recs == nil || float64(*g.PeakRecords) > *recs) {
			recs = ptrF(float64(*g.PeakRecords))
		}
		if g.DrainRecordsPerSec != nil && (drain == nil || *g.DrainRecordsPerSec < *drain) {
			drain = g.DrainRecordsPerSec
		}
	}
	setIf(r, MPeakLagAge, age)
	setIf(r, MPeakLagRecords, recs)
	setIf(r, MDrainRate, drain)
	if o := rec.Outbox; o != nil {
		if o.PeakBacklog != nil {
			r.Metrics[MOutboxPeak] = float64(*o.PeakBacklog)
		}
		if o.DrainSeconds != nil {
			r.Metrics[MOutboxDrain] = *o.DrainSeconds
		} else {
			r.note("outbox: %s (%s): no drain time", o.Status, o.Reason)
		}
	}
}

func setIf(r *Run, name string, v *float64) {
	if v != nil {
		r.Metrics[name] = *v
	}
}

func ptrF(v float64) *float64 { return &v }

// capacityResult is the part of capacity's result.json compared.
type capacityResult struct {
	Target      string             `json:"target"`
	SLO         string             `json:"slo"`
	WarmUpS     float64            `json:"warm_up_s"`
	StepS       float64            `json:"step_s"`
	Sustainable *float64           `json:"sustainable_per_sec"`
	Knee        *float64           `json:"knee_per_sec"`
	Cost        map[string]float64 `json:"cpu_us_per_msg_at_sustainable"`
	// Limit is what broke the search ("server", "generator", "to", and
	// "credentials": the target refused the lab's token, nothing measured).
	Limit string `json:"limit"`
}

func readCapacity(b []byte, r *Run) error {
	var c capacityResult
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	// Steps of another length measure another thing (a short step hides
	// a slowly growing queue): part of the subject.
	r.Kind, r.Subject = KindCapacity, fmt.Sprintf("capacity slo %s, steps %gs + %gs", c.SLO, c.WarmUpS, c.StepS)
	capacityMetrics(r, c)
	return nil
}

func capacityMetrics(r *Run, c capacityResult) {
	switch {
	case c.Sustainable == nil && c.Limit == "credentials":
		r.note("sustainable rate: not measured: the target refused the lab's credentials (its secret is not the search's)")
	case c.Sustainable == nil:
		r.note("sustainable rate: no step held the SLO")
	default:
		r.Metrics[MSustainable] = *c.Sustainable
	}
	if c.Knee != nil {
		r.Metrics[MKnee] = *c.Knee
	}
	for p, v := range c.Cost {
		r.Metrics["cpu_us_per_msg."+p] = v
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
