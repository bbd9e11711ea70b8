package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"imlab/checker"
	"imlab/loadgen"
)

// errInvalidRun is imlab check's failure: exit status 1.
var errInvalidRun = errors.New("run is INVALID")

// newCheckCmd is `imlab check RUN_DIR...`: the verdict of a load run, or of
// the segments of one split run judged together.
func newCheckCmd() *cobra.Command {
	var (
		asJSON, partial bool
		wait            time.Duration
		out, under      string
		limit           float64
	)
	cmd := &cobra.Command{
		Use:   "check RUN_DIR...",
		Short: "Judge a load run's ledger: lost, unexpected, reordered, skipped, lost-in-store, unstored-at-ack, ...",
		Long: `Reads RUN_DIR/ledger-*.bin, prints the verdict table, writes RUN_DIR/verdict.json and
exits non-zero when the run is invalid: valid iff every deciding finding is 0 (lost, unexpected,
reordered, skipped, lost-in-store, unstored-at-ack, double-stored, seq-conflict, ack-mismatch;
duplicated and recovered are counted, allowed). Each check whose evidence the run lacks (an older
ledger, a server without lab routes) is named NOT MADE; the findings it feeds are judged without it.

With several directories (the segments of one run, imlab load --segment i/n), their ledgers
are judged together as if one generator had run: every record on one time base (each
segment's start corrected by its clock offset to the target), latency histograms built from
every record, findings listed once; the verdict goes to --out (default: verdict.json in the
directories' common parent). Directories of different runs, two of one segment or a missing
segment are refused (--partial judges the segments there are, and says so).

Beside the safety verdict it reports the load, from the summaries: "achieved" is ACKed sends
per second only, printed with the fractions of sends that failed or whose outcome stayed
unknown, and of sends that needed a second try; when either exceeds --max-unknown-failed the
run is OVERLOADED (its latencies describe a server that was not keeping up). Exit status: 0 VALID within load, 1 INVALID (whatever the
load), 3 VALID but OVERLOADED.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 0) == (under == "") {
				return fmt.Errorf("check: give RUN_DIR... or --segments-in DIR, one of the two")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if wait < 0 || wait > maxCheckWait {
				return fmt.Errorf("--wait %s: want 0..%s", wait, maxCheckWait)
			}
			if under != "" {
				dirs, err := loadgen.SegmentDirs(cmd.Context(), under, wait, time.Second)
				if err != nil {
					return err
				}
				args, wait = dirs, 0
				if out == "" {
					out = filepath.Join(under, "verdict.json")
				}
			}
			return runCheckDirs(cmd, args, checkOpts{json: asJSON, partial: partial, wait: wait, out: out, limit: limit})
		},
	}
	cmd.Flags().StringVar(&under, "segments-in", "", "judge every run directory below DIR (DIR/*/summary.json) as the segments of one run, waiting (--wait) until the run's segment count is there")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the verdict as JSON instead of a table")
	cmd.Flags().BoolVar(&partial, "partial", false, "judge the segments given even when some of the run's segments are missing")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for every RUN_DIR's summary.json (segments still running), then judge")
	cmd.Flags().Float64Var(&limit, "max-unknown-failed", loadgen.OverloadFraction, "fraction of sends failed or of unknown outcome (and of sends retried) above which the run is OVERLOADED")
	cmd.Flags().StringVar(&out, "out", "", "where verdict.json goes (default: RUN_DIR/verdict.json; with several directories, their common parent)")
	return cmd
}

type checkOpts struct {
	json, partial bool
	wait          time.Duration
	out           string
	limit         float64 // OVERLOADED above this fraction of failed + unknown sends (0: loadgen.OverloadFraction)
}

// maxCheckWait bounds --wait.
const maxCheckWait = 24 * time.Hour

func runCheck(cmd *cobra.Command, dir string, asJSON bool) error {
	return runCheckDirs(cmd, []string{dir}, checkOpts{json: asJSON, limit: loadgen.OverloadFraction})
}

func runCheckDirs(cmd *cobra.Command, dirs []string, o checkOpts) error {
	out := cmd.OutOrStdout()
	if o.limit == 0 {
		o.limit = loadgen.OverloadFraction
	}
	if o.limit < 0 || o.limit >= 1 {
		return usageError(fmt.Errorf("check: --max-unknown-failed %g: want a fraction in (0, 1)", o.limit))
	}
	if o.wait > 0 {
		missing, err := loadgen.WaitForSummaries(cmd.Context(), dirs, o.wait, time.Second)
		if err != nil {
			return err
		}
		if len(missing) > 0 && !o.partial {
			return fmt.Errorf("check: after %s these run directories still have no summary (their generators have not finished): %v", o.wait, missing)
		}
		dirs = slices.DeleteFunc(slices.Clone(dirs), func(d string) bool { return slices.Contains(missing, d) })
		if len(dirs) == 0 {
			return fmt.Errorf("check: no run directory has a summary after %s", o.wait)
		}
	}
	for _, d := range dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return fmt.Errorf("check: %s: not a run directory (want a directory holding ledger-*.bin and summary.json)", d)
		}
	}
	srcs := []checker.Source{{Dir: dirs[0]}}
	var plan *loadgen.MergePlan
	if len(dirs) > 1 || isSegment(dirs[0]) {
		var err error
		if plan, err = loadgen.PlanMerge(dirs, o.partial); err != nil {
			return err
		}
		srcs = srcs[:0]
		for _, s := range plan.Sources {
			srcs = append(srcs, checker.Source{Dir: s.Dir, Shift: s.Shift})
		}
	}
	// Every summary first: one of a format this imlab does not read is an
	// error naming the file, before anything is judged or written.
	sums := make([]*loadgen.Summary, len(dirs))
	for i, d := range dirs {
		s, err := loadgen.ReadSummary(d)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return err
		default:
			sums[i] = s
		}
	}
	v, err := checker.CheckSources(srcs)
	if err != nil {
		return err
	}
	rep := checkReport{Verdict: v}
	if plan != nil {
		rep.Segments = &checkSegments{RunID: plan.RunID, Judged: len(plan.Sources), Of: plan.Count, Fingerprint: plan.Fingerprint}
		for _, s := range plan.Sources {
			rep.Segments.Dirs = append(rep.Segments.Dirs, checkSegment{Segment: s.Segment.String(), Dir: s.Dir, Shift: s.Shift.String()})
		}
		v.Warnings = append(v.Warnings, plan.Notes...)
	}
	var load loadgen.Summary // the segments' counts summed, the longest sending phase
	loads := 0
	for i, d := range dirs {
		s := sums[i]
		if s == nil {
			v.Warnings = append(v.Warnings, d+": no "+loadgen.SummaryFile+": the load's outcome is unknown")
			continue
		}
		loads++
		load.AddOutcomes(s)
		if !s.Drain.Complete {
			v.Warnings = append(v.Warnings, d+": the run's final drain did not complete: lost may include messages still in flight")
		}
		if q := s.QueueLag; q != nil {
			rep.QueueLag = append(rep.QueueLag, d+": queue lag at the end: "+q.String())
		}
		rep.LabCPU = append(rep.LabCPU, d+": "+s.LabCPU.String())
	}
	if loads > 0 {
		lo := load.Outcomes(o.limit)
		rep.Load = &lo
	}
	rep.Result = checkResult(v.Valid, rep.Load)
	path, err := verdictPath(dirs, o.out)
	if err != nil {
		return err
	}
	rep.VerdictFile = path
	if err := writeVerdict(path, v); err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("check: %w", err)
		}
	} else {
		printCheck(out, rep, sums, o.limit)
	}
	switch rep.Result {
	case resultInvalid:
		return &exitError{code: exitFailed, err: errInvalidRun}
	case resultOverloaded:
		return &exitError{code: checkExitOverloaded, err: errors.New("run is VALID but OVERLOADED")}
	}
	return nil
}

// Results of imlab check: the safety verdict, and the load beside it.
const (
	resultValid      = "VALID"
	resultInvalid    = "INVALID"
	resultOverloaded = "VALID but OVERLOADED"
)

func checkResult(valid bool, load *loadgen.Outcome) string {
	switch {
	case !valid:
		return resultInvalid
	case load != nil && load.Overloaded:
		return resultOverloaded
	}
	return resultValid
}

// checkReport is what imlab check --json prints: the checker's verdict
// (its fields at the top level, as verdict.json holds them) with the load
// beside it and the result the exit status says.
type checkReport struct {
	*checker.Verdict
	// Result is VALID, INVALID or "VALID but OVERLOADED" (exit status 0,
	// 1 or 3).
	Result string `json:"result"`
	// Load is the load's outcome from the summaries (null: no summary).
	Load     *loadgen.Outcome `json:"load"`
	QueueLag []string         `json:"queue_lag_at_end,omitempty"`
	// LabCPU says, per load directory, how much of the machine's CPU the
	// generator used while it sent.
	LabCPU []string `json:"lab_cpu,omitempty"`
	// Segments: the run directories judged together (null: one run).
	Segments    *checkSegments `json:"segments,omitempty"`
	VerdictFile string         `json:"verdict_file"`
}

type checkSegments struct {
	RunID       string         `json:"run_id"`
	Judged      int            `json:"judged"`
	Of          int            `json:"of"`
	Fingerprint string         `json:"fingerprint"`
	Dirs        []checkSegment `json:"dirs"`
}

type checkSegment struct {
	Segment string `json:"segment"`
	Dir     string `json:"dir"`
	Shift   string `json:"shift"`
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

// printCheck prints the human form: the segments, each run's load line,
// the queue lag, the verdict table and the result.
func printCheck(out io.Writer, rep checkReport, sums []*loadgen.Summary, limit float64) {
	if sg := rep.Segments; sg != nil {
		fmt.Fprintf(out, "run %s: %d of %d segments judged together (fingerprint %s)\n", sg.RunID, sg.Judged, sg.Of, sg.Fingerprint)
		for _, s := range sg.Dirs {
			fmt.Fprintf(out, "  segment %s: %s, shifted %s\n", s.Segment, s.Dir, s.Shift)
		}
	}
	if len(sums) == 1 && sums[0] != nil {
		printLoad(out, sums[0], rep.Verdict, limit)
	}
	for _, q := range rep.QueueLag {
		fmt.Fprintln(out, q)
	}
	for _, l := range rep.LabCPU {
		fmt.Fprintln(out, l)
	}
	rep.Verdict.WriteTable(out)
	if len(sums) > 1 {
		fmt.Fprintf(out, "verdict written to %s\n", rep.VerdictFile)
		if rep.Load != nil {
			fmt.Fprintf(out, "load: %s\n", rep.Load)
		}
	}
	switch {
	case rep.Result == resultOverloaded:
		fmt.Fprintf(out, "result: VALID but OVERLOADED: not a clean pass (%s)\n", rep.Load)
	case rep.Load == nil && rep.Valid:
		fmt.Fprintln(out, "result: VALID; the load's outcome is unknown (no summary)")
	}
}

// printLoad prints a run's load beside its verdict: the achieved (ACKed)
// rate with the failed and unknown fractions, the generator's ceiling, and
// a note when an older summary's end_to_end differs from the checker's
// definition.
func printLoad(w io.Writer, s *loadgen.Summary, v *checker.Verdict, limit float64) {
	fmt.Fprintf(w, "load: %s\n", s.Outcomes(limit))
	if s.Ceiling != nil {
		fmt.Fprintf(w, "generator ceiling (no-op endpoint): %.0f sends/s; sends started %.0f/s\n", s.Ceiling.PerSec, s.StartedPerSec)
	}
	se, ce := s.Latency["end_to_end"], v.Latency["end_to_end"]
	if se.Count != ce.Count {
		fmt.Fprintf(w, "note: the load summary's end_to_end has %d samples (p99 %s), this check %d (p99 %s): summaries written by an older imlab also counted copies of sends that failed or stayed unknown; the checker counts the first copy per device of ACKed sends only\n",
			se.Count, checker.Dur(se.P99), ce.Count, checker.Dur(ce.P99))
	}
}

// verdictPath: --out, else RUN_DIR/verdict.json, else (several directories)
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

// isSegment tells whether dir holds one segment of a split run.
func isSegment(dir string) bool {
	s, err := loadgen.ReadSummary(dir)
	return err == nil && s.Split.Segment.Count > 1
}
