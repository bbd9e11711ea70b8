package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"imlab/ledger"
	"imlab/loadgen/device"
	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
	"imlab/loadgen/witness"
	"imlab/targets"
	"imlab/targets/drivers"
)

type runner struct {
	cfg   Config
	runID string
	drv   targets.Driver
	lab   targets.LabDriver // nil: the target offers no lab view of itself
	caps  targets.Capabilities
	wss   *device.WSSenders // nil unless SendVia is ViaWS
	convs *witness.ConvBook // nil unless the mix is on
	fleet *device.Fleet
	wit   *witness.Witness // made once the ledger is
	start time.Time
	led   *ledger.Ledger
	m     *metrics
	e2e   *e2eTracker
	prog  progress
	users []uint64
	devs  []*device.Device
	byUID map[uint64][]*device.Device
	// mine are the uids of this segment (all of them for a whole run);
	// devs holds only their devices, users and byUID the whole population.
	mine   []uint64
	groups []group
	errMu  sync.Mutex
	errs   summary.ErrorKinds
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
func Run(ctx context.Context, cfg Config) (*summary.Summary, error) {
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
		r.wss = device.NewWSSenders(devCtx, drv)
		defer r.wss.Close()
	}
	drain := make(chan struct{})
	var devWG sync.WaitGroup
	r.fleet.Start(devCtx, drain, r.led, r.start, r.devs, &devWG, r.prog.step)
	var live schedule.Live
	repStop := make(chan struct{})
	repDone := make(chan struct{})
	r.prog.enter(PhaseSending, 0, 0)
	go r.report(&live, sum, repStop, repDone)

	cpu0 := summary.MarkCPU()
	st, err := schedule.Run(ctx, cfg.Pacer, r.ticks(), r.start, &live, r.send)
	if sum.LabCPU = summary.CPUShare(cpu0, summary.MarkCPU()); sum.LabCPU != nil {
		sum.LabCPU.InProcess = slices.Clone(cfg.InProcess)
	}
	r.fleet.StopRevoker()
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
	r := &runner{cfg: cfg, runID: runID, drv: drv, m: newMetrics(16), e2e: newE2ETracker(), byUID: map[uint64][]*device.Device{}}
	r.lab, _ = drv.(targets.LabDriver)
	if err := r.checkCaps(); err != nil {
		return nil, err
	}
	if err := cfg.Mix.Offered(r.caps); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if cfg.Mix.On() {
		r.convs = witness.NewConvBook()
	}
	r.fleet = device.NewFleet(device.Env{PullLimit: cfg.PullLimit, ComeBackEvery: cfg.Pop.ComeBackEvery, CrashEvery: cfg.Pop.CrashEvery,
		AckEvery: cfg.AckEvery, Timeout: cfg.Timeout, Mix: cfg.Mix, Caps: r.caps, Parse: r.parseContent, Delivered: r.delivered,
		Pull: witness.Pull, Fail: r.fail})
	r.m.sizeIntended(cfg.Duration)
	return r, nil
}

