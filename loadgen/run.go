package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"imlab/ledger"
	"imlab/loadgen/schedule"
	"imlab/targets"
	"imlab/targets/drivers"
)

// WitnessDID is the device id of the checker's witness pulls.
const WitnessDID = "imlab-witness"

// SummaryFile is the run summary's name in the run directory.
const SummaryFile = "summary.json"

// SummaryFormat names the layout of summary.json; a change that a reader
// could misread gets a new one. A summary without the field was written
// before it existed, in the layout of format 1 less the fields added
// since (readers treat those as not recorded).
const SummaryFormat = "imlab-load-summary/1"

type runner struct {
	cfg   Config
	runID string
	drv   targets.Driver
	lab   targets.LabDriver // nil: the target offers no lab view of itself
	caps  targets.Capabilities
	wss   *wsSenders // nil unless SendVia is ViaWS
	convs *convBook  // nil unless the mix is on
	rev   *revoker   // nil unless the mix revokes
	mixN  mixCounters
	start time.Time
	led   *ledger.Ledger
	m     *metrics
	e2e   *e2eTracker
	prog  progress
	users []uint64
	devs  []*device
	byUID map[uint64][]*device
	// mine are the uids of this segment (all of them for a whole run);
	// devs holds only their devices, users and byUID the whole population.
	mine   []uint64
	groups []group
	ev     evidence
	errMu  sync.Mutex
	errs   []string

	// finalMissed counts the devices of a target without an inbox whose
	// final catch-up failed (convVisit).
	finalMissed atomic.Int64

	// acks acknowledges online devices' chains and ends their reads at
	// the drain (acker.go); started by the first online device.
	ackOnce sync.Once
	acks    *acker
}

type group struct {
	id      uint64
	members []uint64
}

// Run performs one run and returns its summary (also written to
// RUN_DIR/summary.json). The ledger is complete when Run returns.
//
// Its stages in order: the runner and its target (newRunner), the
// population, summary head, ceiling, warm-up and ledger (prepare), the
// load with the devices running, the settle and final drain
// (drainDevices), the witnesses (witnesses) and the summary's figures
// (finish).
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if fs, _ := ledger.Files(cfg.RunDir); len(fs) > 0 {
		return nil, fmt.Errorf("%w: %s already holds a ledger", ErrInvalid, cfg.RunDir)
	}
	drv, err := drivers.Open(cfg.targetConfig())
	if err != nil {
		return nil, err
	}
	defer drv.Close()
	r, err := newRunner(cfg, drv)
	if err != nil {
		return nil, err
	}
	sum, err := r.prepare(ctx)
	if err != nil {
		return nil, err
	}

	devCtx, stopDevs := context.WithCancel(ctx)
	defer stopDevs()
	if cfg.SendVia == ViaWS {
		r.wss = newWSSenders(devCtx, drv)
		defer r.wss.Close()
	}
	if cfg.Mix.Revoke > 0 {
		r.rev = r.startRevoker(devCtx)
	}
	stopRevoker := func() {
		if r.rev != nil {
			r.rev.stop()
		}
	}
	drain := make(chan struct{})
	var devWG sync.WaitGroup
	for _, d := range r.devs {
		devWG.Add(1)
		go func() { defer devWG.Done(); d.run(devCtx, drain); r.prog.step() }()
	}
	var live schedule.Live
	repStop := make(chan struct{})
	repDone := make(chan struct{})
	r.prog.enter(PhaseSending, 0, 0)
	go r.report(&live, sum, repStop, repDone)

	cpu0 := markCPU()
	st, err := schedule.Run(ctx, cfg.Pacer, r.ticks(), r.start, &live, r.send)
	sum.LabCPU = labCPU(cpu0, markCPU())
	stopRevoker()
	if err != nil {
		close(repStop)
		<-repDone
		stopDevs()
		devWG.Wait()
		r.led.Close()
		return nil, err
	}
	sum.Pacer = st
	loadEnd := time.Since(r.start)

	r.drainDevices(ctx, sum, drain, &devWG, stopDevs)
	r.witnesses(ctx, sum)
	close(repStop)
	<-repDone
	return r.finish(ctx, sum, st, loadEnd)
}

