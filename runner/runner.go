package runner

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/twmb/franz-go/pkg/kadm"
	"imlab/faults"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"imlab/chaos"
	"imlab/checker"
	"imlab/compare"
	"imlab/compose"
	"imlab/expect"
	"imlab/loadgen"
	"imlab/loadgen/schedule"
	"imlab/ref/server"
	"imlab/result"
	"imlab/scenario"
)

// Named limits and fixed times of a run.
const (
	// RunMargin is added to duration + settle + drain timeout to bound a
	// run (start-up, checking, stopping).
	RunMargin = 2 * time.Minute
	// StopTimeout bounds stopping one server process.
	StopTimeout = 20 * time.Second
	// ConsumerSessionTimeout is the consumers' Kafka group session: a
	// killed consumer's partitions move to the others (or to its new
	// incarnation) once it has passed.
	ConsumerSessionTimeout = 6 * time.Second
	// LagInterval is the lag poll period.
	LagInterval = time.Second
	// lagTimeout bounds one lag poll.
	lagTimeout = 2 * time.Second
	// MaxLagSamples bounds the lag timeline.
	MaxLagSamples = 4 * 3600
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
	if len(c.Secret) < MinSecretLen {
		return fmt.Errorf("%w: the secret must be at least %d bytes", scenario.ErrInvalid, MinSecretLen)
	}
	if c.Duration < 0 || c.Duration > scenario.MaxLoadDuration {
		return fmt.Errorf("%w: duration override %s: want 0..%s", scenario.ErrInvalid, c.Duration, scenario.MaxLoadDuration)
	}
	if !(c.RateScale >= 0 && c.RateScale <= 1) {
		return fmt.Errorf("%w: rate scale %g: want (0, 1], or 0 for the topology's", scenario.ErrInvalid, c.RateScale)
	}
	if err := validPrefix(c.RedisPrefix); err != nil {
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

// DefaultChildArgs are the arguments of the default child command (after
// this executable's path): imlab's hidden "scenario child".
func DefaultChildArgs() []string { return []string{"scenario", "child"} }

// childCommand is the configured child command, or the default.
func (c Config) childCommand() ([]string, error) {
	return selfCommand(c.ChildCommand, DefaultChildArgs(), "exec processes need a child command (Config.ChildCommand)")
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
	kafka     *proxiedKafka
	px        *chaos.Proxies
	procs     []*procSlot
	ext       *extProc // an external target's process (scenario.TargetSpec)
	topic     string
	reached   []*reach // one per fault of the file, in file order
	// rowsDB reads the inbox row count for the recovery figures (the
	// run's database, directly, not through the proxy); nil without
	// Kafka.
	rowsDB *sql.DB
	stops  []func(context.Context) error // in start order; run in reverse
}

func randomID() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
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
	r := &run{cfg: cfg, f: f, log: log, id: randomID()}
	r.res = &result.Result{Format: result.ResultFormat, Scenario: f.Name, Description: f.Description, File: f.Path, Spec: f, StartedAt: time.Now().UTC(),
		Findings: []result.FindingSummary{}, Checks: []result.Check{}, Events: []result.FaultEvent{}, Sends: []result.SendSecond{}, Lag: []result.LagSample{},
		Processes: []result.ProcessRun{}}
	began := time.Now()
	la, laOK := result.ReadLoadAvg()

	bound := f.Load.Duration.D() + f.Load.SettleOr() + f.Load.DrainTimeoutOr() + RunMargin
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
		runs, notes := r.ext.history()
		r.res.Processes = append(r.res.Processes, runs...)
		r.res.Errors = append(r.res.Errors, notes...)
	}
	for _, s := range r.procs {
		runs, notes := s.history()
		r.res.Processes = append(r.res.Processes, runs...)
		r.res.Errors = append(r.res.Errors, notes...)
	}
	if runErr != nil {
		r.res.Incomplete = true
		r.res.Errors = append([]string{runErr.Error()}, r.res.Errors...)
	}
	r.res.Seconds = time.Since(began).Seconds()
	if end, ok := result.ReadLoadAvg(); ok && laOK {
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
		ctx, cancel := context.WithTimeout(context.Background(), StopTimeout+10*time.Second)
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

	// The load and the schedule share one time base; loadgen starts its
	// schedule after its own set-up (LoadOffset).
	base := time.Now()
	r.res.TimeBase = base.UTC()
	pollCtx, stopPoll := context.WithCancel(ctx)
	lagLog := &lagLog{}
	pollDone := make(chan struct{})
	go func() { defer close(pollDone); r.pollLag(pollCtx, base, r.rowsDB, lagLog) }()

	type schedOut struct {
		ev  []chaos.Event
		err error
	}
	schedCh := make(chan schedOut, 1)
	schedCtx, stopSched := context.WithCancel(ctx)
	defer stopSched()
	go func() {
		ev, err := chaos.RunSchedule(schedCtx, base, steps)
		schedCh <- schedOut{ev, err}
	}()

	var sum *loadgen.Summary
	var loadErr error
	srcs := []checker.Source{{Dir: lc.RunDir}}
	if n := r.f.Load.Segments; n > 1 {
		sum, srcs, loadErr = r.runSegments(ctx, lc, n)
	} else {
		sum, loadErr = loadgen.Run(ctx, lc)
	}
	if loadErr != nil {
		stopSched() // heals what is injected
	}
	so := <-schedCh
	healCtx, cancelHeal := context.WithTimeout(context.Background(), StopTimeout)
	healErr := r.px.HealAll(healCtx)
	cancelHeal()
	kinds := map[string]string{}
	for _, rc := range r.reached {
		kinds[rc.Name()] = rc.spec.Kind
	}
	for _, e := range so.ev {
		r.res.Events = append(r.res.Events, result.FaultEvent{At: e.At.Seconds(), Fault: e.Fault, Kind: kinds[e.Fault], Action: e.Action, Err: e.Err, Affected: e.Affected})
	}
	if sum != nil {
		r.res.LoadOffset = sum.StartedAt.Sub(base).Seconds()
	}
	sinceAt, since := expect.RecoverySince(lc.Shape, lc.Duration, r.res.LoadOffset, r.res.Events)
	rcfg := expect.RecoveryConfig(r.f.Expect, sinceAt, lc.DrainTimeout)
	rcfg.Outbox = r.f.Server.PolicyOr() == "outbox"
	if r.f.UsesKafka() && loadErr == nil {
		r.awaitRecovery(ctx, base, rcfg, lagLog)
	}
	stopPoll()
	<-pollDone
	lag := lagLog.snapshot()
	r.res.Lag = lag
	if r.f.UsesKafka() {
		fig, err := expect.RecoveryFigures(rcfg, since, lag)
		if err != nil {
			return err
		}
		r.res.Recovery = fig
	}
	r.res.Burst = expect.BurstFigures(lc.Shape, lc.Duration, sum, r.res.LoadOffset)
	if sum != nil {
		r.res.RunDir = lc.RunDir
		r.res.AckSeconds = sum.AckSeconds
		retried := sum.RetriedSends
		r.res.RetriedSends = &retried
		for _, s := range sum.Timeline {
			r.res.Sends = append(r.res.Sends, result.SendSecond{T: float64(s.T) + r.res.LoadOffset, Started: s.Started, OK: s.OK, Fail: s.Fail,
				Unknown: s.Unknown, AckP50: result.AckMs(s.OK, int64(s.Response.P50)), AckP99: result.AckMs(s.OK, int64(s.Response.P99))})
		}
		if sum.FailedByIntended != nil {
			end := r.res.LoadOffset
			if n := len(sum.Timeline); n > 0 {
				end += float64(sum.Timeline[n-1].T)
			}
			r.res.SendFailures = result.SendFailuresOf(r.res.Events, sum.FailedByIntended, r.res.LoadOffset, end)
		}
		r.res.Errors = append(r.res.Errors, sum.Errors...)
	}
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

	truncated := uint64(0)
	rep := result.RepairSummary{Known: true, MsgIDs: []uint64{}}
	for _, s := range r.procs {
		truncated += s.truncatedPulls(ctx)
		pr := s.repairs(ctx)
		rep.Add(server.Repairs{Rows: pr.Rows, MsgIDs: pr.MsgIDs, Truncated: pr.Truncated})
		rep.Known = rep.Known && pr.Known
		rep.Errors = append(rep.Errors, pr.Errors...)
	}
	r.res.Repairs = rep
	// The checker follows the repaired messages, so that the report can
	// tell the ones delivered in the end (late) from the ones lost.
	v, cerr := checker.CheckSourcesWith(srcs, checker.Options{Follow: rep.MsgIDs})
	if cerr != nil {
		return fmt.Errorf("scenarios: checker: %w", cerr)
	}
	// The file's max_reordered is the order judgement the verdict uses
	// (a scenario that names a degraded window allows some reorders).
	if err := v.Judge(expect.Allowances(r.f.Expect)); err != nil {
		return fmt.Errorf("scenarios: checker: %w", err)
	}
	if len(srcs) > 1 {
		latencyFromVerdict(sum, v)
		v.Warnings = append(v.Warnings, r.segNotes...)
	}
	if err := result.WriteFile(filepath.Join(r.cfg.OutDir, VerdictFile), func(w io.Writer) error { return result.WriteJSON(w, v) }); err != nil {
		return err
	}
	obs := expect.Observe(v, sum, lag, truncated, lc)
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

// startBackends starts compose (MySQL, Redis, MongoDB with history), the
// in-process Kafka, the run's database and prefix, and the proxies.
func (r *run) startBackends(ctx context.Context) error {
	cc := compose.DefaultConfig()
	cc.Mode = r.f.Backends.ModeOr()
	if r.cfg.Mode != "" {
		cc.Mode = r.cfg.Mode
	}
	cc.MySQLDSN, cc.RedisAddr, cc.DataDir = r.cfg.MySQLDSN, r.cfg.RedisAddr, r.cfg.DataDir
	cc.WithKafka = false // in-process here, so that it can be proxied
	cc.WithMongo = r.f.Server.History
	cc.MongoCommand = r.cfg.MongoCommand
	// A fresh database is made below: compose must not leave the DSN's
	// own database behind, created and empty.
	cc.MySQLNoCreate = r.cfg.FreshDatabase
	cc.Logger = r.log
	cb, stop, err := compose.Start(ctx, cc)
	if err != nil {
		return fmt.Errorf("scenarios: backends: %w", err)
	}
	r.onStop(func(ctx context.Context) error { return stop(ctx) })
	r.cb = cb
	r.res.Errors = append(r.res.Errors, cb.Warnings...)

	dsn := cb.MySQLDSN
	if r.cfg.FreshDatabase {
		name := databaseOf(r.id)
		fresh, drop, err := freshDatabase(ctx, dsn, name)
		if err != nil {
			return err
		}
		dsn = fresh
		if !r.cfg.KeepData {
			r.onStop(drop)
		}
	}
	r.prefix = r.cfg.RedisPrefix
	if r.prefix == "" {
		r.prefix = "imlab:scn:" + r.id + ":"
	}
	r.redisAddr = cb.RedisAddr
	if !r.cfg.KeepData {
		addr, prefix := cb.RedisAddr, r.prefix
		r.onStop(func(ctx context.Context) error { return deletePrefix(ctx, addr, prefix) })
	}

	if r.f.UsesKafka() {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return fmt.Errorf("scenarios: mysql: %w", err)
		}
		db.SetMaxOpenConns(1)
		r.rowsDB = db
		r.onStop(func(context.Context) error { return db.Close() })
	}
	up := map[string]string{scenario.TargetRedis: cb.RedisAddr}
	if up[scenario.TargetMySQL], err = mysqlAddr(dsn); err != nil {
		return err
	}
	if r.f.UsesKafka() {
		k, err := startKafka(r.f.Backends.PartitionsOr())
		if err != nil {
			return err
		}
		r.kafka = k
		r.onStop(func(context.Context) error { k.Close(); return nil })
		up[scenario.TargetKafka] = k.real
	}
	if r.f.Server.History {
		if up[scenario.TargetMongo], err = mongoHost(cb.MongoURI); err != nil {
			return err
		}
	}
	px, err := chaos.StartProxies(ctx, up)
	if err != nil {
		return fmt.Errorf("scenarios: proxies: %w", err)
	}
	r.px = px
	r.onStop(func(context.Context) error { return px.Close() })
	addr := func(name string) string { a, _ := px.Addr(name); return a }
	if r.back.MySQLDSN, err = withAddr(dsn, addr(scenario.TargetMySQL)); err != nil {
		return err
	}
	r.back.RedisAddr = addr(scenario.TargetRedis)
	if r.kafka != nil {
		if err := r.kafka.Advertise(addr(scenario.TargetKafka)); err != nil {
			return err
		}
		r.back.KafkaBrokers = []string{addr(scenario.TargetKafka)}
	}
	if r.f.Server.History {
		r.back.MongoURI = mongoVia(cb.MongoURI, addr(scenario.TargetMongo))
	}
	return nil
}

// deletePrefix deletes every key under prefix, with the same SCAN + UNLINK
// as the redis_wipe fault (chaos.RedisWipe); an empty prefix deletes
// nothing (never the whole server).
func deletePrefix(ctx context.Context, addr, prefix string) error {
	if prefix == "" {
		return nil
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := chaos.RedisWipe(c, chaos.RedisWipeConfig{Prefix: prefix}).Inject(ctx); err != nil {
		return fmt.Errorf("scenarios: clean redis prefix: %w", err)
	}
	return nil
}

// childSpec describes process i: what serverConfig needs, in process or
// out.
func (r *run) childSpec(i int, p scenario.ProcessSpec) ChildSpec {
	srv := r.f.Server
	srv.Processes = nil
	return ChildSpec{Server: srv, Process: p, Node: uint16(i + 1), Migrate: i == 0, Listen: "127.0.0.1:0",
		Secret: r.cfg.Secret, RedisPrefix: r.prefix, RunID: r.id, Partitions: r.f.Backends.PartitionsOr(),
		PushBus: len(r.f.Processes()) > 1, Backends: childBackends(r.back), Defects: r.cfg.Defects,
		Pprof: r.cfg.Pprof[p.Name]}
}

// processLog is the log file of a server process.
func (r *run) processLog(name string) string {
	return filepath.Join(r.cfg.OutDir, "process-"+name+".log")
}

// startProcesses starts every server process in file order.
func (r *run) startProcesses(ctx context.Context) error {
	r.topic = topicOf(r.id)
	for name := range r.cfg.Pprof {
		if !slices.ContainsFunc(r.f.Processes(), func(p scenario.ProcessSpec) bool { return p.Name == name }) {
			return fmt.Errorf("%w: pprof for process %q: the file has no such process", scenario.ErrInvalid, name)
		}
	}
	var command []string
	for i, p := range r.f.Processes() {
		spec := r.childSpec(i, p)
		if err := spec.Validate(); err != nil {
			return fmt.Errorf("scenarios: process %s: %w", p.Name, err)
		}
		if p.Exec && command == nil {
			var err error
			if command, err = r.cfg.childCommand(); err != nil {
				return err
			}
		}
		// Every process logs to its own file in the run directory, in
		// process or out: the terminal gets the live line and the verdict.
		logPath := r.processLog(p.Name)
		logw, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("scenarios: process %s: log: %w", p.Name, err)
		}
		r.onStop(func(context.Context) error { return logw.Close() }) // after the process's stop
		faults := 0
		for _, x := range r.f.Faults {
			if (x.Kind == scenario.KindStop || x.Kind == scenario.KindKill) && x.Target == p.Name {
				faults++
			}
		}
		log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo}))
		s := newProcSlot(spec, log, command, logw, logPath, faults)
		r.procs = append(r.procs, s)
		r.onStop(s.stop)
		if err := s.start(ctx); err != nil {
			return fmt.Errorf("scenarios: start process %s: %w", p.Name, err)
		}
	}
	if r.target() == "" {
		return fmt.Errorf("scenarios: no process serves the api")
	}
	return nil
}

