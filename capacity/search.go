package capacity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"imlab/capacity/costfit"
	"imlab/capacity/cpuwatch"
	"imlab/capacity/lablag"
	"imlab/loadgen"
	"imlab/loadgen/clientmix"
	"imlab/loadgen/summary"
)

// Named limits.
const (
	MaxSteps   = 40
	MaxStepDur = 10 * time.Minute
	// MaxRate bounds To.
	MaxRate = 10_000_000
)

// Config of a search.
type Config struct {
	// Load is the template of every step's run: target, secret,
	// population, transport, timeouts. Shape, Duration, RunDir, the uid
	// and group ranges (one fresh range per step), CeilingFor, Progress
	// and OnSecond are set per step.
	Load loadgen.Config
	SLO  SLO
	// From and To bound the rates tried (sends/s).
	From, To float64
	// Growth multiplies the rate between ramp steps (> 1).
	Growth float64
	// Resolution ends the bisection when (broke - held) <= Resolution *
	// held (0.1: within 10%).
	Resolution float64
	// WarmUp (not counted) and Step (measured), whole seconds.
	WarmUp, Step time.Duration
	// MaxSteps bounds the steps, the repeat included.
	MaxSteps int
	// CoolDown is the pause after a step that broke, so the target's
	// backlog drains before the next step.
	CoolDown time.Duration
	// SettleMax bounds the wait before each step after the first for
	// every consumer group's lag (GET /v1/lab/lag) to fall to SettleLag,
	// so that a step does not inherit the backlog of the ones before it
	// (0: no wait). A backlog still there when it passes is recorded on
	// the step (Step.BacklogAtStartS). No wait on a target without the
	// lag route.
	SettleMax, SettleLag time.Duration
	// CeilingFor measures the generator's ceiling this long first (0: no
	// ceiling; the generator-limit diagnosis then rests on lateness only).
	CeilingFor time.Duration
	// Check runs the checker on every step; a step counts only with a
	// valid verdict.
	Check bool
	// Procs are the processes whose CPU is read (the generator is added).
	Procs []Proc
	// OutDir receives result.json, the step run directories, report.html.
	OutDir string
	// KeepLedgers keeps every step's ledger (default: removed once the
	// step is judged; the step's summary.json stays).
	KeepLedgers bool
	// Progress receives one line per step (nil: none).
	Progress io.Writer
	// Notes are copied into the result (what the caller could not watch).
	Notes []string
	// Backends says what serves the target's storage, as the caller knows
	// it (a scenario run: compose's summary, "mysql=local mariadbd …");
	// copied into the result ("": not known to the search).
	Backends string
}

// generatorProc names this process among the watched ones.
const generatorProc = "generator"

// The pacer of a search's steps, unlike imlab load's: it waits for each
// send on the runtime's timers (DefaultSpin 0, no sleep in the kernel
// before each send), so a send starts up to about a millisecond after its
// intended time, and a send counts late past DefaultLateAfter, beyond that
// jitter. A step is judged on an ACK p99 of tens of milliseconds and up;
// the kernel sleep's precision (about 10 µs) cost a wake-up of a thread
// per send: about a tenth of the generator's CPU per ACKed message, and
// with DefaultProcs a seventh together (RESULTS.md, "The pacer's cost in
// a capacity step"). --spin and --late-after set both.
const (
	DefaultSpin      = 0
	DefaultLateAfter = 2 * time.Millisecond
)

// DefaultProcs is the generator's GOMAXPROCS in a search: half the CPUs,
// at least one; the other half is the target's on a shared machine.
// imlab load's twice the CPUs (loadgen.DefaultProcs) keeps the pacer's
// thread close to a core on a loaded machine; in a capacity step every
// processor beyond what the generator keeps busy costs wake-ups of idle
// threads (futex, the scheduler's search for work) for every goroutine
// made ready. At 2,400 sends/s on 2 CPUs one processor against two took
// the generator from 107-115 to 95-103 CPU-µs per ACKed message, the
// server's cost the same (RESULTS.md, "One processor for the
// generator"); the step's generator ceiling (--ceiling) and its late
// sends say when a rate needs more (--procs).
func DefaultProcs() int { return max(1, runtime.NumCPU()/2) }