// newRunner is the runner of one run on drv: its run id, the target's
// capabilities checked against what the run asks of it.
func newRunner(cfg Config, drv targets.Driver) (*runner, error) {
	runID := cfg.RunID
	if runID == "" && !cfg.Segment.Whole() {
		runID = cfg.segmentRunID()
	}
	if runID == "" {
		var rb [6]byte
		_, _ = rand.Read(rb[:])
		runID = hex.EncodeToString(rb[:])
	}
	r := &runner{cfg: cfg, runID: runID, drv: drv, m: newMetrics(16), e2e: newE2ETracker(), byUID: map[uint64][]*device{}}
	r.lab, _ = drv.(targets.LabDriver)
	if err := r.checkCaps(); err != nil {
		return nil, err
	}
	if err := cfg.Mix.Offered(r.caps); err != nil {
		return nil, err
	}
	if cfg.Mix.On() {
		r.convs = newConvBook()
	}
	r.m.sizeIntended(cfg.Duration)
	return r, nil
}

// prepare makes everything the load needs before it starts: the
// population and groups, the summary's head, the generator's ceiling
// (when asked), a warm target, the start time and the ledger.
func (r *runner) prepare(ctx context.Context) (*Summary, error) {
	cfg := r.cfg
	if err := r.population(ctx); err != nil {
		return nil, err
	}
	sum := &Summary{Format: SummaryFormat, RunID: r.runID, Target: cfg.Target, Shape: cfg.Shape.String(), SendVia: cfg.SendVia, Duration: cfg.Duration.String(), Latency: map[string]Quantiles{}}
	r.segmentSummary(sum)
	sum.Generator = GeneratorSummary{GOMAXPROCS: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU(), GOGC: gcPercent(), Conns: cfg.Conns,
		Pipeline: cfg.Pipeline, Workers: cfg.Pacer.Workers, MaxWorkers: cfg.Pacer.MaxWorkers, Senders: cfg.Pacer.Senders}
	if cfg.Pacer.Senders > 0 {
		sum.Generator.MaxQueued = cfg.Pacer.MaxQueued
	}
	if cfg.Pipeline > 0 {
		sum.Generator.PipelineConns = cfg.PipelineConns
		sum.Generator.PipelineDelay = cfg.PipelineDelay.String()
	}
	if err := r.createGroups(ctx); err != nil {
		return nil, err
	}
	if cfg.CeilingFor > 0 {
		conns := cfg.Conns
		if cfg.Pipeline > 0 {
			conns = cfg.PipelineConns
		}
		c, err := MeasureCeiling(ctx, CeilingConfig{Secret: cfg.Secret, Via: cfg.SendVia, Conns: conns,
			Pipeline: cfg.Pipeline, PipelineDelay: cfg.PipelineDelay, Workers: cfg.Pacer.Workers, For: cfg.CeilingFor})
		if err != nil {
			return nil, err
		}
		sum.Ceiling = &c
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "generator ceiling (no-op endpoint, sends over %s, %d conns, pipeline %d): %.0f sends/s\n", c.Via, c.Conns, c.Pipeline, c.PerSec)
		}
	}
	// Connect before the schedule starts: the first sends must not pay
	// for it (they would start late only because the pool was cold).
	if err := r.drv.Warm(ctx); err != nil {
		return nil, fmt.Errorf("loadgen: target not answering: %w", err)
	}
	r.estimateClock(ctx, sum)
	r.start = time.Now().Add(100 * time.Millisecond)
	sum.StartedAt = r.start.UTC()
	if cfg.OnStart != nil {
		cfg.OnStart(r.start)
	}
	var err error
	if r.led, err = ledger.CreateWith(cfg.RunDir, r.ledgerOptions()); err != nil {
		return nil, err
	}
	r.writePopulation(sum)
	return sum, nil
}

// drainDevices settles, then lets every device (whose goroutines devWG
// counts) drain to the end once drain closes, bounded by the drain
// timeout; on a target with an inbox, more rounds until nothing moves.
func (r *runner) drainDevices(ctx context.Context, sum *Summary, drain chan struct{}, devWG *sync.WaitGroup, stopDevs context.CancelFunc) {
	cfg := r.cfg
	r.prog.enter(PhaseSettle, 0, 0)
	select {
	case <-time.After(cfg.Settle):
	case <-ctx.Done():
	}
	drainStart := time.Now()
	r.prog.enter(PhaseDrain, 0, len(r.devs))
	close(drain)
	done := make(chan struct{})
	go func() { devWG.Wait(); close(done) }()
	drainEnd := drainStart.Add(cfg.DrainTimeout)
	select {
	case <-done:
		sum.Drain.Complete = ctx.Err() == nil
	case <-time.After(cfg.DrainTimeout):
		r.fail("final drain timed out after %s", cfg.DrainTimeout)
		stopDevs()
		<-done
	case <-ctx.Done():
		stopDevs()
		<-done
	}
	sum.Drain.Rounds = 1
	if sum.Drain.Complete && r.caps.Inbox {
		// Every device goroutine has returned: the runner owns the devices now.
		sum.Drain.Complete = r.quiesce(ctx, drainEnd, sum)
	}
	sum.Drain.Seconds = time.Since(drainStart).Seconds()
}

