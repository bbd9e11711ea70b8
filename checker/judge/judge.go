// Package judge judges load run directories: one run, or the segments of
// one split run merged by their plan (summary.PlanMerge) and judged as if
// one generator had run, through the checker, with the load's outcome
// from the summaries beside the verdict (OVERLOADED above a bound of
// failed, unknown or retried sends, or of sends started late). It writes verdict.json and the report
// imlab check prints, and owns the plan → checker sources step the
// scenario runner's segments share.
//
// It must not run load, talk to a server, or decide a process's exit
// status (a command maps Report.Result to one).
package judge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"imlab/checker"
	"imlab/ledger"
	"imlab/loadgen/summary"
)

// ErrInvalid marks bad options: nothing was judged.
var ErrInvalid = errors.New("check: invalid")

// MaxWait bounds Options.Wait.
const MaxWait = 24 * time.Hour

// Results: the safety verdict, and the load beside it.
const (
	Valid      = "VALID"
	Invalid    = "INVALID"
	Overloaded = "VALID but OVERLOADED"
)

// Options say what to judge and how.
type Options struct {
	// Dirs are the run directories (one run, or the segments of one).
	Dirs []string
	// SegmentsIn, instead of Dirs: every run directory below it
	// (DIR/*/summary.json) as the segments of one run, waiting (Wait)
	// until the run's segment count is there; the verdict then goes to
	// SegmentsIn/verdict.json unless Out says.
	SegmentsIn string
	// Partial judges the segments given even when some are missing.
	Partial bool
	// Wait: wait up to this long for every directory's summary.json
	// (segments still running), then judge.
	Wait time.Duration
	// Out is where verdict.json goes (default: RUN_DIR/verdict.json; with
	// several directories, their common parent).
	Out string
	// Limit: the run is OVERLOADED above this fraction of failed + unknown
	// (or retried) sends (0: summary.OverloadFraction).
	Limit float64
	// JSON: the report is written as JSON (Report.Write), not as text.
	JSON bool
	// Note is set by Dirs when it judged other directories than those
	// given (a scenario run's load): the report says so.
	Note string
}

// validate checks the options, the default limit applied.
func (o *Options) validate() error {
	if o.Limit == 0 {
		o.Limit = summary.OverloadFraction
	}
	switch {
	case (len(o.Dirs) == 0) == (o.SegmentsIn == ""):
		return fmt.Errorf("%w: give RUN_DIR... or --segments-in DIR, one of the two", ErrInvalid)
	case o.Wait < 0 || o.Wait > MaxWait:
		return fmt.Errorf("%w: --wait %s: want 0..%s", ErrInvalid, o.Wait, MaxWait)
	case o.Limit < 0 || o.Limit >= 1:
		return fmt.Errorf("%w: --max-unknown-failed %g: want a fraction in (0, 1)", ErrInvalid, o.Limit)
	}
	return nil
}

// Report is a judgement: the checker's verdict (its fields at the top
// level of the JSON, as verdict.json holds them) with the load beside it
// and the result.
type Report struct {
	*checker.Verdict
	// Result is Valid, Invalid or Overloaded.
	Result string `json:"result"`
	// Load is the load's outcome from the summaries (null: no summary).
	Load     *summary.Outcome `json:"load"`
	QueueLag []string         `json:"queue_lag_at_end,omitempty"`
	// LabCPU says, per load directory, how much of the machine's CPU the
	// generator used while it sent.
	LabCPU []string `json:"lab_cpu,omitempty"`
	// Note says what was judged when it is not what was given (a scenario
	// run's directory: its load's ledger).
	Note string `json:"note,omitempty"`
	// Segments: the run directories judged together (null: one run).
	Segments    *Segments `json:"segments,omitempty"`
	VerdictFile string    `json:"verdict_file"`

	sums  []*summary.Summary // per directory judged (nil: none there)
	limit float64
}

// Segments are the run directories of a split run judged together.
type Segments struct {
	RunID       string    `json:"run_id"`
	Judged      int       `json:"judged"`
	Of          int       `json:"of"`
	Fingerprint string    `json:"fingerprint"`
	Dirs        []Segment `json:"dirs"`
}

