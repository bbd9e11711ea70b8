package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"imlab/compose"
	"imlab/expect"
	"imlab/ref/server"
	"imlab/result"
	"imlab/runner"
	"imlab/runner/proc"
	"imlab/scenario"
	"imlab/selftest"
)

// Exit statuses of imlab scenario run.
const (
	scenarioExitFailed = exitFailed   // a check failed
	scenarioExitBroken = exitUnusable // a bad file, or a run that could not be carried out
)

// newScenarioCmd is `imlab scenario`: run or validate scenario files. A
// failure carries its exit status (1: a check failed, 2: a bad file or a
// run that could not be carried out).
func newScenarioCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenario",
		Short: "Scenario files: load phases, a fault schedule and pass/fail thresholds (run, validate)",
	}
	cmd.AddCommand(newScenarioRunCmd(), newScenarioValidateCmd(), newScenarioSelftestCmd(), newScenarioChildCmd(), newScenarioLoadChildCmd())
	return cmd
}

func newScenarioValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Parse and validate scenario files; nothing is started",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var bad []error
			for _, p := range args {
				f, err := scenario.ReadFile(p)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "INVALID %v\n", err)
					bad = append(bad, err)
					continue
				}
				if c := f.Capacity; f.Kind == scenario.KindCapacity && c != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "ok      %s (%s: capacity search %g..%g/s within %s)\n", p, f.Name, c.From, c.To, c.SLO)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "ok      %s (%s: %s for %s, %d faults)\n", p, f.Name, f.Load.Rate, f.Load.Duration.D(), len(f.Faults))
				}
			}
			if len(bad) > 0 {
				return &exitError{code: scenarioExitBroken, err: fmt.Errorf("%d of %d files invalid", len(bad), len(args))}
			}
			return nil
		},
	}
}

// scenarioOpts are the flags shared by `imlab scenario run` and `imlab demo`.
type scenarioOpts struct {
	out, mode, dsn, redisAddr, prefix string
	duration                          time.Duration
	rateScale                         float64
	keep                              bool
	// sideBySide (scenario run --side-by-side) runs each file's reference
	// side after it and writes the review page of the pair.
	sideBySide               bool
	baselineDir, baselineTol string
	pprof                    map[string]string
	runnerPprof              string
}

// flags registers the shared flags; defOut describes --out's default.
func (o *scenarioOpts) flags(cmd *cobra.Command, defOut string) {
	fl := cmd.Flags()
	fl.StringVar(&o.out, "out", "", "output directory (default "+defOut+"); one subdirectory per scenario")
	fl.StringVar(&o.mode, "backends", "", "backend mode, overrides the files: auto, external, local or embedded ($"+envBackends+")")
	fl.StringVar(&o.dsn, "mysql-dsn", "", "MySQL DSN; each run gets a database of its own next to it ($"+envMySQLDSN+")")
	fl.StringVar(&o.redisAddr, "redis-addr", "", "Redis host:port ($"+envRedisAddr+")")
	fl.StringVar(&o.prefix, "redis-prefix", "", "Redis key prefix of the runs (default a fresh random one per run)")
	fl.DurationVar(&o.duration, "duration", 0, "override every file's load duration (fault times scale with it)")
	fl.Float64Var(&o.rateScale, "rate-scale", 0, "multiply every file's rates by this factor in (0, 1] (default: the topology's, load.embedded_rate_scale when MySQL is embedded); every output says so")
	fl.BoolVar(&o.keep, "keep-data", false, "keep the run's database and Redis keys")
	fl.StringVar(&o.baselineDir, "baseline-dir", "", "gate each scenario on DIR/NAME/result.json (e.g. main's stored results; the file's baseline tolerance applies; a scenario with none stored is not gated)")
	fl.StringVar(&o.baselineTol, "baseline-tolerance", "", "tolerances of a baseline gate whose file names none, as imlab compare --tolerance (e.g. 'ack_p99:+100%' for single CI runs on a noisy runner)")
	fl.String("secret", "", "token signing secret (default $"+envSecret+")")
	fl.StringToStringVar(&o.pprof, "pprof", nil, "serve net/http/pprof from server processes during the runs: NAME=HOST:PORT, loopback (e.g. api=127.0.0.1:6061); profile one with go tool pprof -seconds 5 http://HOST:PORT/debug/pprof/profile")
	fl.StringVar(&o.runnerPprof, "runner-pprof", "", "serve net/http/pprof from this process (the generator, the proxies and an in-process Kafka) on this loopback HOST:PORT during the runs")
}