// target is the base URL of the first process running the api role.
func (r *run) target() string {
	if t := r.f.Target; t.External() {
		return t.URL()
	}
	for _, s := range r.procs {
		if a := s.apiAddr(); a != "" {
			return "http://" + a
		}
	}
	return ""
}

// buildSteps turns the fault specs into chaos steps.
func (r *run) buildSteps() ([]chaos.Step, error) {
	var steps []chaos.Step
	var rc *redis.Client
	redisClient := func() *redis.Client {
		if rc == nil {
			rc = redis.NewClient(&redis.Options{Addr: r.redisAddr})
			r.onStop(func(context.Context) error { return rc.Close() })
		}
		return rc
	}
	env := faults.Env{Proxies: r.px, Redis: redisClient, RedisPrefix: r.prefix, Topic: r.topic,
		Kafka: func() (*kadm.Client, error) {
			adm, cl, err := r.kafka.admin()
			if err != nil {
				return nil, err
			}
			r.onStop(func(context.Context) error { cl.Close(); return nil })
			return adm, nil
		},
		Process: func(name string) (faults.Process, bool) {
			for _, s := range r.procs {
				if s.name == name {
					return faults.Process{Stop: s.stopFault, Kill: s.kill, Restart: s.restart}, true
				}
			}
			return faults.Process{}, false
		}}
	for i, x := range r.f.Faults {
		fl, err := faults.Build(x, env)
		if err != nil {
			return nil, fmt.Errorf("%w: faults[%d]: %w", scenario.ErrInvalid, i, err)
		}
		rc := newReach(i, x, fl)
		r.reached = append(r.reached, rc)
		steps = append(steps, chaos.Step{At: x.At.D(), For: x.For.D(), Fault: rc})
	}
	if err := chaos.ValidateSteps(steps); err != nil {
		return nil, fmt.Errorf("scenarios: fault schedule: %w", err)
	}
	return steps, nil
}

