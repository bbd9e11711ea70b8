package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"imlab/chaos"
	"imlab/checker"
	"imlab/compare"
	"imlab/compose"
	"imlab/expect"
	"imlab/internal/loadavg"
	"imlab/loadgen"
	"imlab/loadgen/summary"
	"imlab/ref/server"
	"imlab/result"
	"imlab/runner/lagpoll"
	"imlab/runner/proc"
	"imlab/scenario"
)

// Named limits and fixed times of a run.
const (
	// RunMargin is added to duration + settle + drain timeout to bound a
	// run (start-up, checking, stopping).
	RunMargin = 2 * time.Minute
	// VerdictFile is the checker's whole verdict in the output directory.
	VerdictFile = "verdict.json"
)

// Config of the runner (not of a scenario: the file says that).
type Config struct {
	// OutDir receives result.json, junit.xml, report.html, verdict.json
	// and the load directory. It must not hold a previous run's ledger.
	OutDir string
	// Mode overrides the file's backends.mode ("": the file's).
	Mode string
	// MySQLDSN and RedisAddr are external servers (auto/external modes).
	MySQLDSN  string
	RedisAddr string
	// FreshDatabase creates a database of the run's own next to the DSN's
	// (dropped at the end unless KeepData); false uses the DSN's database
	// as it is (it must be fresh to the run's uids).
	FreshDatabase bool
	// RedisPrefix is the key prefix of the run ("": a fresh random one);
	// every key under it is deleted at the end unless KeepData.
	RedisPrefix string
	KeepData    bool
	// Secret signs the tokens of the server and the load.
	Secret string
	// Duration, when > 0, overrides load.duration; fault times are scaled
	// by the same ratio (the rate shape is not).
	Duration time.Duration
	// RateScale, when > 0, multiplies every rate of every file's shape, on
	// any topology; 0 leaves it to the topology: load.embedded_rate_scale
	// when MySQL is the embedded engine, else the file's rate. Either way
	// the run reports it (Result.RateScale).
	RateScale float64
	// DataDir: compose's parent of private data directories.
	DataDir string
	// Progress receives a live line per second (nil: none); the runner
	// serialises its writers' lines (lockedWriter).
	Progress io.Writer
	// Logger receives compose's logs (nil: warnings and errors to
	// stderr). Every server process, in process or exec, logs to
	// OutDir/process-NAME.log.
	Logger *slog.Logger
	// Defects are shipped defects of the reference server (ref/server's
	// Defects) put into every server process of the run: the lab's
	// negative controls, for `imlab scenario selftest`. The runner is a
	// lab tool, so no further switch is asked for; empty by default.
	Defects []string
	// ChildCommand runs one exec process (server.processes[].exec): the
	// argv of a command that reads a ChildSpec line on stdin and speaks
	// ChildMain's protocol. Empty: this executable with "scenario child"
	// (imlab's hidden subcommand).
	ChildCommand []string
	// LoadChildCommand runs one load segment (load.segments > 1): the argv
	// of a command that reads a LoadChildSpec line on stdin (see
	// LoadChildMain). Empty: this executable with "scenario load-child".
	LoadChildCommand []string
	// BaselineDir holds stored results, one directory per scenario name
	// (DIR/NAME/result.json): each run is gated on its own, overriding a
	// file's baseline path (its tolerance still applies); a scenario with
	// no stored result is noted, not gated.
	BaselineDir string
	// BaselineTolerance applies to a baseline gate whose file names no
	// tolerance of its own ("": compare's defaults).
	BaselineTolerance string
	// MongoCommand is compose.Config.MongoCommand: the command that serves
	// an embedded FerretDB from a child process at a lower priority
	// (empty: in-process).
	MongoCommand []string
	// Pprof serves net/http/pprof from the named server processes, each
	// on its loopback host:port (server.Config.PprofListen), apart from
	// the API: the lab operator profiles a process during a run with
	// go tool pprof http://ADDR/debug/pprof/profile. Empty: none. A name
	// that is not one of the file's processes is an error of the run.
	Pprof map[string]string
}

// DefaultConfig writes to outDir with a fresh database and Redis prefix.
func DefaultConfig(outDir string) Config {
	return Config{OutDir: outDir, FreshDatabase: true, Secret: "imlab-scenario-secret-0123456789"}
}