func newScenarioRunCmd() *cobra.Command {
	var o scenarioOpts
	cmd := &cobra.Command{
		Use:   "run FILE...",
		Short: "Run scenario files; exit 0 when every check passed, 1 when one failed, 2 when a file is bad or a run could not be carried out",
		Long: `Runs each scenario: starts the backends (compose), a chaos proxy in front of each
backend, the reference server process(es), the load and the fault schedule; then checks the
ledger and evaluates the file's expectations. Writes, per scenario, OUT/NAME/result.json,
junit.xml, report.html, verdict.json and the load directory (ledger), and OUT/junit.xml for
all of them. A file with a matrix (matrix: {consumers: [1, 2, 4]}) runs once per value, as
NAME.consumers-N, and the recovery figures of those runs are printed side by side at the end.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var files []*scenario.File
			matrix := false
			for _, p := range args {
				f, err := scenario.ReadFile(p)
				if err != nil {
					return &exitError{code: scenarioExitBroken, err: err}
				}
				runs, err := scenario.Expand(f)
				if err != nil {
					return &exitError{code: scenarioExitBroken, err: fmt.Errorf("%s: %w", p, err)}
				}
				matrix = matrix || f.Matrix != nil
				files = append(files, runs...)
				if o.sideBySide {
					ref, err := scenario.ReferenceSide(f)
					if err != nil {
						return &exitError{code: scenarioExitBroken, err: fmt.Errorf("%s: --side-by-side: %w", p, err)}
					}
					files = append(files, ref)
				}
			}
			return runScenarios(cmd, files, o, "scenarios", matrix)
		},
	}
	o.flags(cmd, "runs/scenarios-<UTC time>")
	cmd.Flags().BoolVar(&o.sideBySide, "side-by-side", false, "run each file (one with an external target: block) and then its reference side, the same load and faults against the reference server in one exec process (its MySQL behind the proxy that stood for the target's database), and write OUT/NAME.side-by-side.html, the review page of the two (as imlab report compare)")
	return cmd
}

// runScenarios runs files one after another, prints each result and, at
// the end, the verdict table (and, for a matrix, the recovery figures side
// by side) and OUT/junit.xml; the error carries the exit status
// (exitError). outPrefix names the default output directory
// runs/PREFIX-<UTC time>.
func runScenarios(cmd *cobra.Command, files []*scenario.File, o scenarioOpts, outPrefix string, matrix bool) error {
	w := cmd.OutOrStdout()
	secret, err := lookupSecret(cmd, true)
	if err != nil {
		return &exitError{code: scenarioExitBroken, err: err}
	}
	secret.warn(cmd.ErrOrStderr())
	f := cmd.Flags()
	out := o.out
	if out == "" {
		out = filepath.Join("runs", outPrefix+"-"+time.Now().UTC().Format("20060102-150405"))
	}
	base := runner.DefaultConfig("")
	base.Secret = secret.value
	base.Mode = fromEnv(f, "backends", envBackends)
	base.MySQLDSN = fromEnv(f, "mysql-dsn", envMySQLDSN)
	base.RedisAddr = fromEnv(f, "redis-addr", envRedisAddr)
	base.RedisPrefix = o.prefix
	base.KeepData = o.keep
	base.Duration = o.duration
	base.BaselineDir = o.baselineDir
	base.BaselineTolerance = o.baselineTol
	base.Pprof = o.pprof
	if o.runnerPprof != "" {
		stop, err := servePprof(cmd.Context(), o.runnerPprof)
		if err != nil {
			return &exitError{code: scenarioExitBroken, err: err}
		}
		defer stop()
		fmt.Fprintf(w, "pprof of this process: http://%s/debug/pprof/\n", o.runnerPprof)
	}
	base.RateScale = o.rateScale
	base.DataDir = lookupEnv(compose.EnvDataDir)
	base.MongoCommand = embeddedMongoCommand()
	base.Progress = w
	var (
		results []*result.Result
		rows    []verdictRow
	)
	code := 0
	for _, sf := range files {
		c := base
		c.OutDir = filepath.Join(out, sf.Name)
		fmt.Fprintf(w, "=== scenario %s (%s)\n", sf.Name, sf.Path)
		res, err := runner.Run(cmd.Context(), c, sf)
		if res != nil {
			results = append(results, res)
			printScenarioResult(w, res, c.OutDir)
		}
		rows = append(rows, newVerdictRow(sf, res, err, c.OutDir))
		switch {
		case err != nil:
			fmt.Fprintf(cmd.ErrOrStderr(), "scenario %s: %v\n", sf.Name, err)
			code = max(code, scenarioExitBroken)
		case !res.Passed:
			code = max(code, scenarioExitFailed)
		}
		if cmd.Context().Err() != nil {
			break
		}
	}
	printVerdictTable(w, rows)
	if o.sideBySide {
		if err := writeSideBySide(w, out, results); err != nil {
			return &exitError{code: scenarioExitBroken, err: err}
		}
	}
	if matrix && len(results) > 0 {
		fmt.Fprintf(w, "=== recovery side by side\n%s", result.MatrixTable(results))
	}
	if len(results) > 0 {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return &exitError{code: scenarioExitBroken, err: err}
		}
		fh, err := os.Create(filepath.Join(out, result.JUnitFile))
		if err != nil {
			return &exitError{code: scenarioExitBroken, err: err}
		}
		werr := result.WriteJUnit(fh, results...)
		if cerr := fh.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return &exitError{code: scenarioExitBroken, err: werr}
		}
		fmt.Fprintf(w, "junit (all scenarios): %s\n", filepath.Join(out, result.JUnitFile))
	}
	switch code {
	case 0:
		return nil
	case scenarioExitFailed:
		return &exitError{code: code, err: errors.New("a scenario check failed")}
	default:
		return &exitError{code: code, err: errors.New("a scenario could not be carried out")}
	}
}

func printScenarioResult(w io.Writer, r *result.Result, dir string) {
	status := "PASSED"
	if !r.Passed {
		status = "FAILED"
	}
	if r.Incomplete {
		status = "NOT CARRIED OUT"
	}
	if r.Skipped != "" && !r.Incomplete {
		status = "SKIPPED"
	}
	fmt.Fprintf(w, "--- scenario %s: %s in %.1fs (%s)\n", r.Scenario, status, r.Seconds, r.Backends)
	if r.Skipped != "" {
		fmt.Fprintf(w, "    skipped on these backends: %s\n", r.Skipped)
	}
	if r.RateScale != nil {
		fmt.Fprintf(w, "    %s\n", r.RateScale.Label())
	}
	if o, _, ok := r.LoadOutcome(); ok {
		line := fmt.Sprintf("    load: %s (achieved %.0f ACKed sends/s; unknown %.1f%%, failed %.1f%%, retried %.1f%%)",
			r.LoadLabel(), o.AckedPerSec, 100*o.UnknownFrac, 100*o.FailFrac, 100*o.RetriedFrac)
		if c := r.LoadCause(); c != "" {
			line += ": " + c
		}
		fmt.Fprintln(w, line)
	}
	for _, e := range r.Events {
		line := fmt.Sprintf("    fault t=%.1fs %s %s", e.At, e.Action, e.Fault)
		if e.Affected > 0 {
			line += fmt.Sprintf(" (%d affected)", e.Affected)
		}
		if e.Err != "" {
			line += ": " + e.Err
		}
		fmt.Fprintln(w, line)
	}
	// Processes a fault took down (or that ended otherwise than by the
	// final stop): every incarnation, with how it ended.
	incarnations := map[string]int{}
	for _, p := range r.Processes {
		incarnations[p.Name]++
	}
	for _, p := range r.Processes {
		if incarnations[p.Name] < 2 && p.End == proc.EndStopped {
			continue
		}
		line := fmt.Sprintf("    process %s", p.Name)
		if p.Exec {
			line += fmt.Sprintf(" pid %d", p.PID)
		}
		line += " " + p.End
		if p.State != "" {
			line += " (" + p.State + ")"
		}
		fmt.Fprintln(w, line)
	}
	if rp := r.Repairs; r.Skipped == "" && (rp.Rows > 0 || !rp.Known) {
		line := fmt.Sprintf("    repairs: %d inbox rows of %d messages written by forward reconciliation (missing when the reconciler looked)", rp.Rows, len(rp.MsgIDs))
		if !rp.Known {
			line += " (unknown: " + strings.Join(rp.Errors, "; ") + ")"
		}
		if fl := rp.FateLine(); fl != "" {
			line += "; " + fl
		}
		fmt.Fprintln(w, line)
	}
	if d := r.DeadLetters; d != nil && d.Worth() {
		fmt.Fprintln(w, "    dead letters: "+d.AccountLine())
	}
	for _, f := range r.Findings {
		if f.Count > 0 {
			ex := f.Examples[:min(3, len(f.Examples))]
			if len(ex) == 0 {
				for _, id := range f.MsgIDs[:min(5, len(f.MsgIDs))] {
					ex = append(ex, fmt.Sprint(id))
				}
				if len(ex) > 0 {
					ex[0] = "msg_ids " + ex[0]
				}
			}
			fmt.Fprintf(w, "    %s: %d %s\n", f.Name, f.Count, strings.Join(ex, "; "))
		}
	}
	if len(r.Checks) > 0 {
		fmt.Fprint(w, expect.Table(r.Checks))
		if r.RateScale != nil {
			fmt.Fprintf(w, "      checked at %s: rates ×%g for %s\n", r.RateScale.RunRate, r.RateScale.Factor, r.RateScale.For)
		}
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "    %s\n", result.ErrorLine(e))
	}
	for _, n := range []string{result.ResultFile, result.JUnitFile, result.ReportFile, runner.VerdictFile, result.LoadDir} {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); err == nil {
			fmt.Fprintf(w, "    wrote %s\n", p)
		}
	}
}

// defaultScenarioGlob is what selftest runs without arguments.
const defaultScenarioGlob = "scenarios/*.yaml"

// selftestFile is the matrix in the selftest's output directory.
const selftestFile = "matrix.json"

func newScenarioSelftestCmd() *cobra.Command {
	var (
		out, dsn, redisAddr string
		duration            time.Duration
		defects             []string
		parallel            int
	)
	cmd := &cobra.Command{
		Use:   "selftest [FILE...]",
		Short: "Run the scenario library against the reference server once unmodified and once per shipped defect; print the matrix defect × scenario (caught/missed)",
		Long: `Runs every file (default ` + defaultScenarioGlob + `) once against the unmodified reference server
and once per shipped defect (imlab ref --list-defects), and prints the matrix: for the unmodified
server pass/FAIL, for a defect caught (the scenario failed) or missed (it passed). A run that could
not be carried out is "error" and proves nothing. Exit 0 when every defect is caught by at least one
scenario and the unmodified server passes all; 1 otherwise; 2 when a file is bad or the selftest
could not run. Writes OUT/matrix.json and each run's outputs under OUT/DEFECT/SCENARIO.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			globbed := len(args) == 0
			if globbed {
				var err error
				if args, err = filepath.Glob(defaultScenarioGlob); err != nil || len(args) == 0 {
					return &exitError{code: scenarioExitBroken, err: fmt.Errorf("no files given and none match %s", defaultScenarioGlob)}
				}
			}
			var files []*scenario.File
			for _, p := range args {
				f, err := scenario.ReadFile(p)
				if err != nil {
					return &exitError{code: scenarioExitBroken, err: err}
				}
				if globbed && f.Kind == scenario.KindCapacity {
					// A search per defect would be long; name the file to
					// include it.
					fmt.Fprintf(w, "skipped %s: a capacity search (name it to include it)\n", p)
					continue
				}
				files = append(files, f)
			}
			secret, err := lookupSecret(cmd, true)
			if err != nil {
				return &exitError{code: scenarioExitBroken, err: err}
			}
			secret.warn(cmd.ErrOrStderr())
			fl := cmd.Flags()
			if out == "" {
				out = filepath.Join("runs", "selftest-"+time.Now().UTC().Format("20060102-150405"))
			}
			base := runner.DefaultConfig(out)
			base.Secret = secret.value
			base.Mode = fromEnv(fl, "backends", envBackends)
			base.MySQLDSN = fromEnv(fl, "mysql-dsn", envMySQLDSN)
			base.RedisAddr = fromEnv(fl, "redis-addr", envRedisAddr)
			base.Duration = duration
			base.DataDir = lookupEnv(compose.EnvDataDir)
			sc := selftest.SelftestConfig{Base: base, Parallel: parallel, Progress: w}
			if len(defects) > 0 {
				sc.Defects = defects
			}
			rows := len(defectNames())
			if sc.Defects != nil {
				rows = len(sc.Defects)
			}
			fmt.Fprintf(w, "selftest: %d scenarios x (unmodified + %d defects), %d at a time, into %s\n", len(files), rows, max(1, parallel), out)
			m, err := selftest.Selftest(cmd.Context(), sc, files)
			if m != nil {
				fmt.Fprintf(w, "\n%s\nselftest took %.0fs\n", m.Table(), m.Seconds)
				if werr := writeJSONFile(filepath.Join(out, selftestFile), m); werr != nil {
					return &exitError{code: scenarioExitBroken, err: werr}
				}
				fmt.Fprintf(w, "wrote %s\n", filepath.Join(out, selftestFile))
			}
			if err != nil {
				return &exitError{code: scenarioExitBroken, err: err}
			}
			if probs := m.Problems(); len(probs) > 0 {
				return &exitError{code: scenarioExitFailed, err: errors.New(strings.Join(probs, "; "))}
			}
			fmt.Fprintln(w, "selftest: every defect was caught by at least one scenario; the unmodified server passed every scenario")
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "output directory (default runs/selftest-<UTC time>)")
	fl.String("backends", "", "backend mode, overrides the files: auto, external, local or embedded ($"+envBackends+")")
	fl.StringVar(&dsn, "mysql-dsn", "", "MySQL DSN; each run gets a database of its own next to it ($"+envMySQLDSN+")")
	fl.StringVar(&redisAddr, "redis-addr", "", "Redis host:port ($"+envRedisAddr+")")
	fl.DurationVar(&duration, "duration", 0, "override every file's load duration (fault times scale with it)")
	fl.StringSliceVar(&defects, "defects", nil, "the defects to run (default every shipped one; see imlab ref --list-defects)")
	fl.IntVar(&parallel, "parallel", 1, "scenario runs at once (the machine is shared by them: latency thresholds suffer)")
	fl.String("secret", "", "token signing secret (default $"+envSecret+")")
	return cmd
}

// defectNames are the shipped defects' names.
func defectNames() []string {
	var out []string
	for _, d := range server.Defects() {
		out = append(out, d.Name)
	}
	return out
}

// writeJSONFile writes v as indented JSON to path (its directory made).
func writeJSONFile(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