// DefaultConfig is a search of 200..20000 sends/s against target.
func DefaultConfig(target, secret, outDir string) Config {
	lc := loadgen.DefaultConfig(target, secret, "")
	lc.Pop.Users, lc.Pop.DevicesPerUser, lc.Pop.Groups, lc.Pop.GroupShare = 500, 1, 0, 0
	lc.Pop.Online, lc.Pop.Crashy = 0.5, 0
	lc.Settle, lc.DrainTimeout = time.Second, 20*time.Second
	lc.Pacer.SpinWindow, lc.Pacer.LateAfter = DefaultSpin, DefaultLateAfter
	slo, _ := ParseSLO(DefaultSLO)
	return Config{Load: lc, SLO: slo, From: 200, To: 20000, Growth: 2, Resolution: 0.1,
		WarmUp: 3 * time.Second, Step: 10 * time.Second, MaxSteps: 16, CoolDown: 3 * time.Second,
		SettleMax: DefaultSettleMax, SettleLag: DefaultSettleLag, CeilingFor: 2 * time.Second, Check: true, OutDir: outDir}
}

// Validate checks every limit.
func (c Config) Validate() error {
	whole := func(d time.Duration) bool { return d%time.Second == 0 }
	switch {
	case c.From <= 0 || c.To < c.From || c.To > MaxRate:
		return fmt.Errorf("%w: rates %g..%g: want 0 < from <= to <= %d", ErrInvalid, c.From, c.To, MaxRate)
	case c.Growth <= 1 || c.Growth > 10:
		return fmt.Errorf("%w: growth %g: want 1 < growth <= 10", ErrInvalid, c.Growth)
	case c.Resolution <= 0 || c.Resolution >= 1:
		return fmt.Errorf("%w: resolution %g: want 0 < resolution < 1", ErrInvalid, c.Resolution)
	case c.WarmUp < time.Second || c.Step < 2*time.Second || !whole(c.WarmUp) || !whole(c.Step) || c.WarmUp+c.Step > MaxStepDur:
		return fmt.Errorf("%w: warm-up %s and step %s: want whole seconds, warm-up >= 1s, step >= 2s, together <= %s", ErrInvalid, c.WarmUp, c.Step, MaxStepDur)
	case c.MaxSteps < 2 || c.MaxSteps > MaxSteps:
		return fmt.Errorf("%w: max steps %d: want 2..%d", ErrInvalid, c.MaxSteps, MaxSteps)
	case c.CeilingFor < 0 || c.CoolDown < 0 || c.CoolDown > time.Minute:
		return fmt.Errorf("%w: ceiling duration >= 0 and cool-down in 0..1m", ErrInvalid)
	case c.SettleMax < 0 || c.SettleMax > MaxSettle || (c.SettleMax > 0 && c.SettleLag <= 0):
		return fmt.Errorf("%w: settle-max %s and settle-lag %s: want settle-max in 0..%s and settle-lag > 0", ErrInvalid, c.SettleMax, c.SettleLag, MaxSettle)
	case c.OutDir == "":
		return fmt.Errorf("%w: no output directory", ErrInvalid)
	case c.SLO.String() == "":
		return fmt.Errorf("%w: empty SLO", ErrInvalid)
	case len(c.Procs) > MaxProcs:
		return fmt.Errorf("%w: %d processes: at most %d", ErrInvalid, len(c.Procs), MaxProcs)
	case c.Load.Pop.UIDBase+uint64(c.MaxSteps*c.Load.Pop.Users) > loadgen.MaxUID:
		return fmt.Errorf("%w: %d steps of %d users from uid %d pass uid %d", ErrInvalid, c.MaxSteps, c.Load.Pop.Users, c.Load.Pop.UIDBase, loadgen.MaxUID)
	}
	lc := c.Load
	lc.RunDir = c.OutDir
	lc.Duration = c.WarmUp + c.Step
	return lc.Validate()
}