// Segment is one of them.
type Segment struct {
	Segment string `json:"segment"`
	Dir     string `json:"dir"`
	Shift   string `json:"shift"`
}

// Dirs judges the run directories o names and writes verdict.json.
func Dirs(ctx context.Context, o Options) (*Report, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	dirs, err := o.dirs(ctx)
	if err != nil {
		return nil, err
	}
	srcs, plan, err := Sources(dirs, o.Partial)
	if err != nil {
		return nil, err
	}
	// Every summary first: one of a format this imlab does not read is an
	// error naming the file, before anything is judged or written.
	sums, err := readSummaries(dirs)
	if err != nil {
		return nil, err
	}
	v, err := checker.CheckSources(srcs)
	if err != nil {
		return nil, err
	}
	rep := &Report{Verdict: v, Note: o.Note, sums: sums, limit: o.Limit}
	rep.addPlan(plan)
	rep.addLoad(dirs)
	if rep.VerdictFile, err = verdictPath(dirs, o.Out); err != nil {
		return nil, err
	}
	if err := writeVerdict(rep.VerdictFile, v); err != nil {
		return nil, err
	}
	return rep, nil
}

// dirs are the directories to judge: those below SegmentsIn, or Dirs
// whose summaries are there after Wait.
func (o *Options) dirs(ctx context.Context) ([]string, error) {
	dirs, wait := o.Dirs, o.Wait
	if o.SegmentsIn != "" {
		var err error
		if dirs, err = summary.SegmentDirs(ctx, o.SegmentsIn, o.Wait, time.Second); err != nil {
			return nil, err
		}
		wait = 0
		if o.Out == "" {
			o.Out = filepath.Join(o.SegmentsIn, "verdict.json")
		}
	}
	if wait > 0 {
		missing, err := summary.WaitForSummaries(ctx, dirs, wait, time.Second)
		if err != nil {
			return nil, err
		}
		if len(missing) > 0 && !o.Partial {
			return nil, fmt.Errorf("check: after %s these run directories still have no summary (their generators have not finished): %v", wait, missing)
		}
		dirs = slices.DeleteFunc(slices.Clone(dirs), func(d string) bool { return slices.Contains(missing, d) })
		if len(dirs) == 0 {
			return nil, fmt.Errorf("check: no run directory has a summary after %s", wait)
		}
	}
	if len(dirs) == 1 && o.SegmentsIn == "" {
		load, segmented, ok := scenarioLoad(dirs[0])
		switch {
		case ok && segmented:
			o.Note = fmt.Sprintf("%s is a scenario run: judging the segments of its load in %s", dirs[0], load)
			o.SegmentsIn = load
			return o.dirs(ctx)
		case ok:
			o.Note = fmt.Sprintf("%s is a scenario run: judging its ledger in %s", dirs[0], load)
			dirs = []string{load}
		}
	}
	for _, d := range dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("check: %s: not a run directory (want a directory holding ledger-*.bin and summary.json)", d)
		}
	}
	return dirs, nil
}

// ScenarioLoadDir is where a scenario run directory keeps its load's run
// directory (the runner's result.LoadDir), or, for a split load, the
// segments' directories (seg-1, seg-2, ...).
const ScenarioLoadDir = "load"

// scenarioLoad tells whether dir is a scenario run's directory rather than
// a load's (no ledger of its own, a load directory below it) and where
// that load's ledger is: load itself, or its segments (segmented).
func scenarioLoad(dir string) (load string, segmented, ok bool) {
	if hasLedger(dir) {
		return "", false, false
	}
	load = filepath.Join(dir, ScenarioLoadDir)
	if hasLedger(load) {
		return load, false, true
	}
	segs, _ := filepath.Glob(filepath.Join(load, "*", "summary.json"))
	return load, true, len(segs) > 0
}

// hasLedger tells whether dir holds ledger shards.
func hasLedger(dir string) bool {
	fs, _ := ledger.Files(dir)
	return len(fs) > 0
}