// Validate checks the runner config.
func (c Config) Validate() error {
	switch c.Mode {
	case "", "auto", "external", "local", "embedded":
	default:
		return fmt.Errorf("%w: backends mode %q: want auto, external, local or embedded", scenario.ErrInvalid, c.Mode)
	}
	if c.OutDir == "" {
		return fmt.Errorf("%w: no output directory", scenario.ErrInvalid)
	}
	if len(c.Secret) < proc.MinSecretLen {
		return fmt.Errorf("%w: the secret must be at least %d bytes", scenario.ErrInvalid, proc.MinSecretLen)
	}
	if c.Duration < 0 || c.Duration > scenario.MaxLoadDuration {
		return fmt.Errorf("%w: duration override %s: want 0..%s", scenario.ErrInvalid, c.Duration, scenario.MaxLoadDuration)
	}
	if !(c.RateScale >= 0 && c.RateScale <= 1) {
		return fmt.Errorf("%w: rate scale %g: want (0, 1], or 0 for the topology's", scenario.ErrInvalid, c.RateScale)
	}
	if err := proc.ValidPrefix(c.RedisPrefix); err != nil {
		return fmt.Errorf("%w: redis prefix %v", scenario.ErrInvalid, err)
	}
	if _, err := server.ParseDefects(c.Defects...); err != nil {
		return fmt.Errorf("%w: %v", scenario.ErrInvalid, err)
	}
	if _, err := compare.ParseTolerances(c.BaselineTolerance); err != nil {
		return fmt.Errorf("%w: baseline tolerance: %v", scenario.ErrInvalid, err)
	}
	if len(c.ChildCommand) > 0 && c.ChildCommand[0] == "" {
		return fmt.Errorf("%w: child command: the program is empty", scenario.ErrInvalid)
	}
	return nil
}

// childCommand is the configured child command, or the default.
func (c Config) childCommand() ([]string, error) {
	return selfCommand(c.ChildCommand, proc.DefaultChildArgs(), "exec processes need a child command (Config.ChildCommand)")
}

// selfCommand is configured when given, else this executable with args.
func selfCommand(configured, args []string, need string) ([]string, error) {
	if len(configured) > 0 {
		return configured, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("scenarios: %s: %w", need, err)
	}
	return append([]string{exe}, args...), nil
}

// run is one scenario run's state; its fields are owned by Run's goroutine
// unless noted.
type run struct {
	cfg Config
	f   *scenario.File
	log *slog.Logger
	id  string
	res *result.Result
	// segNotes are what merging the load's segments had to say (clock
	// precision), for the verdict's warnings.
	segNotes []string
	cb       *compose.Backends
	back     server.Backends // what the server processes get (through the proxies)
	// direct addresses for the lab's own clients
	redisAddr string
	prefix    string
	// database is the MySQL database the run used, as its settings say
	// it (databaseSetting).
	database string
	kafka    *proxiedKafka
	px       *chaos.Proxies
	procs    []*proc.Slot
	ext      *proc.External // an external target's process (scenario.TargetSpec)
	topic    string
	reached  []*reach // one per fault of the file, in file order
	// rowsDB reads the inbox row count for the recovery figures (the
	// run's database, directly, not through the proxy); nil without
	// Kafka.
	rowsDB *sql.DB
	stops  []func(context.Context) error // in start order; run in reverse
}