// witnesses reads what the target holds once the devices drained (the
// pull, store and history witnesses, the retention log, the conversation
// log of a target without an inbox) and notes what was or was not made.
func (r *runner) witnesses(ctx context.Context, sum *Summary) {
	cfg := r.cfg
	if !r.caps.Inbox {
		r.prog.enter(PhaseWitness, 0, 0)
		r.convEnd(ctx, sum)
	} else if ctx.Err() == nil {
		r.prog.enter(PhaseWitness, 0, len(r.users))
		sum.Drain.WitnessUIDs, sum.Drain.WitnessErrors = r.witness(ctx)
		r.note(ledger.Note{Check: "pull-witness", Made: ctx.Err() == nil, UIDs: sum.Drain.WitnessUIDs, Errors: sum.Drain.WitnessErrors})
		r.note(ledger.Note{Check: ledger.InboxTierCheck, Made: sum.Drain.Complete || sum.Drain.InboxBehind != "",
			Drained: sum.Drain.InboxBehind == "" && sum.Drain.Complete, Reason: sum.Drain.InboxBehind})
		r.storeWitness(ctx, sum)
		if cfg.Mix.On() {
			r.historyWitness(ctx, sum)
			r.retentionLog(ctx, sum)
		}
	} else {
		r.note(ledger.Note{Check: "pull-witness", Reason: "the run was cancelled before the witness"})
		r.note(ledger.Note{Check: "store-witness", Reason: "the run was cancelled before the store witness"})
	}
	r.probeNote(sum)
	if ctx.Err() == nil {
		r.queueLagAtEnd(ctx, sum)
	}
	sum.Evidence.Policy = r.ev.policyName()
	if cfg.Mix.On() {
		sum.Mix = r.mixN.summary(cfg.Mix)
	}
}

// finish fills the summary's counts, rates and latencies (st: the pacer's,
// loadEnd: the load's length), closes the ledger and writes summary.json.
func (r *runner) finish(ctx context.Context, sum *Summary, st schedule.Stats, loadEnd time.Duration) (*Summary, error) {
	cfg := r.cfg
	sum.OK, sum.Fail, sum.Unknown = r.m.ok.Load(), r.m.fail.Load(), r.m.unknown.Load()
	sum.Retries, sum.Deliveries, sum.NotSent = r.m.retries.Load(), r.m.deliv.Load(), r.m.notSent.Load()
	sum.RetriedSends = r.m.retried.Load()
	sum.FailedByIntended = r.m.failedByIntended()
	sum.AckedByIntended = r.m.ackedByIntended()
	if loadEnd > 0 {
		sum.LoadSeconds = loadEnd.Seconds()
		// Rates over the send window (the shape's duration, or longer when
		// starts or ACKs came later), not over the wait for the last
		// answers: a server that keeps up then shows the offered rate.
		sum.StartSeconds = max(cfg.Duration, time.Duration(r.m.lastStart.Load())).Seconds()
		sum.AckSeconds = max(cfg.Duration, time.Duration(r.m.lastAck.Load())).Seconds()
		sum.StartedPerSec = float64(st.Started) / sum.StartSeconds
		sum.AchievedPerSec = float64(sum.OK) / sum.AckSeconds
	}
	for h := range nHist {
		sum.Latency[histNames[h]] = quantiles(r.m.total[h])
	}
	// The outcome reads the start delay's p99: after the latencies.
	sum.Outcome = sum.Outcomes(OverloadFraction)
	lerr := r.led.Close()
	files, _ := ledger.Files(cfg.RunDir)
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			sum.LedgerBytes += fi.Size()
		}
	}
	r.errMu.Lock()
	sum.Errors = append(sum.Errors, r.errs...)
	r.errMu.Unlock()
	if err := writeSummary(cfg.RunDir, sum); err != nil {
		return sum, err
	}
	if lerr != nil {
		return sum, lerr
	}
	return sum, ctx.Err()
}

// fail keeps a bounded list of run errors for the summary.
func (r *runner) fail(format string, args ...any) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if len(r.errs) < 100 {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
	}
}

// maxDrainRounds bounds the drain rounds (DrainTimeout bounds their time).
const maxDrainRounds = 50