// Result is written as OUTDIR/result.json.
type Result struct {
	// Kind identifies the file ("imlab-capacity"), Format its layout
	// (ResultFormat).
	Kind      string    `json:"kind"`
	Format    string    `json:"format"`
	Target    string    `json:"target"`
	SLO       string    `json:"slo"`
	StartedAt time.Time `json:"started_at"`
	Seconds   float64   `json:"seconds"`
	From      float64   `json:"from_per_sec"`
	To        float64   `json:"to_per_sec"`
	WarmUpS   float64   `json:"warm_up_s"`
	StepS     float64   `json:"step_s"`
	// Mix is the client mix every step's devices ran (clientmix.Mix; the
	// zero Mix: send-only, devices send, pull and receive pushes only).
	Mix clientmix.Mix `json:"mix"`
	// Ceiling is the generator's own ceiling, measured first.
	Ceiling *summary.Ceiling `json:"generator_ceiling,omitempty"`
	// Sustainable is the highest rate that held the SLO twice (nil: none).
	Sustainable *float64 `json:"sustainable_per_sec"`
	// Broke is the lowest rate that broke it (nil: none did up to To).
	Broke *float64 `json:"broke_per_sec"`
	// Knee is the highest rate before the ACK p99 first exceeded twice
	// the p99 of the lowest rate tried and a quarter of the SLO's ACK
	// limit (nil: no knee within the steps); KneeRule says it with the
	// figures it rests on.
	Knee     *float64 `json:"knee_per_sec"`
	KneeRule string   `json:"knee_rule,omitempty"`
	// Limit says what bounded the answer: server, generator, or "to" (the
	// search's upper bound held).
	Limit string `json:"limit"`
	// Answer says it in words.
	Answer string `json:"answer"`
	// MaxSteps is the search's step budget (--max-steps); OutOfSteps says
	// that it ran out before the search ended: without a sustainable rate
	// the search then confirmed none, which is not that none held.
	MaxSteps   int  `json:"max_steps"`
	OutOfSteps bool `json:"out_of_steps,omitempty"`
	// Cost at the sustainable rate, CPU-µs per ACKed message per process.
	Cost map[string]float64 `json:"cpu_us_per_msg_at_sustainable,omitempty"`
	// Marginal is each process's CPU against the ACKed rate over the
	// steps: what one more message per second costs.
	Marginal []Marginal `json:"marginal"`
	Procs    []Proc     `json:"processes"`
	// Backends is Config.Backends ("": not known to the search).
	Backends string  `json:"backends,omitempty"`
	Machine  Machine `json:"machine"`
	// Generator is how the generator ran: its GOMAXPROCS and its pacer.
	Generator Generator `json:"generator"`
	// LoadAverage is the machine's at the search's start and end (nil:
	// not readable here); Machine.Busy flags a busy start.
	LoadAverage *LoadAverage `json:"load_average,omitempty"`
	Steps       []*Step      `json:"steps"`
	Notes       []string     `json:"notes,omitempty"`
	Errors      []string     `json:"errors,omitempty"`
	Cancelled   bool         `json:"cancelled,omitempty"`
}

// Generator is how the generator's process and pacer ran the steps.
type Generator struct {
	GOMAXPROCS int `json:"gomaxprocs"`
	// SpinMs is the pacer's kernel sleep before each send (0: the
	// runtime's timers only), LateAfterMs how late a send counts late.
	SpinMs      float64 `json:"spin_ms"`
	LateAfterMs float64 `json:"late_after_ms"`
}

// String says it in one line.
func (g Generator) String() string { return "Generator: " + g.Text() }

// Text is the line without its name: GOMAXPROCS, the pacer, late after.
func (g Generator) Text() string {
	pacer := "the runtime's timers (a send starts about 1 ms after its intended time at most on an idle machine, later on a busy one: see late % and the send delay p99)"
	if g.SpinMs > 0 {
		pacer = fmt.Sprintf("a kernel sleep for the last %g ms before each send", g.SpinMs)
	}
	return fmt.Sprintf("GOMAXPROCS %d, pacing on %s; late: started more than %g ms after the intended time", g.GOMAXPROCS, pacer, g.LateAfterMs)
}