// Sources are the checker's sources of run directories: one run as it
// is; several, or one segment of a split run, through their merge plan
// (partial: the segments there are), which is returned with them (nil for
// one run).
func Sources(dirs []string, partial bool) ([]checker.Source, *summary.MergePlan, error) {
	if len(dirs) == 1 && !isSegment(dirs[0]) {
		return []checker.Source{{Dir: dirs[0]}}, nil, nil
	}
	plan, err := summary.PlanMerge(dirs, partial)
	if err != nil {
		return nil, nil, err
	}
	srcs := make([]checker.Source, 0, len(plan.Sources))
	for _, s := range plan.Sources {
		srcs = append(srcs, checker.Source{Dir: s.Dir, Shift: s.Shift})
	}
	return srcs, plan, nil
}

// isSegment tells whether dir holds one segment of a split run.
func isSegment(dir string) bool {
	s, err := summary.Read(dir)
	return err == nil && s.Split.Segment.Count > 1
}

// readSummaries reads each directory's summary (nil where there is none).
func readSummaries(dirs []string) ([]*summary.Summary, error) {
	sums := make([]*summary.Summary, len(dirs))
	for i, d := range dirs {
		s, err := summary.Read(d)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			sums[i] = s
		}
	}
	return sums, nil
}

// addPlan records the segments judged together and the plan's notes.
func (r *Report) addPlan(plan *summary.MergePlan) {
	if plan == nil {
		return
	}
	r.Segments = &Segments{RunID: plan.RunID, Judged: len(plan.Sources), Of: plan.Count, Fingerprint: plan.Fingerprint}
	for _, s := range plan.Sources {
		r.Segments.Dirs = append(r.Segments.Dirs, Segment{Segment: s.Segment.String(), Dir: s.Dir, Shift: s.Shift.String()})
	}
	r.Verdict.Warnings = append(r.Verdict.Warnings, plan.Notes...)
}

// addLoad sums the summaries' outcomes (a directory without one is a
// warning) and sets the result.
func (r *Report) addLoad(dirs []string) {
	var load summary.Summary // the segments' counts summed, the longest sending phase
	loads := 0
	for i, d := range dirs {
		s := r.sums[i]
		if s == nil {
			r.Verdict.Warnings = append(r.Verdict.Warnings, d+": no "+summary.File+": the load's outcome is unknown")
			continue
		}
		loads++
		load.AddOutcomes(s)
		if !s.Drain.Complete {
			r.Verdict.Warnings = append(r.Verdict.Warnings, d+": the run's final drain did not complete: lost may include messages still in flight")
		}
		if q := s.QueueLag; q != nil {
			r.QueueLag = append(r.QueueLag, d+": queue lag at the end: "+q.String())
		}
		r.LabCPU = append(r.LabCPU, d+": "+s.LabCPU.String())
	}
	if loads > 0 {
		lo := load.Outcomes(r.limit)
		r.Load = &lo
	}
	switch {
	case !r.Verdict.Valid:
		r.Result = Invalid
	case r.Load != nil && r.Load.Overloaded:
		r.Result = Overloaded
	default:
		r.Result = Valid
	}
}

// writeVerdict writes verdict.json.
func writeVerdict(path string, v *checker.Verdict) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	werr := v.WriteJSON(f)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	return nil
}

// verdictPath: out, else RUN_DIR/verdict.json, else (several directories)
// verdict.json in their common parent.
func verdictPath(dirs []string, out string) (string, error) {
	if out != "" {
		return out, nil
	}
	if len(dirs) == 1 {
		return filepath.Join(dirs[0], "verdict.json"), nil
	}
	parent := filepath.Dir(filepath.Clean(dirs[0]))
	for _, d := range dirs[1:] {
		if filepath.Dir(filepath.Clean(d)) != parent {
			return "", fmt.Errorf("check: the run directories have no common parent for verdict.json: give --out")
		}
	}
	return filepath.Join(parent, "verdict.json"), nil
}
