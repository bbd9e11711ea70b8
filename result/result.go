package result

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"imlab/checker"
	"imlab/compare"
	"imlab/loadgen/summary"
	"imlab/recovery"
	"imlab/scenario"
)

// Output file names in a scenario's output directory.
const (
	ResultFile = "result.json"
	JUnitFile  = "junit.xml"
	ReportFile = "report.html"
	// LoadDir is the loadgen run directory (ledger, summary.json).
	LoadDir = "load"
)

// MaxListedIDs bounds the msg_ids a finding lists in result.json (the
// whole verdict is in verdict.json).
const MaxListedIDs = 1000

// Setting is one named setting of the run.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// FaultEvent is one injection or heal of the schedule.
type FaultEvent struct {
	// At is seconds since the run's start (the load's start, see Result).
	At    float64 `json:"at_s"`
	Fault string  `json:"fault"`
	// Kind is the fault's kind (faults.Lookup; "" in results written
	// before it was recorded).
	Kind   string `json:"kind,omitempty"`
	Action string `json:"action"` // inject | heal
	Err    string `json:"error,omitempty"`
	// Affected is how many keys, counters or records a data fault changed.
	Affected int64 `json:"affected,omitempty"`
}

// SendSecond is one second of the load: sends and ACK latency.
type SendSecond struct {
	T       float64 `json:"t_s"`
	Started uint64  `json:"started"`
	OK      uint64  `json:"ok"`
	Fail    uint64  `json:"fail"`
	Unknown uint64  `json:"unknown"`
	// Late: sends started in this second more than the pacer's LateAfter
	// after their intended time.
	Late uint64 `json:"late,omitempty"`
	// AckP50 and AckP99 are the ACK latency of the second's ACKed sends;
	// null in a second without an ACK (nothing measured, not 0 ms).
	AckP50 *float64 `json:"ack_p50_ms"`
	AckP99 *float64 `json:"ack_p99_ms"`
	// IntendedOK and IntendedFailed count the sends intended in this
	// second (the offered rate's second: the one before T) that were
	// ACKed, and that failed or stayed unknown, whenever their outcome
	// came; OK, Fail and Unknown count by the second the outcome came.
	// Nil in results written before they were recorded.
	IntendedOK     *uint64 `json:"intended_ok,omitempty"`
	IntendedFailed *uint64 `json:"intended_failed_or_unknown,omitempty"`
}

// ackMs is a latency in ms for a second with n ACKed sends (nil when n is
// 0: nothing was measured).
func AckMs(n uint64, us int64) *float64 {
	if n == 0 {
		return nil
	}
	v := float64(us) / 1000
	return &v
}

// LagSample is one poll of GET /v1/lab/lag.
type LagSample struct {
	T float64 `json:"t_s"`
	// MaxAge is the largest lag age (seconds) over the partitions of each
	// consumer group; Records the records behind.
	MaxAge  map[string]float64 `json:"max_age_s,omitempty"`
	Records map[string]int64   `json:"records,omitempty"`
	// OutboxBacklog, OutboxOldestAge and DLQRecords are nil when the
	// server could not measure them at this sample (or the poll failed):
	// unknown, never 0. A stored run from before they were pointers holds
	// 0 and an age of -1 there; a negative age is unknown too.
	OutboxBacklog   *int64   `json:"outbox_backlog,omitempty"`
	OutboxOldestAge *float64 `json:"outbox_oldest_age_s,omitempty"`
	DLQRecords      *int64   `json:"dlq_records,omitempty"`
	// Consumed is each group's position summed over the partitions (the
	// records it has consumed); InboxRows the inbox table's row count, read
	// by the lab from MySQL directly (nil: not read at this sample: the
	// count is spaced out, lagpoll.RowCountDuty, or it failed).
	Consumed  map[string]int64 `json:"consumed,omitempty"`
	InboxRows *int64           `json:"inbox_rows,omitempty"`
	// Err says why the sample's consumer lag is not a complete
	// measurement (the poll failed, the monitor reported errors other
	// than the outbox's or partitions of unknown age, its snapshot was
	// stale): such a sample is unknown for every part, and any figures it
	// carries are lower bounds. "" when the consumer lag was measured.
	// OutboxErr is the outbox query's error alone: with Err "" such a
	// sample measured the consumer lag and not the outbox (LagKnown true,
	// Outbox not ok).
	//
	// Results written before OutboxErr was recorded have the outbox's
	// error in Err, joined to the others by "; ": read with these
	// methods, such a sample is unknown for every part, as the recovery
	// figures stored with it were computed; nothing splits the text.
	Err       string `json:"error,omitempty"`
	OutboxErr string `json:"outbox_error,omitempty"`
}

