package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	rtmetrics "runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"imlab/ledger"
	"imlab/loadgen/schedule"
	"imlab/targets"
	"imlab/targets/drivers"
	"imlab/targets/ref/noop"
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

// Ceiling is the generator's own limit, measured on a no-op endpoint.
type Ceiling struct {
	PerSec   float64 `json:"per_sec"`
	Requests uint64  `json:"requests"`
	Seconds  float64 `json:"seconds"`
	Via      string  `json:"via"`
	Conns    int     `json:"conns"`
	Pipeline int     `json:"pipeline,omitempty"`
	Workers  int     `json:"workers"`
}

// GeneratorSummary is how the generator ran: what its figures depend on.
type GeneratorSummary struct {
	GOMAXPROCS    int    `json:"gomaxprocs"`
	CPUs          int    `json:"cpus"`
	GOGC          int    `json:"gogc"` // -1: off
	Conns         int    `json:"conns"`
	Pipeline      int    `json:"pipeline"`
	PipelineConns int    `json:"pipeline_conns,omitempty"`
	PipelineDelay string `json:"pipeline_delay,omitempty"`
	Workers       int    `json:"workers"`
	MaxWorkers    int    `json:"max_workers"`
	// Senders and MaxQueued: the pacer's queued mode (0: off).
	Senders   int `json:"senders,omitempty"`
	MaxQueued int `json:"max_queued,omitempty"`
}

// CeilingConfig is what MeasureCeiling measures: the run's own transport.
type CeilingConfig struct {
	Secret        string
	Via           string // ViaHTTP (default) or ViaWS
	Conns         int
	Pipeline      int           // targets.SendPool.Pipeline (HTTP only)
	PipelineDelay time.Duration // targets.SendPool.PipelineDelay
	Workers       int
	For           time.Duration
}

// Summary is written to RUN_DIR/summary.json. AchievedPerSec is ACKed
// sends per second of the send window (AckSeconds); StartedPerSec counts
// every send started, whatever became of it (achieved_per_sec held that
// figure before). Outcome holds the fractions of ok, failed and unknown
// sends and whether they make the run OVERLOADED (Outcomes with
// OverloadFraction).
type Summary struct {
	// Format is SummaryFormat: ReadSummary refuses another.
	Format string `json:"format"`
	RunID  string `json:"run_id"`
	// Split: the segment of the run this process drove (1/1: the whole run).
	Split SegmentSummary `json:"split"`
	// QueueLag: the target's queue lag once the run ended (nil: not read).
	QueueLag   *QueueLagEnd      `json:"queue_lag_at_end,omitempty"`
	Target     string            `json:"target"`
	Shape      string            `json:"shape"`
	SendVia    string            `json:"send_via"`
	Duration   string            `json:"duration"`
	StartedAt  time.Time         `json:"started_at"`
	Population PopulationSummary `json:"population"`
	Ceiling    *Ceiling          `json:"generator_ceiling,omitempty"`
	Generator  GeneratorSummary  `json:"generator"`
	// LabCPU: the generator's share of the machine's CPU while it sent
	// (nil: not measured).
	LabCPU  *LabCPU        `json:"lab_cpu,omitempty"`
	Pacer   schedule.Stats `json:"pacer"`
	OK      uint64         `json:"ok"`
	Fail    uint64         `json:"fail"`
	Unknown uint64         `json:"unknown"`
	Retries uint64         `json:"retries"`
	// RetriedSends: sends that needed more than one try (a timeout or
	// other unknown outcome resent, a 429): whatever their final outcome,
	// the server did not answer them at the first try.
	RetriedSends uint64 `json:"retried_sends,omitempty"`
	// NotSent: sends (counted in Fail) that waited in the generator's
	// queue longer than one send timeout and were never transmitted: a
	// client gives up on a message it could not hand to the server in
	// time, so a server too slow for the offered rate ends the load phase
	// within a bound instead of stretching it by its backlog.
	NotSent        uint64  `json:"not_sent,omitempty"`
	Deliveries     uint64  `json:"deliveries"`
	AchievedPerSec float64 `json:"achieved_per_sec"`
	StartedPerSec  float64 `json:"started_per_sec"`
	LoadSeconds    float64 `json:"load_seconds"`
	// StartSeconds and AckSeconds are the windows StartedPerSec and
	// AchievedPerSec are over: the shape's duration, or until the last
	// start / the last ACK when that came later (LoadSeconds runs to the
	// last answer of any outcome, timeouts included).
	StartSeconds float64 `json:"start_seconds,omitempty"`
	AckSeconds   float64 `json:"ack_seconds,omitempty"`
	Outcome      Outcome `json:"outcome"`
	// FailedByIntended says when the failed, unknown and retried sends
	// were intended, per IntendedBin (bins without any left out): how they
	// line up with a run's faults (Fail and Unknown of the timeline count
	// by the second their outcome came in). Nil in summaries written
	// before it was recorded.
	FailedByIntended []IntendedFailures   `json:"failed_by_intended,omitempty"`
	Latency          map[string]Quantiles `json:"latency"`
	Timeline         []Second             `json:"timeline"`
	Drain            DrainSummary         `json:"drain"`
	Evidence         EvidenceSummary      `json:"evidence"`
	LedgerBytes      int64                `json:"ledger_bytes"`
	// Mix: the client mix's actions (nil: the mix was off).
	Mix    *MixSummary `json:"mix,omitempty"`
	Errors []string    `json:"errors,omitempty"`
}