// Machine says where the figures were measured.
type Machine struct {
	CPUs     int    `json:"cpus"`
	Hostname string `json:"hostname"`
	Note     string `json:"note"`
	// Busy is the BUSY warning when the 1-minute load average was above
	// the CPU count as the search started ("": it was not, or unknown).
	Busy string `json:"busy,omitempty"`
}

// MachineNote is printed beside every cost figure.
const MachineNote = "every watched process (the generator, the server, its databases) shares this machine's cores; the figures are what each process used here, not what it would use alone"

// errOutOfSteps: MaxSteps ran before the search ended.
var errOutOfSteps = errors.New("capacity: out of steps")

type search struct {
	cfg   Config
	procs []Proc
	watch *cpuwatch.Watch
	res   *Result
}

// Search runs the search and writes OUTDIR/result.json. It returns the
// result also with an error (a cancelled search keeps the steps it ran).
func Search(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("capacity: %w", err)
	}
	host, _ := os.Hostname()
	s := &search{cfg: cfg, procs: append([]Proc{{Name: generatorProc, PID: os.Getpid()}}, cfg.Procs...)}
	pids := make([]int, len(s.procs))
	for i, p := range s.procs {
		pids[i] = p.PID
	}
	s.watch = cpuwatch.New(pids)
	s.res = &Result{Kind: "imlab-capacity", Format: ResultFormat, Target: cfg.Load.Target, SLO: cfg.SLO.String(), StartedAt: time.Now().UTC(),
		From: cfg.From, To: cfg.To, MaxSteps: cfg.MaxSteps, WarmUpS: cfg.WarmUp.Seconds(), StepS: cfg.Step.Seconds(), Mix: cfg.Load.Mix, Procs: s.procs,
		Backends: cfg.Backends, Machine: Machine{CPUs: runtime.NumCPU(), Hostname: host, Note: MachineNote},
		Generator: Generator{GOMAXPROCS: runtime.GOMAXPROCS(0), SpinMs: ms(cfg.Load.Pacer.SpinWindow), LateAfterMs: ms(cfg.Load.Pacer.LateAfter)}, Steps: []*Step{}, Notes: slices.Clone(cfg.Notes)}
	s.res.LoadAverage = loadStart()
	began := time.Now()
	err := s.run(ctx)
	s.res.LoadAverage.finish()
	s.res.Machine.Busy = searchBusy(s.res.Steps, s.res.LoadAverage, s.res.Machine.CPUs)
	if errors.Is(err, errOutOfSteps) {
		// Not a failure of the search: the answer is what the steps show,
		// and says that the search was cut short.
		s.res.Notes = append(s.res.Notes, err.Error())
		s.res.OutOfSteps, err = true, nil
	}
	s.res.Seconds = time.Since(began).Seconds()
	if err != nil {
		s.res.Errors = append(s.res.Errors, err.Error())
	}
	s.res.Cancelled = ctx.Err() != nil
	s.conclude()
	if werr := s.write(); werr != nil {
		return s.res, werr
	}
	return s.res, err
}

