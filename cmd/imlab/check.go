package main

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"imlab/checker/judge"
	"imlab/loadgen/summary"
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

A scenario run's directory (one per scenario under imlab scenario run --out) holds no ledger
of its own: given one, check judges its load (DIR/load, or the segments in DIR/load/seg-*), says so first, and
writes the verdict there (the run's own DIR/verdict.json is left as it is).

Beside the safety verdict it reports the load, from the summaries: "achieved" is ACKed sends
per second only, printed with the fractions of sends that failed or whose outcome stayed
unknown, and of sends that needed a second try; when either exceeds --max-unknown-failed, or
more than 5% of sends started late (waiting for the pacer or a free sender), the run is OVERLOADED (its latencies describe a server that was not keeping up). Exit status: 0 VALID within load, 1 INVALID (whatever the
load), 3 VALID but OVERLOADED.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCheck(cmd, judge.Options{Dirs: args, SegmentsIn: under, JSON: asJSON, Partial: partial, Wait: wait, Out: out, Limit: limit})
		},
	}
	cmd.Flags().StringVar(&under, "segments-in", "", "judge every run directory below DIR (DIR/*/summary.json) as the segments of one run, waiting (--wait) until the run's segment count is there")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the verdict as JSON instead of a table")
	cmd.Flags().BoolVar(&partial, "partial", false, "judge the segments given even when some of the run's segments are missing")
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for every RUN_DIR's summary.json (segments still running), then judge")
	cmd.Flags().Float64Var(&limit, "max-unknown-failed", summary.OverloadFraction, "fraction of sends failed or of unknown outcome (and of sends retried) above which the run is OVERLOADED")
	cmd.Flags().StringVar(&out, "out", "", "where verdict.json goes (default: RUN_DIR/verdict.json; with several directories, their common parent)")
	return cmd
}

// runCheck judges the run directories o names, prints the report and
// carries the result's exit status: 1 INVALID, 3 VALID but OVERLOADED.
func runCheck(cmd *cobra.Command, o judge.Options) error {
	rep, err := judge.Dirs(cmd.Context(), o)
	if err != nil {
		return err
	}
	if err := rep.Write(cmd.OutOrStdout(), o.JSON); err != nil {
		return err
	}
	switch rep.Result {
	case judge.Invalid:
		return &exitError{code: exitFailed, err: errInvalidRun}
	case judge.Overloaded:
		return &exitError{code: checkExitOverloaded, err: errors.New("run is VALID but OVERLOADED")}
	}
	return nil
}