// LagKnown tells whether the sample measured every consumer group's lag
// it names (MaxAge, Records): what the consumer lag's rules and its chart
// read. The outbox may still be unknown in it (Outbox).
func (s LagSample) LagKnown() bool {
	return s.Err == ""
}

// Outbox is the sample's outbox backlog and oldest pending row's age
// (seconds); ok false when they were not measured: the poll or its
// consumer lag part failed (Err), the outbox query failed (OutboxErr), or
// the figures are absent or, in a run stored before they were pointers,
// an age of -1.
func (s LagSample) Outbox() (backlog int64, age float64, ok bool) {
	if s.Err != "" || s.OutboxErr != "" || s.OutboxBacklog == nil || s.OutboxOldestAge == nil || *s.OutboxOldestAge < 0 {
		return 0, 0, false
	}
	return *s.OutboxBacklog, *s.OutboxOldestAge, true
}

// ProcessRun is one incarnation of a server process: from a start to a
// stop, a kill or its own exit. A process that a stop or kill fault took
// down has two or more.
type ProcessRun struct {
	Name string `json:"name"`
	// Exec: a separate OS process (PID is its pid); false: inside the runner.
	Exec      bool      `json:"exec"`
	PID       int       `json:"pid,omitempty"`
	Addr      string    `json:"addr"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// End is how it ended: stopped (graceful), killed (SIGKILL) or exited
	// (an exec process that ended on its own).
	End string `json:"end"`
	// State and Signal are the OS's account of an exec process's end
	// ("signal: killed" and "killed", or "exit status 0" and "").
	State  string `json:"state,omitempty"`
	Signal string `json:"signal,omitempty"`
	// TruncatedPulls and ConsumerRecords (deliveries its consumer tiers
	// handled, imlab_consumer_records_total{result="ok"}) were read from
	// its metrics when it ended (a killed process: just before the kill).
	TruncatedPulls  uint64 `json:"truncated_pulls"`
	ConsumerRecords uint64 `json:"consumer_records"`
	// Repaired is the inbox rows its reconciler repaired, read when it
	// ended (GET /v1/lab/repairs).
	Repaired uint64 `json:"repaired"`
	// Log is the file that received the process's log (an exec process's
	// stderr).
	Log string `json:"log,omitempty"`
	// CPUSeconds is the process's user + system CPU time over its life,
	// the OS's account of the exited process (exec processes only; nil:
	// not measured).
	CPUSeconds *float64 `json:"cpu_seconds,omitempty"`
}

// Why a run's rate is scaled (RateScale.For).
const (
	RateScaleEmbedded = "the embedded topology"
	RateScaleByConfig = "the runner's --rate-scale"
)

// RateScale says that the run did not send at the file's rate: every rate
// of the file's shape was multiplied by Factor (its times unchanged).
// Faults, the population and the expectations are the file's.
type RateScale struct {
	Factor float64 `json:"factor"`
	// For says why: RateScaleEmbedded or RateScaleByConfig.
	For      string `json:"for"`
	FileRate string `json:"file_rate"`
	RunRate  string `json:"run_rate"`
}

// Label is the line every output prints beside the run's figures.
func (s *RateScale) Label() string {
	return fmt.Sprintf("rates scaled ×%g for %s (file %s, run %s)", s.Factor, s.For, s.FileRate, s.RunRate)
}

// FindingSummary is one finding of the checker.
type FindingSummary struct {
	Name  string `json:"name"`
	Count uint64 `json:"count"`
	// NotMade says why the checker could not judge it (its count of 0
	// then says nothing).
	NotMade  string   `json:"not_made,omitempty"`
	Pairs    uint64   `json:"pairs,omitempty"`
	MsgIDs   []uint64 `json:"msg_ids,omitempty"`
	Examples []string `json:"examples,omitempty"`
	// Messages is how many distinct msg_ids the finding concerns (MsgIDs
	// lists at most MaxListedIDs of them); it differs from Count for
	// duplicated, whose Count is the extra copies (0 in results written
	// before it was recorded).
	Messages uint64 `json:"messages,omitempty"`
}

// CountText is the finding's count with what it counts where that is not
// messages: "4275 extra copies of 3869 msg_ids" for duplicated (a copy
// per delivery beyond a device's first), the bare count otherwise.
func (f FindingSummary) CountText() string {
	if f.Name != checker.Duplicated || f.Count == 0 {
		return fmt.Sprint(f.Count)
	}
	if f.Messages == 0 {
		return fmt.Sprintf("%d extra copies (deliveries beyond a device's first; how many msg_ids was not recorded in this result)", f.Count)
	}
	return fmt.Sprintf("%d extra copies of %d msg_ids", f.Count, f.Messages)
}

// Result is what a scenario run produced; written as result.json.
type Result struct {
	// Format is ResultFormat.
	Format      string         `json:"format"`
	Scenario    string         `json:"scenario"`
	Description string         `json:"description,omitempty"`
	File        string         `json:"file,omitempty"`
	Spec        *scenario.File `json:"spec,omitempty"`
	StartedAt   time.Time      `json:"started_at"`
	// TimeBase is the instant the load's and the fault schedule's offsets
	// count from (every "at" and every chart's t).
	TimeBase time.Time `json:"time_base"`
	// Seconds is the wall time of the whole run.
	Seconds  float64   `json:"seconds"`
	Settings []Setting `json:"settings"`
	// Backends says what the backends were (compose's summary).
	Backends string `json:"backends"`
	// Fallbacks are the backends (by part: "mysql", "redis") that ran
	// embedded because their local server was not found or did not start,
	// each with the cause (Backends says it too).
	Fallbacks map[string]string `json:"fallbacks,omitempty"`
	// RateScale is set when the run's rate was not the file's.
	RateScale *RateScale `json:"rate_scale,omitempty"`
	// LoadAverage is the machine's load when the run started and ended
	// (nil where the system does not publish it).
	LoadAverage *LoadAverage `json:"load_average,omitempty"`
	// LabCPU is how much of the machine's CPU the runner's process used
	// while the load sent: the generator and every part of the run inside
	// the runner (in-process server processes, embedded backends, Kafka,
	// fault proxies), which its in_process names and its text says (nil:
	// not measured, or a load split in segments).
	LabCPU *summary.LabCPU `json:"lab_cpu,omitempty"`
	// CPU is the run's CPU by process, second by second, over the load and
	// the recovery after it (nil: not recorded, e.g. a capacity search,
	// whose steps have their own figures).
	CPU *CPULine `json:"cpu,omitempty"`
	// LoadOffset is how long after the run's time base the load started
	// (loadgen's own setup); fault events and lag samples use the run's
	// base, the send timeline is shifted by it.
	LoadOffset float64          `json:"load_offset_s"`
	Verdict    *checker.Verdict `json:"verdict,omitempty"`
	Findings   []FindingSummary `json:"findings"`
	// Repairs are what forward reconciliation wrote during the run (rows
	// the pipeline had lost): a finding of the pipeline beside the verdict.
	Repairs RepairSummary `json:"repairs"`
	// DeadLetters is the dead-letter topic at the end of the run and what
	// became of each letter (nil: the run used no Kafka).
	DeadLetters *DeadLetterSummary `json:"dead_letters,omitempty"`
	Checks      []Check            `json:"checks"`
	// Baseline is the comparison with the baseline result, when gated.
	Baseline *compare.Report `json:"baseline,omitempty"`
	Events   []FaultEvent    `json:"fault_events"`
	Sends    []SendSecond    `json:"send_timeline"`
	Lag      []LagSample     `json:"lag_timeline"`
	// Recovery are the recovery figures computed from Lag (nil without
	// Kafka).
	Recovery *recovery.Figures `json:"recovery,omitempty"`
	// Capacity is what a capacity search found (kind capacity only; the
	// whole search is in CapacityDir).
	Capacity *CapacitySummary `json:"capacity,omitempty"`
	// Burst says whether the generator offered the burst (nil: the shape
	// is not a burst, or the load did not run).
	Burst *BurstFigures `json:"burst,omitempty"`
	// Processes are the server processes' incarnations, per process in
	// file order.
	Processes []ProcessRun `json:"processes"`
	// Summary is loadgen's run summary (nil when the load did not run).
	RunDir string `json:"run_dir,omitempty"`
	// Errors are why the run could not be carried out (exit status 2),
	// and non-fatal problems seen on the way.
	Errors []string `json:"errors,omitempty"`
	// Incomplete: the run could not be carried out.
	// AckSeconds is the window of the load's achieved (ACKed) rate: the
	// shape's duration, or to the last ACK when that came later (0 in
	// results written before it: the report then counts whole seconds).
	AckSeconds float64 `json:"ack_seconds,omitempty"`
	// RetriedSends is how many sends needed more than one try (loadgen's
	// count; nil in results written before it was recorded, where the
	// page's load line says retries are unknown).
	RetriedSends *uint64 `json:"retried_sends,omitempty"`
	// LateSends is how many sends started more than the pacer's LateAfter
	// after their intended time (loadgen's count; nil in results written
	// before it was recorded, where the load line says lateness is
	// unknown). LateAfterMs is that bound.
	LateSends   *uint64 `json:"late_sends,omitempty"`
	LateAfterMs float64 `json:"late_after_ms,omitempty"`
	// StartDelayP99Ms is the p99 of the sends' start - intended time (nil:
	// not measured).
	StartDelayP99Ms *float64 `json:"start_delay_p99_ms,omitempty"`
	// SendFailures says whether the failed, unknown and retried sends were
	// intended inside the fault windows or outside (nil in results written
	// before it was recorded, or when the load did not run).
	SendFailures *SendFailures `json:"send_failures,omitempty"`
	// Skipped is why the file was not run on these backends
	// (backends.skip_embedded): nothing was sent or checked, and the result
	// passes. "" for a run.
	Skipped    string `json:"skipped,omitempty"`
	Incomplete bool   `json:"incomplete"`
	Passed     bool   `json:"passed"`
	// Path is the result.json this result was read from ("": not read
	// from a file).
	Path string `json:"-"`
}

// WriteJSON writes r as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("scenarios: result json: %w", err)
	}
	return nil
}

// ReadResult reads a result.json (ReadRun: a file of another format, or
// of none, is refused).
func ReadResult(path string) (*Result, error) { return ReadRun(path) }

// JUnit XML (the schema CI tools read: testsuites > testsuite > testcase
// with failure or error children).
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes one testsuite per result, one testcase per check; a
// run that could not be carried out gets a testcase "run" with an error.
func WriteJUnit(w io.Writer, results ...*Result) error {
	top := junitSuites{Name: "imlab scenarios"}
	var total float64
	for _, r := range results {
		s := junitSuite{Name: r.Scenario, Time: fmt.Sprintf("%.3f", r.Seconds), Timestamp: r.StartedAt.UTC().Format("2006-01-02T15:04:05")}
		for _, st := range r.Settings {
			s.Properties = append(s.Properties, junitProperty{Name: st.Name, Value: st.Value})
		}
		class := "scenarios." + r.Scenario
		if r.Skipped != "" {
			s.Cases = append(s.Cases, junitCase{Name: "run", Classname: class, Time: "0", Skipped: &junitSkipped{Message: r.Skipped}})
			s.Skipped++
		}
		if r.Incomplete {
			s.Cases = append(s.Cases, junitCase{Name: "run", Classname: class, Time: "0",
				Error: &junitProblem{Message: "the run could not be carried out", Type: "error", Text: strings.Join(r.Errors, "\n")}})
			s.Errors++
		}
		for _, c := range r.Checks {
			jc := junitCase{Name: c.Name, Classname: class, Time: "0"}
			if !c.OK {
				jc.Failure = &junitProblem{Message: fmt.Sprintf("%s: want %s, got %s", c.Name, c.Want, c.Got), Type: "threshold",
					Text: findingText(r, c.Name)}
				s.Failures++
			}
			s.Cases = append(s.Cases, jc)
		}
		s.Tests = len(s.Cases)
		if len(r.Errors) > 0 {
			s.SystemOut = strings.Join(r.Errors, "\n")
		}
		top.Tests += s.Tests
		top.Failures += s.Failures
		top.Errors += s.Errors
		total += r.Seconds
		top.Suites = append(top.Suites, s)
	}
	top.Time = fmt.Sprintf("%.3f", total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("scenarios: junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(top); err != nil {
		return fmt.Errorf("scenarios: junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("scenarios: junit: %w", err)
	}
	return nil
}

// findingText explains a failed finding check with the checker's examples.
func findingText(r *Result, check string) string {
	name := strings.TrimPrefix(strings.TrimPrefix(check, "max_"), "min_")
	for _, f := range r.Findings {
		if f.Name == name && len(f.Examples) > 0 {
			return strings.Join(f.Examples, "\n")
		}
	}
	return ""
}

// writeFile creates path and writes through fn.
func WriteFile(path string, fn func(io.Writer) error) (err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("scenarios: %w", err)
	}
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("scenarios: %w", err)
	}
	defer func() {
		if cerr := fh.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("scenarios: %w", cerr)
		}
	}()
	return fn(fh)
}

// WarningPrefix starts an entry of Result.Errors that is a warning about
// the run's set-up (e.g. an embedded backend's speed), not an error of the
// run.
const WarningPrefix = "warning: "

// FallbackLines say, one line per part in name order, which backends ran
// embedded because their local server was not found or did not start, and
// why (Result.Fallbacks).
func FallbackLines(fallbacks map[string]string) []string {
	parts := slices.Sorted(maps.Keys(fallbacks))
	lines := make([]string, 0, len(parts))
	for _, p := range parts {
		lines = append(lines, fmt.Sprintf("fallback: %s runs embedded in place of a local server: %s", p, fallbacks[p]))
	}
	return lines
}

// ErrorLine is an entry of Result.Errors as shown: a warning as it is,
// anything else after "error: ".
func ErrorLine(e string) string {
	if strings.HasPrefix(e, WarningPrefix) {
		return e
	}
	return "error: " + e
}
