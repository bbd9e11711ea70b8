package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"imlab/compose"
	"imlab/runner"
	"imlab/runner/batch"
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
					fmt.Fprintf(cmd.OutOrStdout(), "ok      %s (%s: capacity search %g..%g/s within %s)\n", p, f.Name, c.Config.From, c.Config.To, c.SLO)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "ok      %s (%s: %s for %s, %d faults)\n", p, f.Name, f.Load.Rate, f.Load.Config.Duration, len(f.Faults))
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
	fl.StringVar(&o.dsn, "mysql-dsn", "", "MySQL DSN; its database name is replaced by one per run, imlab_scn_<run id>, created next to it and dropped at the end unless --keep-data (the run's start line, report settings and result.json name it) ($"+envMySQLDSN+")")
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
			files, matrix, err := batch.Files(args, o.sideBySide)
			if err != nil {
				return &exitError{code: scenarioExitBroken, err: err}
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
	worst, err := batch.Run(cmd.Context(), base, files, out, matrix, w, cmd.ErrOrStderr())
	if err == nil && o.sideBySide {
		err = batch.WriteSideBySide(w, out, files)
	}
	switch {
	case err != nil:
		return &exitError{code: scenarioExitBroken, err: err}
	case worst == batch.Passed:
		return nil
	case worst == batch.Failed:
		return &exitError{code: scenarioExitFailed, err: errors.New("a scenario check failed")}
	default:
		return &exitError{code: scenarioExitBroken, err: errors.New("a scenario could not be carried out")}
	}
}

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
		Long: `Runs every file (default ` + selftest.DefaultGlob + `) once against the unmodified reference server
and once per shipped defect (imlab ref --list-defects), and prints the matrix: for the unmodified
server pass/FAIL, for a defect caught (the scenario failed) or missed (it passed). A run that could
not be carried out is "error" and proves nothing. Exit 0 when every defect is caught by at least one
scenario and the unmodified server passes all; 1 otherwise; 2 when a file is bad or the selftest
could not run. Writes OUT/` + selftest.MatrixFile + ` and each run's outputs under OUT/DEFECT/SCENARIO.`,
		RunE: func(cmd *cobra.Command, args []string) error {
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
			sc := selftest.SelftestConfig{Base: base, Parallel: parallel}
			if len(defects) > 0 {
				sc.Defects = defects
			}
			_, err = selftest.Run(cmd.Context(), sc, args, cmd.OutOrStdout())
			var probs *selftest.ProblemsError
			switch {
			case err == nil:
				return nil
			case errors.As(err, &probs):
				return &exitError{code: scenarioExitFailed, err: err}
			default:
				return &exitError{code: scenarioExitBroken, err: err}
			}
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "output directory (default runs/selftest-<UTC time>)")
	fl.String("backends", "", "backend mode, overrides the files: auto, external, local or embedded ($"+envBackends+")")
	fl.StringVar(&dsn, "mysql-dsn", "", "MySQL DSN; its database name is replaced by one per run, imlab_scn_<run id>, created next to it ($"+envMySQLDSN+")")
	fl.StringVar(&redisAddr, "redis-addr", "", "Redis host:port ($"+envRedisAddr+")")
	fl.DurationVar(&duration, "duration", 0, "override every file's load duration (fault times scale with it)")
	fl.StringSliceVar(&defects, "defects", nil, "the defects to run (default every shipped one; see imlab ref --list-defects)")
	fl.IntVar(&parallel, "parallel", 1, "scenario runs at once (the machine is shared by them: latency thresholds suffer)")
	fl.String("secret", "", "token signing secret (default $"+envSecret+")")
	return cmd
}