// ScenarioProbeFraction is the share of ACKed sends a scenario probes
// right after the ACK (read-after-ACK, through the lab routes the runner's
// server processes mount).
const ScenarioProbeFraction = 0.1

// MaxScenarioProbes bounds the probes of one run: a probe is the lab's own
// read of the store (under outbox a scan of mq_outbox), and 10% of a 50k/s
// burst (10,000 probes) took mariadbd from the server under test. Beyond
// it the fraction falls, to no less than the load default.
const MaxScenarioProbes = 2000

// probeFraction is the share of a run of sends sends to probe.
func probeFraction(sends uint64) float64 {
	f := ScenarioProbeFraction
	if sends > 0 && float64(sends)*f > MaxScenarioProbes {
		f = max(MaxScenarioProbes/float64(sends), loadgen.DefaultProbeFraction)
	}
	return f
}

// loadConfig is loadgen's config for the file.
func (r *run) loadConfig() (loadgen.Config, error) {
	l := r.f.Load
	lc := loadgen.DefaultConfig(r.target(), r.cfg.Secret, filepath.Join(r.cfg.OutDir, result.LoadDir))
	var sh schedule.Shape = schedule.Constant{PerSec: 1}
	var err error
	if r.f.Kind == scenario.KindCapacity {
		// A template: the search sets every step's rate, length and
		// directory.
		l.Duration = scenario.Duration(time.Second)
	} else if sh, err = schedule.Parse(l.Rate); err != nil {
		return lc, fmt.Errorf("%w: load.rate: %w", scenario.ErrInvalid, err)
	}
	if rs := r.rateScale(sh); rs != nil && r.f.Kind != scenario.KindCapacity {
		if sh, err = schedule.Scale(sh, rs.Factor); err != nil {
			return lc, fmt.Errorf("%w: load.rate: %w", scenario.ErrInvalid, err)
		}
		rs.RunRate = sh.String()
		r.res.RateScale = rs
	}
	lc.Shape, lc.Duration = sh, l.Duration.D()
	lc.Pop.Users = l.Users
	lc.Pop.DevicesPerUser = scenario.DefaultDevices
	if l.Devices > 0 {
		lc.Pop.DevicesPerUser = l.Devices
	}
	lc.Pop.Online, lc.Pop.Crashy = l.OnlineOr(), l.CrashyOr()
	lc.Pop.Groups, lc.Pop.GroupShare = l.Groups, l.GroupShare
	if lc.Pop.GroupSizes, err = loadgen.ParseSizes(scenario.Or(l.GroupSizes, scenario.DefaultGroupSizes)); err != nil {
		return lc, fmt.Errorf("%w: load.group_sizes: %w", scenario.ErrInvalid, err)
	}
	lc.Pop.ComeBackEvery = scenario.DefaultComeBackEvery
	if l.ComeBackEvery != nil {
		lc.Pop.ComeBackEvery = l.ComeBackEvery.D()
	}
	lc.SendVia = scenario.Or(l.SendVia, loadgen.ViaHTTP)
	lc.ProbeFraction = probeFraction(schedule.Count(lc.Shape, lc.Duration)) // short runs: probe more ACKs than a load run does
	lc.Settle, lc.DrainTimeout = l.SettleOr(), l.DrainTimeoutOr()
	lc.PullLimit = scenario.DefaultPullLimit
	if l.PullLimit > 0 {
		lc.PullLimit = l.PullLimit
	}
	lc.Seed = scenario.DefaultSeed
	if l.Seed > 0 {
		lc.Seed = l.Seed
	}
	if l.Retries != nil {
		lc.Retries = *l.Retries
	}
	if l.Mix != nil {
		lc.Mix = *l.Mix
	}
	lc.Conns = 64
	if l.Conns > 0 {
		lc.Conns = l.Conns
	}
	if l.Pipeline > 0 {
		lc.Pipeline = l.Pipeline
		if l.PipelineConns > 0 {
			lc.PipelineConns = l.PipelineConns
		}
	}
	lc.Pacer = pacerConfig(l, lc.Pacer)
	if l.SendTimeout > 0 {
		lc.Timeout = l.SendTimeout.D()
	}
	lc.CeilingFor = 0
	lc.Progress = r.cfg.Progress
	if err := lc.Validate(); err != nil {
		return lc, fmt.Errorf("%w: load: %w", scenario.ErrInvalid, err)
	}
	return lc, nil
}