// prepare makes everything the load needs before it starts: the
// population and groups, the summary's head, the generator's ceiling
// (when asked), a warm target, every device registered, the start time
// and the ledger.
func (r *runner) prepare(ctx context.Context) (*summary.Summary, error) {
	cfg := r.cfg
	if err := r.population(ctx); err != nil {
		return nil, err
	}
	sum := &summary.Summary{Format: summary.Format, RunID: r.runID, Target: cfg.Target, Shape: cfg.Shape.String(), SendVia: cfg.SendVia, Duration: cfg.Duration.String(), Latency: map[string]summary.Quantiles{}}
	r.segmentSummary(sum)
	sum.Generator = summary.GeneratorSummary{GOMAXPROCS: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU(), GOGC: gcPercent(), Conns: cfg.Conns,
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
	// Every device known to the target before the load, as a real
	// client's is before it goes offline (its first contact goes into the
	// ledger when the devices start).
	if !cfg.Unregistered {
		r.fleet.Register(ctx, r.devs, cfg.Conns)
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
	r.wit = witness.New(witness.Env{Drv: r.drv, Lab: r.lab, Ledger: r.led, Start: r.start, Parse: r.parseContent, Fail: r.fail, Step: r.prog.step})
	r.writePopulation(sum)
	return sum, nil
}

// drainDevices settles, then lets every device (whose goroutines devWG
// counts) drain to the end once drain closes, bounded by the drain
// timeout; on a target with an inbox, more rounds until nothing moves.
func (r *runner) drainDevices(ctx context.Context, sum *summary.Summary, drain chan struct{}, devWG *sync.WaitGroup, stopDevs context.CancelFunc) {
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
func (r *runner) witnesses(ctx context.Context, sum *summary.Summary) {
	cfg := r.cfg
	if !r.caps.Inbox {
		r.prog.enter(PhaseWitness, 0, 0)
		if n := r.fleet.FinalMissed(); n > 0 {
			sum.Drain.Complete = false
			r.fail("final drain: %d devices could not take what they missed", n)
		}
		r.wit.ConvLog(ctx, sum)
	} else if ctx.Err() == nil {
		r.prog.enter(PhaseWitness, 0, len(r.users))
		sum.Drain.WitnessUIDs, sum.Drain.WitnessErrors = r.wit.Inboxes(ctx, r.mine)
		r.note(ledger.Note{Check: "pull-witness", Made: ctx.Err() == nil, UIDs: sum.Drain.WitnessUIDs, Errors: sum.Drain.WitnessErrors})
		r.note(ledger.Note{Check: ledger.InboxTierCheck, Made: sum.Drain.Complete || sum.Drain.InboxBehind != "",
			Drained: sum.Drain.InboxBehind == "" && sum.Drain.Complete, Reason: sum.Drain.InboxBehind})
		r.wit.Stores(ctx, sum, r.mine)
		if cfg.Mix.On() {
			r.wit.History(ctx, sum, r.convs, cfg.DrainTimeout)
			r.wit.Retention(ctx, sum, func(uid uint64) bool { return r.byUID[uid] != nil })
		}
	} else {
		r.note(ledger.Note{Check: "pull-witness", Reason: "the run was cancelled before the witness"})
		r.note(ledger.Note{Check: "store-witness", Reason: "the run was cancelled before the store witness"})
	}
	r.wit.ProbeNote(sum, cfg.ProbeFraction)
	if ctx.Err() == nil {
		r.wit.QueueLagAtEnd(ctx, sum)
	}
	sum.Evidence.Policy = r.wit.Policy()
	if cfg.Mix.On() {
		sum.Mix = r.fleet.MixSummary()
	}
}

// finish fills the summary's counts, rates and latencies (st: the pacer's,
// loadEnd: the load's length), closes the ledger and writes summary.json.
func (r *runner) finish(ctx context.Context, sum *summary.Summary, st schedule.Stats, loadEnd time.Duration) (*summary.Summary, error) {
	cfg := r.cfg
	sum.OK, sum.Fail, sum.Unknown = r.m.ok.Load(), r.m.fail.Load(), r.m.unknown.Load()
	sum.Refused = r.m.refused.Load()
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
	sum.Outcome = sum.Outcomes(summary.OverloadFraction)
	lerr := r.led.Close()
	files, _ := ledger.Files(cfg.RunDir)
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			sum.LedgerBytes += fi.Size()
		}
	}
	r.errMu.Lock()
	sum.Errors = append(sum.Errors, r.errs.Lines()...)
	r.errMu.Unlock()
	if err := summary.Write(cfg.RunDir, sum); err != nil {
		return sum, err
	}
	if lerr != nil {
		return sum, lerr
	}
	return sum, ctx.Err()
}

// note writes n into the ledger.
func (r *runner) note(n ledger.Note) { r.wit.Note(n) }

// delivered is the devices' hook (device.Env.Delivered): every message a
// device stored counts as a delivery; its first copy of one of this run's
// sends is an end-to-end sample, recorded once the send's outcome is
// known (ACKed sends only).
func (r *runner) delivered(dev uint32, tick uint64, late time.Duration, e2e bool) {
	if e2e {
		r.e2e.stored(r.m.lane(int(dev)), tick, late)
	}
	r.m.deliv.Add(1)
}

// fail counts a run error for the summary, by kind (summary.ErrorKinds:
// a hundred device timeouts make one line with a count and examples).
func (r *runner) fail(format string, args ...any) {
	for _, a := range args {
		if err, ok := a.(error); ok && refusal(err) {
			r.m.refused.Add(1)
		}
	}
	msg := fmt.Sprintf(format, args...)
	r.errMu.Lock()
	defer r.errMu.Unlock()
	r.errs.Add(msg)
}

// maxDrainRounds bounds the drain rounds (DrainTimeout bounds their time).
const maxDrainRounds = 50