func (s *search) run(ctx context.Context) error {
	c := s.cfg
	if c.SLO.Lag != nil {
		if _, ok := lablag.Once(ctx, &http.Client{Timeout: 2 * time.Second}, c.Load.Target); !ok {
			return fmt.Errorf("%w: the SLO has a lag term but %s%s gave no complete answer: lag cannot be measured", ErrInvalid, c.Load.Target, lablag.Path)
		}
	}
	if c.CeilingFor > 0 {
		ceil, err := loadgen.MeasureCeiling(ctx, loadgen.CeilingConfig{Secret: c.Load.Secret, Via: c.Load.SendVia, Conns: c.Load.Conns,
			Pipeline: c.Load.Pipeline, PipelineDelay: c.Load.PipelineDelay, Workers: c.Load.Pacer.Workers, For: c.CeilingFor})
		if err != nil {
			return fmt.Errorf("capacity: generator ceiling: %w", err)
		}
		s.res.Ceiling = &ceil
		s.progress("generator ceiling (no-op endpoint, same client): %.0f sends/s", ceil.PerSec)
	}
	// Ramp.
	var held, broke float64
	for rate := c.From; ; rate = math.Min(rate*c.Growth, c.To) {
		st, err := s.step(ctx, PhaseRamp, rate)
		if err != nil {
			return err
		}
		if !st.Held {
			broke = rate
			break
		}
		held = rate
		if rate >= c.To {
			break
		}
	}
	// Bisect.
	for held > 0 && broke > 0 && broke-held > c.Resolution*held && len(s.res.Steps) < c.MaxSteps-1 {
		mid := math.Round((held + broke) / 2)
		st, err := s.step(ctx, PhaseBisect, mid)
		if err != nil {
			return err
		}
		if st.Held {
			held = mid
		} else {
			broke = mid
		}
	}
	// Repeat the highest rate that held. When the repeat breaks, step down
	// by the resolution until a rate holds, and repeat that one: only a
	// rate that held twice is the answer.
	for held > 0 {
		st, err := s.step(ctx, PhaseRepeat, held)
		if err != nil {
			return err
		}
		if st.Held {
			return nil
		}
		for {
			held = stepDown(held, c.Resolution)
			if held < c.From {
				return nil
			}
			st, err := s.step(ctx, PhaseStepDown, held)
			if err != nil {
				return err
			}
			if st.Held {
				break
			}
		}
	}
	return nil
}

// stepDown is the next rate below held: held less the resolution,
// rounded, and at least one send/s less (at low rates the rounding would
// otherwise give held again, and the search would repeat it to its last
// step).
func stepDown(held, resolution float64) float64 {
	next := math.Round(held * (1 - resolution))
	if next >= held {
		next = held - 1
	}
	return next
}

// step runs one step unless the search is out of steps or cancelled.
func (s *search) step(ctx context.Context, phase string, rate float64) (*Step, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(s.res.Steps) >= s.cfg.MaxSteps {
		return nil, fmt.Errorf("%w (%d) before the search ended", errOutOfSteps, s.cfg.MaxSteps)
	}
	var backlog *backlog
	if len(s.res.Steps) > 0 {
		backlog = s.settle(ctx)
	}
	st := s.runStep(ctx, phase, rate)
	if backlog != nil {
		st.BacklogAtStartS, st.BacklogGroup = &backlog.age, backlog.group
	}
	s.res.Steps = append(s.res.Steps, st)
	if !s.cfg.KeepLedgers {
		if err := removeLedger(st.RunDir); err != nil {
			st.Errors = append(st.Errors, "removing the ledger: "+err.Error())
		}
	}
	s.progress("%s", stepLine(st))
	if st.refused != nil {
		// Not the server's limit: the search cannot measure it at all.
		return st, fmt.Errorf("capacity: step at %.0f sends/s: %w", rate, st.refused)
	}
	if !st.Held && s.cfg.CoolDown > 0 {
		select {
		case <-time.After(s.cfg.CoolDown):
		case <-ctx.Done():
		}
	}
	if err := ctx.Err(); err != nil {
		return st, err
	}
	return st, nil
}

func (s *search) progress(format string, a ...any) {
	if s.cfg.Progress != nil {
		fmt.Fprintf(s.cfg.Progress, format+"\n", a...)
	}
}

// conclude derives the answer from the steps: the sustainable rate (held
// on a repeat, and on its first run), the lowest rate that broke, the
// knee, whose limit it was, and the cost at the sustainable rate.
func (s *search) conclude() {
	r := s.res
	heldTwice := map[float64]int{}
	var sust *Step
	for _, st := range r.Steps {
		if st.Held {
			heldTwice[st.OfferedPerSec]++
		}
	}
	for _, st := range r.Steps {
		if st.Held && st.Phase == PhaseRepeat && heldTwice[st.OfferedPerSec] >= 2 && (sust == nil || st.OfferedPerSec > sust.OfferedPerSec) {
			sust = st
		}
	}
	var broke *Step
	for _, st := range r.Steps {
		if !st.Held && (broke == nil || st.OfferedPerSec < broke.OfferedPerSec) && (sust == nil || st.OfferedPerSec > sust.OfferedPerSec) {
			broke = st
		}
	}
	if sust != nil {
		r.Sustainable = ptr(sust.OfferedPerSec)
		r.Cost = map[string]float64{}
		for _, pc := range sust.CPU {
			if pc.USPerMsg != nil {
				r.Cost[pc.Name] = *pc.USPerMsg
			}
		}
	}
	r.Knee, r.KneeRule = knee(r.Steps, s.cfg.SLO.ackLimit())
	r.Marginal = marginal(r.Procs, r.Steps)
	switch {
	case broke != nil:
		r.Broke = ptr(broke.OfferedPerSec)
		r.Limit = broke.Limit
	case sust != nil && sust.OfferedPerSec >= r.To:
		r.Limit = "to"
	}
	r.Answer = answer(r, broke)
}

