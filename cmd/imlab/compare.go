package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"imlab/compare"
)

// Exit statuses of imlab compare.
const (
	compareExitRegressed = exitFailed   // a metric regressed, failed or went missing
	compareExitUnusable  = exitUnusable // a missing file, an unknown format, mismatched subjects
)

// newCompareCmd is `imlab compare`: the regression gate.
func newCompareCmd() *cobra.Command {
	var (
		baseList, newList       []string
		tolerance               string
		markdown, junit, jsonTo string
		alpha                   float64
		allowMismatch           bool
	)
	cmd := &cobra.Command{
		Use:   "compare BASE NEW | BASE... -- NEW... | --base A,B --new C,D",
		Short: "Compare results (scenario or capacity result.json, load summary.json) metric by metric; exit 0 no regression, 1 regression, 2 unusable input",
		Long: `Reads the base and new results (files, or directories holding result.json or summary.json),
extracts the same metrics from each (the list below: a scenario result gives the checker's findings,
verdict, passed, the load's rate and latency, lag, and with Kafka the recovery outcomes; a load
summary within_load (not OVERLOADED); a capacity search sustainable_rate, knee_rate and
cpu_us_per_msg.PROC) and decides per metric:

  - several runs on each side: medians, and a Mann-Whitney U test (alpha 0.05); a change the test
    cannot tell from noise is "~"; a significant change beyond the tolerance is REGRESSED;
  - one run on a side, or too few for the test to ever reach alpha (under 4 per side): tolerance
    alone, labelled "tolerance only";
  - a checker finding where the base had none is REGRESSED, a verdict or passed that did not hold
    is FAILED, a metric the base measured and the new runs did not is MISSING: all fail the gate.

Only outcomes are metrics: a recovery's settings (from_s, bound_s, hold_s, deadline_s) and sample
counts are not compared.

With BASE... -- NEW..., give the flags before --: every word after it is a NEW result.

Tolerances: --tolerance 'ack_p99:+10%,rate:-5%,recovery:+20%,lag:+500ms,errors:+0.1%' (the sign is
the worsening direction; on errors/unknown a percentage is percentage points).

` + compareMetricsHelp(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCompare(cmd, args, compareFlags{baseList, newList, tolerance, markdown, junit, jsonTo, alpha, allowMismatch})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&baseList, "base", nil, "base results (comma-separated or repeated)")
	f.StringSliceVar(&newList, "new", nil, "new results (comma-separated or repeated)")
	f.StringVar(&tolerance, "tolerance", "", "per-metric tolerances, e.g. 'ack_p99:+10%,rate:-5%,recovery:+20%'")
	f.Float64Var(&alpha, "alpha", 0.05, "significance level of the U test")
	f.BoolVar(&allowMismatch, "allow-mismatch", false, "compare results of different scenarios (or load shapes, SLOs) of the same kind")
	f.StringVar(&markdown, "markdown", "", "also write the report as Markdown (a PR comment) to this file")
	f.StringVar(&junit, "junit", "", "also write the report as JUnit XML to this file")
	f.StringVar(&jsonTo, "json", "", "also write the report as JSON to this file")
	return cmd
}

// compareMetricsHelp lists every metric with its direction and default
// tolerance, from compare's own definitions.
func compareMetricsHelp() string {
	var b strings.Builder
	b.WriteString("Metrics (better: the direction that improves; default tolerance):\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(d compare.Def) {
		tol := d.Tol.In(d.Unit)
		switch d.Rule {
		case compare.MustHold:
			tol = "must hold (no tolerance)"
		case compare.Safety:
			tol = "none where the base had none"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", d.Name, d.Better, tol, d.Desc)
	}
	for _, n := range compare.Names() {
		d, _ := compare.Lookup(n)
		row(d)
	}
	d, _ := compare.Lookup("cpu_us_per_msg.PROC")
	row(d)
	_ = tw.Flush()
	fmt.Fprintf(&b, "  and the checker's findings (%s): lower, %s\n", strings.Join(compare.SafetyFindings, ", "), "none where the base had none")
	return b.String()
}

type compareFlags struct {
	base, new                []string
	tolerance                string
	markdown, junit, jsonOut string
	alpha                    float64
	allowMismatch            bool
}

// compareSides splits the arguments: --base/--new, BASE... -- NEW..., or
// exactly BASE NEW.
func compareSides(cmd *cobra.Command, args []string, fl compareFlags) (base, nw []string, err error) {
	dash := cmd.ArgsLenAtDash()
	switch {
	case len(fl.base) > 0 || len(fl.new) > 0:
		if len(args) > 0 || len(fl.base) == 0 || len(fl.new) == 0 {
			return nil, nil, errors.New("with --base and --new give both and no other argument")
		}
		return fl.base, fl.new, nil
	case dash >= 0:
		if dash == 0 || dash == len(args) {
			return nil, nil, errors.New("BASE... -- NEW...: want at least one result on each side of --")
		}
		return args[:dash], args[dash:], nil
	case len(args) == 2:
		return args[:1], args[1:], nil
	default:
		return nil, nil, fmt.Errorf("want BASE NEW, BASE... -- NEW... or --base/--new (got %d arguments)", len(args))
	}
}

func runCompare(cmd *cobra.Command, args []string, fl compareFlags) error {
	unusable := func(err error) error { return &exitError{code: compareExitUnusable, err: err} }
	bp, np, err := compareSides(cmd, args, fl)
	if err != nil {
		return unusable(err)
	}
	ts, err := compare.ParseTolerances(fl.tolerance)
	if err != nil {
		return unusable(err)
	}
	read := func(paths []string) ([]*compare.Run, error) {
		var out []*compare.Run
		for _, p := range paths {
			r, err := compare.Read(p)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}
	base, err := read(bp)
	if err != nil {
		return unusable(err)
	}
	nw, err := read(np)
	if err != nil {
		return unusable(err)
	}
	rep, err := compare.Compare(base, nw, compare.Options{Tolerances: ts, Alpha: fl.alpha, AllowMismatch: fl.allowMismatch})
	if err != nil {
		return unusable(err)
	}
	if err := rep.WriteText(cmd.OutOrStdout()); err != nil {
		return err
	}
	outs := []struct {
		path  string
		write func(io.Writer) error
	}{{fl.markdown, rep.WriteMarkdown}, {fl.junit, rep.WriteJUnit}, {fl.jsonOut, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}}}
	for _, o := range outs {
		if o.path == "" {
			continue
		}
		if err := writeOut(o.path, o.write); err != nil {
			return unusable(err)
		}
	}
	if rep.Regressed() {
		return &exitError{code: compareExitRegressed, err: errors.New(rep.Outcome())}
	}
	return nil
}

// writeOut creates path and writes through fn.
func writeOut(path string, fn func(io.Writer) error) (err error) {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := fh.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	return fn(fh)
}