// PopulationSummary counts the population.
type PopulationSummary struct {
	Users   int            `json:"users"`
	Devices map[string]int `json:"devices"`
	Groups  int            `json:"groups"`
	UIDs    [2]uint64      `json:"uids"`
}

// DrainSummary says whether every device reached the end.
type DrainSummary struct {
	Complete bool `json:"complete"`
	// Rounds of pulling every device to the end: a server still appending
	// after a round (fan-out lag, sends of unknown outcome that finish late)
	// gets another, Settle later.
	Rounds        int     `json:"rounds"`
	Seconds       float64 `json:"seconds"`
	WitnessUIDs   int     `json:"witness_uids"`
	WitnessErrors int     `json:"witness_errors"`
	// InboxBehind says what was still on its way to an inbox (queued,
	// or in the outbox) when the drain deadline passed; "" when the
	// inbox tier drained or the target shows no queue. A message missing
	// then may be late rather than lost, and the verdict says so.
	InboxBehind string `json:"inbox_behind,omitempty"`
}

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
	sum.Outcome = sum.Outcomes(OverloadFraction)
	for h := range nHist {
		sum.Latency[histNames[h]] = quantiles(r.m.total[h])
	}
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

// writeSummary writes s as RUN_DIR/summary.json, in SummaryFormat.
func writeSummary(dir string, s *Summary) error {
	s.Format = SummaryFormat
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("loadgen: summary: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, SummaryFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("loadgen: summary: %w", err)
	}
	return nil
}