// pacerConfig is the pacer of load section l over loadgen's default c.
func pacerConfig(l scenario.LoadSpec, c schedule.Config) schedule.Config {
	if l.MaxWorkers > 0 {
		c.MaxWorkers = l.MaxWorkers
		c.Workers = min(c.Workers, l.MaxWorkers)
	}
	if l.SpinWindow != nil {
		c.SpinWindow = l.SpinWindow.D()
	}
	if l.Senders > 0 {
		c.Senders, c.MaxQueued = l.Senders, scenario.DefaultMaxQueued
		if l.MaxQueued > 0 {
			c.MaxQueued = l.MaxQueued
		}
	}
	return c
}

// rateScale is how the run scales the file's rate sh (nil: it does not):
// Config.RateScale when set, else load.embedded_rate_scale when the run's
// MySQL is the embedded engine (compose.Backends.Embedded). RunRate is
// left to the caller.
func (r *run) rateScale(sh schedule.Shape) *result.RateScale {
	rs := &result.RateScale{Factor: r.cfg.RateScale, For: result.RateScaleByConfig, FileRate: sh.String()}
	if rs.Factor == 0 {
		if r.cb == nil || !slices.Contains(r.cb.Embedded, compose.PartMySQL) {
			return nil
		}
		rs.Factor, rs.For = r.f.Load.EmbeddedRateScaleOr(), result.RateScaleEmbedded
	}
	if rs.Factor == 1 {
		return nil
	}
	return rs
}