// Run carries out one scenario and writes its outputs to cfg.OutDir. The
// Result is returned whenever the outputs were written (also for a failed
// or incomplete run); the error says why a run could not be carried out or
// its outputs not written. Passed in the Result is the pass/fail answer.
func Run(ctx context.Context, cfg Config, f *scenario.File) (*result.Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if f == nil {
		return nil, fmt.Errorf("%w: no scenario", scenario.ErrInvalid)
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	f, err := scenario.Scaled(f, cfg.Duration)
	if err != nil {
		return nil, err
	}
	if fs, _ := filepath.Glob(filepath.Join(cfg.OutDir, result.LoadDir, "ledger-*")); len(fs) > 0 {
		return nil, fmt.Errorf("%w: %s already holds a run", scenario.ErrInvalid, cfg.OutDir)
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("scenarios: output directory: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if cfg.Progress != nil {
		// The load's reporter and the lag poller both write live lines.
		cfg.Progress = &lockedWriter{w: cfg.Progress}
	}
	r := &run{cfg: cfg, f: f, log: log, id: proc.RandomID()}
	r.res = &result.Result{Format: result.ResultFormat, Scenario: f.Name, Description: f.Description, File: f.Path, Spec: f, StartedAt: time.Now().UTC(),
		Findings: []result.FindingSummary{}, Checks: []result.Check{}, Events: []result.FaultEvent{}, Sends: []result.SendSecond{}, Lag: []result.LagSample{},
		Processes: []result.ProcessRun{}}
	began := time.Now()
	la, laOK := loadavg.Read()

	bound := f.Load.Config.Duration + f.Load.Config.Settle + f.Load.Config.DrainTimeout + RunMargin
	if f.Kind == scenario.KindCapacity {
		bound = f.Capacity.Bound(f.Load) + RunMargin
	}
	rctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()

	runErr := r.execute(rctx)
	if serr := r.stopAll(); serr != nil {
		r.res.Errors = append(r.res.Errors, serr.Error())
	}
	if r.ext != nil {
		runs, notes := r.ext.History()
		r.res.Processes = append(r.res.Processes, runs...)
		r.res.Errors = append(r.res.Errors, notes...)
	}
	for _, s := range r.procs {
		runs, notes := s.History()
		r.res.Processes = append(r.res.Processes, runs...)
		r.res.Errors = append(r.res.Errors, notes...)
	}
	if runErr != nil {
		r.res.Incomplete = true
		r.res.Errors = append([]string{runErr.Error()}, r.res.Errors...)
	}
	r.res.Seconds = time.Since(began).Seconds()
	if end, ok := loadavg.Read(); ok && laOK {
		r.res.LoadAverage = &result.LoadAverage{Start: la, End: end}
	}
	if !r.res.Incomplete && r.res.Skipped == "" {
		r.gateBaseline()
	}
	r.res.Passed = !r.res.Incomplete && (r.res.Skipped != "" || expect.Passed(r.res.Checks))
	if werr := r.writeOutputs(); werr != nil {
		return r.res, errors.Join(runErr, werr)
	}
	return r.res, runErr
}

func (r *run) onStop(fn func(context.Context) error) { r.stops = append(r.stops, fn) }

// stopAll stops everything started, newest first, each bounded.
func (r *run) stopAll() error {
	var errs []error
	for i := len(r.stops) - 1; i >= 0; i-- {
		ctx, cancel := context.WithTimeout(context.Background(), proc.StopTimeout+10*time.Second)
		if err := r.stops[i](ctx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	r.stops = nil
	return errors.Join(errs...)
}

func (r *run) setting(name string, v any) {
	r.res.Settings = append(r.res.Settings, result.Setting{Name: name, Value: fmt.Sprint(v)})
}

// populationSettings records the population's settings, the same for a
// run against the reference and against an external target.
func (r *run) populationSettings(p loadgen.Population) {
	r.setting("users", p.Users)
	r.setting("devices_per_user", p.DevicesPerUser)
	r.setting("online", p.Online)
	r.setting("crashy", p.Crashy)
	r.setting("groups", p.Groups)
}

// execute starts everything, runs the load and the schedule, checks and
// evaluates. Everything it starts is registered with onStop.
func (r *run) execute(ctx context.Context) error {
	if r.f.Target.External() {
		return r.executeTarget(ctx)
	}
	if err := r.startBackends(ctx); err != nil {
		return err
	}
	if reason := strings.TrimSpace(r.f.Backends.SkipEmbedded); reason != "" && slices.Contains(r.cb.Embedded, compose.PartMySQL) {
		r.res.Skipped, r.res.Backends = reason, r.cb.Summary()
		return nil
	}
	if err := r.startProcesses(ctx); err != nil {
		return err
	}
	if r.f.Kind == scenario.KindCapacity {
		lc, err := r.loadConfig()
		if err != nil {
			return err
		}
		r.recordSettings(lc)
		return r.executeCapacity(ctx, lc)
	}
	steps, err := r.buildSteps()
	if err != nil {
		return err
	}
	lc, err := r.loadConfig()
	if err != nil {
		return err
	}
	r.recordSettings(lc)
	if rs := r.res.RateScale; rs != nil && r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "%s: faults, population and expectations are the file's\n", rs.Label())
	}
	ph, err := r.loadPhase(ctx, lc, steps)
	if err != nil {
		return err
	}
	return r.judgeRun(ctx, lc, ph)
}

// phase is what the load phase leaves for the judgement: the load's
// summary, the checker's sources and the lag timeline.
type phase struct {
	sum  *summary.Summary
	srcs []checker.Source
	lag  []result.LagSample
}

// schedOut is what the fault schedule returns.
type schedOut struct {
	ev  []chaos.Event
	err error
}

// loadPhase runs the load and the fault schedule on one time base (loadgen
// starts its schedule after its own set-up: LoadOffset) with the lag
// poller beside them, heals every proxy, waits for the consumers'
// recovery, and records the events, lag, recovery and burst figures and
// the sends.
func (r *run) loadPhase(ctx context.Context, lc loadgen.Config, steps []chaos.Step) (phase, error) {
	base := time.Now()
	r.res.TimeBase = base.UTC()
	pollCtx, stopPoll := context.WithCancel(ctx)
	lagLog, pollDone := &lagpoll.Log{}, make(chan struct{})
	var loadAt atomic.Int64 // the load's start, for the lag lines' clock
	go func() { defer close(pollDone); r.pollLag(pollCtx, base, &loadAt, lagLog) }()
	stopCPU := r.cpuWatch(ctx, base)
	schedCh := make(chan schedOut, 1)
	schedCtx, stopSched := context.WithCancel(ctx)
	defer stopSched()
	// Faults count from the load's start, after the generator's set-up
	// (a split run's segments start each on their own: the phase's base).
	started := make(chan time.Time, 1)
	if r.f.Load.Segments > 1 {
		started <- base
	} else {
		lc.OnStart = func(t time.Time) { loadAt.Store(t.UnixNano()); started <- t }
	}
	go func() { // owned by loadPhase, which waits for schedCh below
		select {
		case at := <-started:
			ev, err := chaos.RunSchedule(schedCtx, at, steps)
			for i := range ev { // on the phase's time base, as every timeline
				ev[i].At += at.Sub(base)
			}
			schedCh <- schedOut{ev, err}
		case <-schedCtx.Done():
			schedCh <- schedOut{}
		}
	}()

	ph := phase{srcs: []checker.Source{{Dir: lc.RunDir}}}
	var loadErr error
	if n := r.f.Load.Segments; n > 1 {
		ph.sum, ph.srcs, loadErr = r.runSegments(ctx, lc, n)
	} else {
		ph.sum, loadErr = loadgen.Run(ctx, lc)
	}
	if loadErr != nil {
		stopSched() // heals what is injected
	}
	so := <-schedCh
	healCtx, cancelHeal := context.WithTimeout(context.Background(), proc.StopTimeout)
	healErr := r.px.HealAll(healCtx)
	cancelHeal()
	r.recordEvents(so.ev, ph.sum, base)
	sinceAt, since := expect.RecoverySince(lc.Shape, lc.Duration, r.res.LoadOffset, r.res.Events)
	rcfg := expect.RecoveryConfig(r.f.Expect, sinceAt, lc.DrainTimeout)
	rcfg.Outbox = r.f.Server.PolicyOr() == "outbox"
	if r.f.UsesKafka() && loadErr == nil {
		r.awaitRecovery(ctx, base, rcfg, lagLog)
	}
	stopPoll()
	<-pollDone
	r.res.CPU = stopCPU()
	ph.lag = lagLog.Snapshot()
	r.res.Lag = ph.lag
	if r.f.UsesKafka() {
		fig, err := expect.RecoveryFigures(rcfg, since, ph.lag)
		if err != nil {
			return ph, err
		}
		r.res.Recovery = fig
	}
	r.res.Burst = expect.BurstFigures(lc.Shape, lc.Duration, ph.sum, r.res.LoadOffset)
	if ph.sum != nil {
		r.recordSends(lc, ph.sum)
	}
	return ph, r.phaseErr(loadErr, so, healErr)
}

// recordEvents records the schedule's events, each with its fault's kind,
// and where the load started on the time base.
func (r *run) recordEvents(evs []chaos.Event, sum *summary.Summary, base time.Time) {
	kinds := map[string]string{}
	for _, rc := range r.reached {
		kinds[rc.Name()] = rc.spec.Kind
	}
	for _, e := range evs {
		r.res.Events = append(r.res.Events, result.FaultEvent{At: e.At.Seconds(), Fault: e.Fault, Kind: kinds[e.Fault], Action: e.Action, Err: e.Err, Affected: e.Affected})
	}
	if sum != nil {
		r.res.LoadOffset = sum.StartedAt.Sub(base).Seconds()
		r.res.LabCPU = sum.LabCPU
	}
}

// phaseErr is the load phase's error: the load's, the schedule's, the
// heal's; else each event that failed is a run error.
func (r *run) phaseErr(loadErr error, so schedOut, healErr error) error {
	if loadErr != nil {
		return fmt.Errorf("scenarios: load: %w", loadErr)
	}
	if so.err != nil {
		return fmt.Errorf("scenarios: fault schedule: %w", so.err)
	}
	if healErr != nil {
		return fmt.Errorf("scenarios: heal proxies: %w", healErr)
	}
	for _, e := range so.ev {
		if e.Err != "" {
			r.res.Errors = append(r.res.Errors, fmt.Sprintf("fault %s %s at %.1fs: %s", e.Fault, e.Action, e.At.Seconds(), e.Err))
		}
	}
	return nil
}

// repairs reads what every process repaired and how many pulls it
// truncated.
func (r *run) repairs(ctx context.Context) (result.RepairSummary, uint64) {
	truncated := uint64(0)
	rep := result.RepairSummary{Known: true, MsgIDs: []uint64{}}
	for _, s := range r.procs {
		truncated += s.TruncatedPulls(ctx)
		pr := s.Repairs(ctx)
		rep.Add(server.Repairs{Rows: pr.Rows, MsgIDs: pr.MsgIDs, Truncated: pr.Truncated})
		rep.Known = rep.Known && pr.Known
		rep.Errors = append(rep.Errors, pr.Errors...)
	}
	return rep, truncated
}

// judgeRun checks the ledger (following the repaired messages, so that
// the report can tell the ones delivered in the end from the ones lost),
// writes verdict.json and evaluates the file's expectations.
func (r *run) judgeRun(ctx context.Context, lc loadgen.Config, ph phase) error {
	rep, truncated := r.repairs(ctx)
	r.res.Repairs = rep
	v, cerr := checker.CheckSourcesWith(ph.srcs, checker.Options{Follow: rep.MsgIDs})
	if cerr != nil {
		return fmt.Errorf("scenarios: checker: %w", cerr)
	}
	// The file's max_reordered is the order judgement the verdict uses
	// (a scenario that names a degraded window allows some reorders).
	if err := v.Judge(expect.Allowances(r.f.Expect)); err != nil {
		return fmt.Errorf("scenarios: checker: %w", err)
	}
	if len(ph.srcs) > 1 {
		latencyFromVerdict(ph.sum, v)
		v.Warnings = append(v.Warnings, r.segNotes...)
	}
	if err := result.WriteFile(filepath.Join(r.cfg.OutDir, VerdictFile), func(w io.Writer) error { return result.WriteJSON(w, v) }); err != nil {
		return err
	}
	obs := expect.Observe(v, ph.sum, ph.lag, truncated, lc)
	obs.Faults, obs.FaultMisses = len(r.reached), faultMisses(r.reached)
	obs.UsesKafka, obs.Recovery = r.f.UsesKafka(), r.res.Recovery
	_, _, obs.BurstShape = expect.BurstWindow(lc.Shape, lc.Duration)
	obs.Burst = r.res.Burst
	obs.Repairs, obs.RepairsKnown = rep.Rows, rep.Known
	obs.RepairedMsgs, obs.RepairedMsgsCut = len(rep.MsgIDs), rep.Truncated
	r.res.Findings = expect.Findings(v)
	r.res.Repairs.Fate = v.Followed
	r.res.DeadLetters = r.deadLetters(ctx, rep, v)
	obs.DeadLetters = r.res.DeadLetters
	slim := *v
	slim.Findings, slim.Followed = nil, nil
	r.res.Verdict = &slim
	r.res.Checks = expect.Evaluate(r.f.Expect, obs)
	return nil
}

// lockedWriter serialises the writes of the goroutines that share one
// progress writer (loadgen's reporter, the lag poller): each Write is one
// whole line.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