func answer(r *Result, broke *Step) string {
	var a string
	switch {
	case r.Sustainable == nil && len(r.Steps) == 0:
		return "no step ran"
	case r.Sustainable == nil && r.Limit == LimitCredentials:
		return fmt.Sprintf("nothing measured: at %.0f/s the target refused the lab's credentials (answers 401/403, no send ACKed)", broke.OfferedPerSec)
	case r.Sustainable == nil && r.OutOfSteps:
		a = unconfirmed(r)
	case r.Sustainable == nil:
		a = fmt.Sprintf("no rate from %.0f/s held the SLO (%s) on a repeat", r.From, r.SLO)
	default:
		a = fmt.Sprintf("sustainable %.0f sends/s within %s (held twice)", *r.Sustainable, r.SLO)
	}
	switch r.Limit {
	case LimitGenerator:
		a += fmt.Sprintf("; %.0f/s broke it, and that was the GENERATOR's limit, not the server's: the answer is a lower bound of the server's capacity", broke.OfferedPerSec)
	case LimitServer:
		a += fmt.Sprintf("; %.0f/s broke it (%s): the server's limit", broke.OfferedPerSec, joinShort(broke.Broken))
	case LimitCredentials:
		a += fmt.Sprintf("; at %.0f/s the target refused the lab's credentials (answers 401/403, no send ACKed): the search ended there", broke.OfferedPerSec)
	case "to":
		a += "; the search's upper bound (--to) held: the capacity is at least that"
	}
	if r.Ceiling != nil {
		a += fmt.Sprintf("; generator ceiling %.0f/s", r.Ceiling.PerSec)
	}
	return a
}

func joinShort(s []string) string {
	if len(s) > 2 {
		s = s[:2]
	}
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}

func (s *search) write() error {
	b, err := json.MarshalIndent(s.res, "", "  ")
	if err != nil {
		return fmt.Errorf("capacity: result json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.cfg.OutDir, ResultFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("capacity: %w", err)
	}
	fh, err := os.Create(filepath.Join(s.cfg.OutDir, ReportFile))
	if err != nil {
		return fmt.Errorf("capacity: %w", err)
	}
	werr := s.res.WriteHTML(fh)
	if cerr := fh.Close(); werr == nil && cerr != nil {
		werr = fmt.Errorf("capacity: %w", cerr)
	}
	return werr
}

// Output file names.
const (
	ResultFile = "result.json"
	ReportFile = "report.html"
)

// ResultFormat names the layout of result.json (Result.Format); its
// reader (package compare) refuses another.
const ResultFormat = "imlab-capacity-result/1"

// Marginal is a least-squares line of one process's cores against the
// ACKed rate (costfit.Marginal).
type Marginal = costfit.Marginal

// marginal fits every process over the steps that ran their whole window.
func marginal(procs []Proc, steps []*Step) []Marginal {
	out := make([]Marginal, 0, len(procs))
	for i, p := range procs {
		var xs, ys []float64
		for _, st := range steps {
			if st.StoppedEarly != "" || st.AckedPerSec == nil || i >= len(st.CPU) || st.CPU[i].Cores == nil {
				continue
			}
			xs, ys = append(xs, *st.AckedPerSec), append(ys, *st.CPU[i].Cores)
		}
		out = append(out, costfit.Line(p.Name, xs, ys))
	}
	return out
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