func (r *run) recordSettings(lc loadgen.Config) {
	s := r.f.Server
	r.setting("backends", r.cb.Summary())
	r.res.Backends = r.cb.Summary()
	r.setting("policy", s.PolicyOr())
	r.setting("allocator", scenario.Or(s.Allocator, scenario.DefaultAllocator))
	r.setting("dedup", scenario.Or(s.Dedup, scenario.DefaultDedup))
	r.setting("history", s.History)
	var ps []string
	for _, p := range r.f.Processes() {
		where := ""
		if p.Exec {
			where = " (exec, log " + r.processLog(p.Name) + ")"
		}
		ps = append(ps, p.Name+"="+strings.Join(p.Roles, "+")+where)
	}
	r.setting("processes", strings.Join(ps, " "))
	r.setting("consumer_processes", r.f.ConsumerProcesses())
	if r.f.Variant != "" {
		r.setting("variant", r.f.Variant)
	}
	if c := r.f.Capacity; r.f.Kind == scenario.KindCapacity && c != nil {
		r.setting("capacity", fmt.Sprintf("search %g..%g/s within %s", c.From, c.To, c.SLO))
	} else {
		r.setting("rate", lc.Shape.String())
		if rs := r.res.RateScale; rs != nil {
			r.setting("rate_scale", rs.Label())
		}
		r.setting("duration", lc.Duration)
	}
	r.setting("users", lc.Pop.Users)
	r.setting("devices_per_user", lc.Pop.DevicesPerUser)
	r.setting("online", lc.Pop.Online)
	r.setting("crashy", lc.Pop.Crashy)
	r.setting("groups", lc.Pop.Groups)
	r.setting("come_back_every", lc.Pop.ComeBackEvery)
	r.setting("settle", lc.Settle)
	pool := fmt.Sprintf("max workers %d", lc.Pacer.MaxWorkers)
	if lc.Pacer.Senders > 0 {
		pool = fmt.Sprintf("queued: %d senders, at most %d sends queued", lc.Pacer.Senders, lc.Pacer.MaxQueued)
	}
	pool += fmt.Sprintf(", pacer spin %s", lc.Pacer.SpinWindow)
	r.setting("generator", fmt.Sprintf("conns %d, pipeline %d on %d conns, %s, send timeout %s", lc.Conns, lc.Pipeline, lc.PipelineConns, pool, lc.Timeout))
	r.setting("retries", lc.Retries)
	r.setting("unread_threshold", r.procs[0].cfg.Pull.UnreadThreshold)
	r.setting("reconcile_interval", r.procs[0].cfg.Reconcile.Interval)
	grace := r.procs[0].cfg.Reconcile.Grace
	if bound := lc.Duration + lc.Settle + lc.DrainTimeout; grace > bound {
		r.setting("reconcile_grace", fmt.Sprintf("%s (late: no message of this run can be repaired before the checker judged it, so a repair cannot hide a loss)", grace))
	} else {
		r.setting("reconcile_grace", fmt.Sprintf("%s (early: repairs can put back what the pipeline lost before the checker sees it; they are reported as findings)", grace))
	}
	if rc := r.procs[0].cfg.Retention; rc.LabShortAges {
		r.setting("retention", fmt.Sprintf("LAB ONLY short ages: window %s, early deletion after %s once every device pulled, a pass every %s", rc.MaxAge, rc.PulledMinAge, rc.Interval))
	} else {
		r.setting("retention", fmt.Sprintf("window %s, early deletion after %s, a pass every %s (nothing of the run is deleted)", rc.MaxAge, rc.PulledMinAge, rc.Interval))
	}
	r.setting("redis_prefix", r.prefix)
	if len(r.cfg.Defects) > 0 {
		r.setting("defects", strings.Join(r.cfg.Defects, ",")+" (shipped defects: a negative control)")
	}
	if r.kafka != nil {
		r.setting("kafka", "in-process kfake behind a proxy, topic "+r.topic)
	}
	names := []string{}
	for _, n := range []string{scenario.TargetMySQL, scenario.TargetRedis, scenario.TargetKafka, scenario.TargetMongo} {
		if a, err := r.px.Addr(n); err == nil {
			names = append(names, n+"@"+a)
		}
	}
	r.setting("proxies", strings.Join(names, " "))
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