// ReadSummary reads RUN_DIR/summary.json.
func ReadSummary(dir string) (*Summary, error) {
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	path := filepath.Join(dir, SummaryFile)
	var head struct {
		Format *string `json:"format"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("%w: %s: not a load summary: %v", ErrInvalid, path, err)
	}
	if head.Format != nil && *head.Format != SummaryFormat {
		return nil, fmt.Errorf("%w: %s: format %q, this imlab reads %q", ErrInvalid, path, *head.Format, SummaryFormat)
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
	}
	return &s, nil
}

// fail keeps a bounded list of run errors for the summary.
func (r *runner) fail(format string, args ...any) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if len(r.errs) < 100 {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
	}
}

func (r *runner) population(ctx context.Context) error {
	p := r.cfg.Pop
	rng := mrand.New(mrand.NewPCG(r.cfg.Seed, 0x1ab))
	for i := range p.Users {
		r.users = append(r.users, p.UIDBase+uint64(i))
	}
	n := p.Users * p.DevicesPerUser
	kinds := make([]ledger.DeviceKind, n)
	nOn := int(p.Online*float64(n) + 0.5)
	nCr := int(p.Crashy*float64(n) + 0.5)
	for i := range kinds {
		switch {
		case i < nOn:
			kinds[i] = ledger.Online
		case i < nOn+nCr:
			kinds[i] = ledger.Crashy
		default:
			kinds[i] = ledger.Offline
		}
	}
	rng.Shuffle(n, func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	for i := range n {
		uid := r.users[i/p.DevicesPerUser]
		did := "d" + strconv.Itoa(i%p.DevicesPerUser)
		sess, err := r.drv.Session(ctx, uid, did)
		if err != nil {
			return err
		}
		d := &device{r: r, idx: uint32(i), uid: uid, did: did, kind: kinds[i], sess: sess,
			rng: mrand.New(mrand.NewPCG(r.cfg.Seed, uint64(i)^0x5eed)), convs: map[uint64]*devConv{},
			phase: time.Duration(rng.Int64N(int64(max(p.ComeBackEvery, 1))))}
		r.devs = append(r.devs, d)
		r.byUID[uid] = append(r.byUID[uid], d)
	}
	var total float64
	for _, sw := range p.GroupSizes {
		total += sw.Weight
	}
	for g := range p.Groups {
		x := rng.Float64() * total
		size := p.GroupSizes[len(p.GroupSizes)-1].Size
		for _, sw := range p.GroupSizes {
			if x < sw.Weight {
				size = sw.Size
				break
			}
			x -= sw.Weight
		}
		size = min(size, p.Users)
		perm := rng.Perm(p.Users)[:size]
		members := make([]uint64, size)
		for i, ix := range perm {
			members[i] = r.users[ix]
		}
		sort.Slice(members, func(i, j int) bool { return members[i] < members[j] })
		r.groups = append(r.groups, group{id: p.GroupBase + uint64(g), members: members})
	}
	r.keepSegment()
	return nil
}

// createGroups provisions the population on the target. Every segment
// creates every group (creating one again with the same members is a
// no-op): a segment's users send to groups another segment owns, and
// segments start apart, so a group left to its owner could be sent to
// before it exists (a 404, counted failed).
func (r *runner) createGroups(ctx context.Context) error {
	p := targets.Population{Prefix: r.runID, Users: r.users}
	for _, g := range r.groups {
		p.Groups = append(p.Groups, targets.Group{ID: g.id, Members: g.members, CreatorDID: r.byUID[g.members[0]][0].did})
	}
	if err := r.drv.Provision(ctx, p); err != nil {
		return fmt.Errorf("loadgen: %w", err)
	}
	return nil
}

func (r *runner) writePopulation(sum *Summary) {
	ps := PopulationSummary{Users: len(r.users), Devices: map[string]int{}, Groups: len(r.groups),
		UIDs: [2]uint64{r.users[0], r.users[len(r.users)-1]}}
	for _, d := range r.devs {
		r.led.Shard(int(d.idx)).Device(ledger.Device{Dev: d.idx, UID: d.uid, Kind: d.kind, DID: d.did})
		ps.Devices[d.kind.String()]++
	}
	for i, g := range r.groups {
		if err := r.led.Shard(i).Group(ledger.Group{GroupID: g.id, Members: g.members}); err != nil {
			r.fail("%v", err)
		}
	}
	sum.Population = ps
}

// splitmix64 gives each tick its own reproducible choices.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// pick chooses sender device, conversation type and target for a tick.
func (r *runner) pick(tick uint64) (sender *device, convType uint8, target uint64) {
	h := splitmix64(r.cfg.Seed ^ tick*0x100000001b3)
	p := r.cfg.Pop
	if len(r.groups) > 0 && float64(h>>11)/(1<<53) < p.GroupShare {
		h = splitmix64(h)
		g := r.groups[h%uint64(len(r.groups))]
		h = splitmix64(h)
		uid := g.members[h%uint64(len(g.members))]
		ds := r.byUID[uid]
		return ds[(h>>32)%uint64(len(ds))], 2, g.id
	}
	h = splitmix64(h)
	from := h % uint64(len(r.users))
	h = splitmix64(h)
	to := h % uint64(len(r.users)-1)
	if to >= from {
		to++
	}
	ds := r.byUID[r.users[from]]
	return ds[(h>>32)%uint64(len(ds))], 1, r.users[to]
}

// content carries the run, the tick and the intended time so that a
// receiver can tell the send and the end-to-end latency.
func (r *runner) content(tick uint64, intended time.Duration) string {
	var b strings.Builder
	b.Grow(max(r.cfg.ContentSize, 48))
	b.WriteString("imlab:")
	b.WriteString(r.runID)
	b.WriteByte(':')
	b.WriteString(strconv.FormatUint(tick, 10))
	b.WriteByte(':')
	b.WriteString(strconv.FormatInt(int64(intended), 10))
	b.WriteByte(':')
	for b.Len() < r.cfg.ContentSize {
		b.WriteByte('x')
	}
	return b.String()
}

// parseContent returns the tick and intended offset of this run's content.
func (r *runner) parseContent(s string) (tick uint64, intended time.Duration, ok bool) {
	rest, found := strings.CutPrefix(s, "imlab:")
	if !found {
		return 0, 0, false
	}
	id, rest, _ := strings.Cut(rest, ":")
	if id != r.runID {
		return 0, 0, false
	}
	ts, rest, _ := strings.Cut(rest, ":")
	is, _, _ := strings.Cut(rest, ":")
	t, err1 := strconv.ParseUint(ts, 10, 64)
	in, err2 := strconv.ParseInt(is, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return t, time.Duration(in), true
}

// send is the pacer's handler: one logical send with bounded retries of the
// same client_msg_id, its outcome and latencies recorded.
func (r *runner) send(worker int, t schedule.Tick, started time.Duration) {
	sender, ct, target := r.pick(t.Idx)
	req := targets.SendReq{ClientMsgID: r.runID + "-" + strconv.FormatUint(t.Idx, 10), ConvType: ct, Content: r.content(t.Idx, t.Intended)}
	if ct == 2 {
		req.GroupID = target
	} else {
		req.ToUID = target
	}
	a := ledger.Attempt{Tick: t.Idx, Dev: sender.idx, ConvType: ct, Target: target, Intended: t.Intended, Started: started}
	l := r.m.lane(worker)
	// The start delay is known now: it goes into the second the send
	// started in, not the one its answer comes in (seconds later on a slow
	// server, which left a burst's own seconds without a start delay).
	l.record(hDelay, started-t.Intended)
	storeMax(&r.m.lastStart, int64(started))
	waited := time.Since(r.start) - started
	l.record(hQueue, waited)
	// Queued past one send timeout (the queued mode behind a slow server):
	// never transmitted, so definitely not stored.
	if waited > r.cfg.Timeout {
		a.Outcome = ledger.Fail
		r.m.notSent.Add(1)
	} else {
		r.tries(sender, &req, &a)
	}
	a.Ended = time.Since(r.start)
	r.count(l, &a)
	sh := r.led.Shard(worker)
	sh.Attempt(a)
	if a.Outcome == ledger.OK && r.convs != nil {
		r.convs.acked(sender.uid, ct, a.ConvID, a.ConvSeq)
		if r.rev != nil && r.revokeChosen(t.Idx) {
			r.offerRevoke(revokeReq{sender: sender, shard: r.led.Shard(int(sender.idx)), convID: a.ConvID, convSeq: a.ConvSeq})
		}
	}
	if a.Outcome == ledger.OK && r.probeChosen(t.Idx) {
		r.probe(sh, &a, sender)
	}
}

// tries makes the tries of one send until a definite answer, a refusal,
// or the retries or the send's deadline run out, and sets a's tries,
// status, outcome and (on an ACK) the message's place.
func (r *runner) tries(sender *device, req *targets.SendReq, a *ledger.Attempt) {
	deadline := a.Started + r.cfg.Timeout*time.Duration(r.cfg.Retries+2)
	// unknownTry: an earlier try of this send had no definite answer. On
	// a target without idempotent sends that try may have stored a
	// message of its own, so a later definite refusal says nothing of it:
	// the send's outcome is unknown, never failed.
	unknownTry := false
	for {
		a.Tries++
		ack, err := r.sendOnce(sender, a.Tick, req)
		if err == nil {
			a.Outcome, a.Status, a.MsgID, a.ConvID, a.ConvSeq = ledger.OK, 200, ack.MsgID, ack.ConvID, ack.ConvSeq
			return
		}
		var te *targets.Error
		if !errors.As(err, &te) {
			a.Outcome = ledger.Unknown
			return
		}
		a.Status = uint16(te.Status)
		now := time.Since(r.start)
		if te.Class == targets.Retryable && now+te.RetryAfter < deadline && a.Tries < 255 {
			time.Sleep(max(te.RetryAfter, 10*time.Millisecond))
			r.m.retries.Add(1)
			continue
		}
		if te.Class == targets.Failed || te.Class == targets.Retryable {
			a.Outcome = ledger.Fail
			if unknownTry && !r.caps.IdempotentSend {
				a.Outcome = ledger.Unknown
			}
			return
		}
		if int(a.Tries) > r.cfg.Retries || now >= deadline {
			a.Outcome = ledger.Unknown
			return
		}
		unknownTry = true
		r.m.retries.Add(1)
		time.Sleep(time.Duration(a.Tries) * 10 * time.Millisecond)
	}
}

// count adds a's outcome to the run's counters, the second it was
// intended in, and (an ACK) the response and service latencies on lane l.
func (r *runner) count(l *lane, a *ledger.Attempt) {
	sec := r.m.intended(a.Intended)
	if a.Tries > 1 {
		r.m.retried.Add(1)
		if sec != nil {
			sec.retried.Add(1)
		}
	}
	if sec != nil {
		switch a.Outcome {
		case ledger.Fail:
			sec.fail.Add(1)
		case ledger.Unknown:
			sec.unknown.Add(1)
		}
	}
	r.e2e.outcome(l, a.Tick, a.Outcome == ledger.OK)
	switch a.Outcome {
	case ledger.OK:
		r.m.ok.Add(1)
		storeMax(&r.m.lastAck, int64(a.Ended))
		l.record(hResponse, a.Ended-a.Intended)
		l.record(hService, a.Ended-a.Started)
	case ledger.Fail:
		r.m.fail.Add(1)
	default:
		r.m.unknown.Add(1)
	}
}

// sendOnce makes one try over the configured transport.
func (r *runner) sendOnce(sender *device, tick uint64, req *targets.SendReq) (targets.SendAck, error) {
	if r.wss == nil {
		return sender.sess.Send(context.Background(), req)
	}
	s, err := r.wss.get(sender.uid, int(tick%uint64(r.cfg.WSConnsPerUser)))
	if err != nil {
		return targets.SendAck{}, err
	}
	return s.Send(context.Background(), req, r.cfg.Timeout)
}

// report prints a progress line every second and keeps the timeline.
func (r *runner) report(live *schedule.Live, sum *Summary, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	var prev Second
	sec := 0
	for {
		select {
		case <-stop:
			r.m.swap()
			return
		case <-tk.C:
		}
		sec++
		h := r.m.swap()
		cur := Second{T: sec, Started: live.Started.Load(), OK: r.m.ok.Load(), Fail: r.m.fail.Load(), Unknown: r.m.unknown.Load(),
			Late: live.Late.Load(), Missed: live.Missed.Load(), Deliveries: r.m.deliv.Load(), Workers: live.Workers.Load(), Queued: live.Queued.Load()}
		row := Second{T: sec, Started: cur.Started - prev.Started, OK: cur.OK - prev.OK, Fail: cur.Fail - prev.Fail,
			Unknown: cur.Unknown - prev.Unknown, Late: cur.Late - prev.Late, Missed: cur.Missed - prev.Missed,
			Deliveries: cur.Deliveries - prev.Deliveries, Workers: cur.Workers, Queued: cur.Queued,
			Response: quantiles(h[hResponse]), SendDelay: quantiles(h[hDelay]), E2E: quantiles(h[hE2E])}
		prev = cur
		sum.Timeline = append(sum.Timeline, row)
		if r.cfg.OnSecond != nil {
			r.cfg.OnSecond(row)
		}
		if r.cfg.Progress == nil {
			continue
		}
		retried := r.m.retried.Load()
		if ph := r.prog.line(&r.cfg); ph != "" {
			fmt.Fprintf(r.cfg.Progress, "t=%3ds %s; ok=%d errors=%d (fail %d, unknown %d) retried=%d deliveries=%d/s\n",
				sec, ph, cur.OK, cur.Fail+cur.Unknown, cur.Fail, cur.Unknown, retried, row.Deliveries)
		} else {
			if sec == 1 {
				fmt.Fprintln(r.cfg.Progress, liveLegend(r.cfg.Pacer.LateAfter))
			}
			phase := fmt.Sprintf("sending %s/%s", min(time.Duration(sec)*time.Second, r.cfg.Duration), r.cfg.Duration)
			if time.Duration(sec)*time.Second > r.cfg.Duration {
				phase += ", waiting for the answers in flight"
			}
			// A second with nothing measured prints "-", never 0s.
			fmt.Fprintf(r.cfg.Progress, "t=%3ds %s started=%6d/s ok=%d ack_p99=%s e2e_p99=%s delay_p99=%s errors=%d (fail %d, unknown %d) retried=%d late=%d missed=%d workers=%d%s deliveries=%d/s\n",
				sec, phase, row.Started, cur.OK, p99Of(row.Response), p99Of(row.E2E), p99Of(row.SendDelay),
				cur.Fail+cur.Unknown, cur.Fail, cur.Unknown, retried, cur.Late, cur.Missed, cur.Workers, queuedNote(r.cfg.Pacer, cur.Queued), row.Deliveries)
		}
	}
}

// liveLegend explains the live line's figures once, before its first line.
func liveLegend(lateAfter time.Duration) string {
	return "live line, once a second: started = sends started in that second; ok, errors (fail + unknown) and retried " +
		"(sends that needed a second try: a resent timeout, a 429) count from the start; late = sends started more than " +
		lateAfter.String() + " after their intended time (the generator fell behind its schedule; their wait counts in the " +
		"latency), missed = never started; ack_p99, e2e_p99 and delay_p99 are of the second's sends (\"-\": none measured)"
}

// p99Of is a progress figure: the p99, or "-" when nothing was measured.
func p99Of(q Quantiles) string {
	if q.Count == 0 {
		return "-"
	}
	return fmtUS(q.P99)
}

// queuedNote is the progress line's queue length in the queued mode.
func queuedNote(c schedule.Config, queued int64) string {
	if c.Senders == 0 {
		return ""
	}
	return " queued=" + strconv.FormatInt(queued, 10)
}

func fmtUS(us int64) string { return (time.Duration(us) * time.Microsecond).String() }

// maxDrainRounds bounds the drain rounds (DrainTimeout bounds their time).
const maxDrainRounds = 50

// quiesce waits Settle and looks for inbox entries past what every device
// of the uid holds; while there are some, it pulls every device to the end
// again. It returns false when the server did not settle by deadline.
func (r *runner) quiesce(ctx context.Context, deadline time.Time, sum *Summary) bool {
	for {
		select {
		case <-time.After(r.cfg.Settle):
		case <-ctx.Done():
			return false
		}
		if late := r.waitInboxTier(ctx, deadline); late != "" {
			sum.Drain.InboxBehind = late
			r.fail("final drain: the inbox tier had not drained by the drain deadline (%s)", late)
			return false
		}
		behind, err := r.behind(ctx)
		if err != nil {
			r.fail("drain round %d: %v", sum.Drain.Rounds, err)
			return false
		}
		if behind == 0 {
			return true
		}
		if sum.Drain.Rounds >= maxDrainRounds || time.Now().After(deadline) {
			r.fail("final drain: %d uids still had new inbox entries after %d rounds", behind, sum.Drain.Rounds)
			return false
		}
		r.prog.enter(PhaseDrain, sum.Drain.Rounds, len(r.devs))
		sum.Drain.Rounds++
		r.forEach(ctx, len(r.devs), func(i int) error { r.devs[i].final(ctx); r.prog.step(); return nil })
	}
}

// behind counts uids whose inbox holds an entry past the chain of one of
// their devices (a one-entry pull by the witness device).
func (r *runner) behind(ctx context.Context) (int, error) {
	var mu sync.Mutex
	n := 0
	err := r.forEach(ctx, len(r.mine), func(i int) error {
		uid := r.mine[i]
		from := uint64(1<<64 - 1)
		for _, d := range r.byUID[uid] {
			from = min(from, d.chain)
		}
		ws, err := r.drv.Session(ctx, uid, WitnessDID)
		if err != nil {
			return err
		}
		pr, err := r.pull(ctx, ws, targets.PullOpts{Cursor: from, UseCursor: true, Limit: 1, Full: true})
		if err != nil {
			return fmt.Errorf("uid %d: %w", uid, err)
		}
		if len(pr.Msgs) > 0 {
			mu.Lock()
			n++
			mu.Unlock()
		}
		return nil
	})
	return n, err
}

// forEach runs f(0..n-1) on at most 32 goroutines and returns the first error.
func (r *runner) forEach(ctx context.Context, n int, f func(i int) error) error {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// witness pulls every uid's whole inbox from seq 0 and records it.
func (r *runner) witness(ctx context.Context) (uids, errs int) {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, uid := range r.mine {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := r.witnessOne(ctx, i, uid)
			r.prog.step()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				r.fail("witness uid %d: %v", uid, err)
				return
			}
			uids++
		}()
	}
	wg.Wait()
	return uids, errs
}

func (r *runner) witnessOne(ctx context.Context, i int, uid uint64) error {
	ws, err := r.drv.Session(ctx, uid, WitnessDID)
	if err != nil {
		return err
	}
	sh := r.led.Shard(i)
	var cursor uint64
	for {
		pr, err := r.pull(ctx, ws, targets.PullOpts{Cursor: cursor, UseCursor: true, Limit: targets.MaxPullLimit, Full: true})
		if err != nil {
			return err
		}
		for _, m := range pr.Msgs {
			tick, _, _ := r.parseContent(m.Content)
			sh.Witness(ledger.Witness{UID: uid, Seq: m.Seq, MsgID: m.MsgID, ConvID: m.ConvID, ConvSeq: m.ConvSeq, Tick: tick})
		}
		if !pr.HasMore || pr.NextCursor <= cursor {
			return nil
		}
		cursor = pr.NextCursor
	}
}

// pull fetches one page, waiting out 429s (Retry-After) and retrying
// transport errors, until ctx ends.
func (r *runner) pull(ctx context.Context, s targets.Session, o targets.PullOpts) (targets.PullPage, error) {
	return readRetry(ctx, maxReadTries, func() (targets.PullPage, error) { return s.Pull(ctx, o) })
}

// MeasureCeiling runs the generator's send path (over c.Via, with c.Conns
// connections, c.Pipeline) as fast as c.Workers can go against an
// in-process no-op endpoint for c.For and returns the rate it reached.
// Over WebSocket, the connections are shared by the workers.
func MeasureCeiling(ctx context.Context, c CeilingConfig) (Ceiling, error) {
	via, conns, workers, d := c.Via, c.Conns, c.Workers, c.For
	srv, err := noop.Start("127.0.0.1:0")
	if err != nil {
		return Ceiling{}, err
	}
	defer srv.Close()
	tc := targets.Config{Target: srv.URL(), Driver: targets.DriverRef, Secret: c.Secret, Conns: conns, Timeout: 5 * time.Second}
	if via != ViaWS && c.Pipeline > 0 {
		tc.SendPool = targets.SendPool{Own: true, Conns: conns, Pipeline: c.Pipeline, PipelineDelay: c.PipelineDelay}
	}
	drv, err := drivers.Open(tc)
	if err != nil {
		return Ceiling{}, err
	}
	defer drv.Close()
	sess, err := drv.Session(ctx, 1, "ceiling")
	if err != nil {
		return Ceiling{}, err
	}
	var senders []targets.Sender
	if via == ViaWS {
		for range min(conns, workers) {
			s, err := sess.DialSender(ctx)
			if err != nil {
				return Ceiling{}, err
			}
			defer s.Close()
			senders = append(senders, s)
		}
	}
	n, took := closedLoop(ctx, workers, d, func(w int, req *targets.SendReq) error {
		var err error
		if senders != nil {
			_, err = senders[w%len(senders)].Send(ctx, req, tc.Timeout)
		} else {
			_, err = sess.Send(ctx, req)
		}
		return err
	})
	el := took.Seconds()
	if via == "" {
		via = ViaHTTP
	}
	return Ceiling{PerSec: float64(n) / el, Requests: n, Seconds: el, Via: via, Conns: conns, Pipeline: tc.SendPool.Pipeline, Workers: workers}, ctx.Err()
}

// ceilingContent is the body of the sends that measure the generator (64
// bytes).
var ceilingContent = strings.Repeat("x", 64)

// closedLoop runs workers that call send back to back (worker w with a
// request of its own, a fresh client_msg_id each time) until d has passed
// or ctx ends, and returns how many sends succeeded and how long it took.
func closedLoop(ctx context.Context, workers int, d time.Duration, send func(w int, req *targets.SendReq) error) (uint64, time.Duration) {
	var n uint64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := targets.SendReq{ConvType: 1, ToUID: 2, Content: ceilingContent}
			var mine uint64
			for i := 0; ctx.Err() == nil && time.Now().Before(end); i++ {
				req.ClientMsgID = "c-" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				if send(w, &req) == nil {
					mine++
				}
			}
			mu.Lock()
			n += mine
			mu.Unlock()
		}()
	}
	wg.Wait()
	return n, time.Since(start)
}

// gcPercent reads the collector's target percentage (-1: off) without
// setting it.
func gcPercent() int {
	sample := []rtmetrics.Sample{{Name: "/gc/gogc:percent"}}
	rtmetrics.Read(sample)
	if sample[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	v := sample[0].Value.Uint64()
	if v == math.MaxUint64 { // GOGC=off
		return -1
	}
	return int(v)
}
