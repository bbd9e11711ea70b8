package capacity

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"imlab/capacity/cpuwatch"
	"imlab/capacity/lablag"
	"imlab/checker"
	"imlab/ledger"
	"imlab/loadgen"
	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
)

// Step phases.
const (
	PhaseRamp   = "ramp"
	PhaseBisect = "bisect"
	PhaseRepeat = "repeat"
	// PhaseStepDown: below a rate whose repeat broke, until one holds
	// (which is then repeated).
	PhaseStepDown = "step-down"
)

// Limits a broken step is put down to.
const (
	LimitServer    = "server"
	LimitGenerator = "generator"
	// LimitCredentials: the target refused the lab's credentials and
	// ACKed nothing (summary.CredentialsRefused): nothing of the server
	// was measured, and the search ends.
	LimitCredentials = "credentials"
)

// ProcCost is one watched process's CPU over a step's measured window.
type ProcCost struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// CPUSeconds is user + system time used in the window; Cores the same
	// per second of wall time (1.0 = one core busy).
	CPUSeconds *float64 `json:"cpu_s"`
	Cores      *float64 `json:"cores"`
	// USPerMsg and USPerRow are CPU-µs per ACKed send and per inbox row.
	USPerMsg *float64 `json:"cpu_us_per_msg"`
	USPerRow *float64 `json:"cpu_us_per_row"`
	Err      string   `json:"error,omitempty"`
}

// Step is one rate tried. A nil figure was not measured.
type Step struct {
	Index         int     `json:"index"`
	Phase         string  `json:"phase"`
	OfferedPerSec float64 `json:"offered_per_sec"`
	// Window counts: sends whose intended time is in the measured window.
	Attempts uint64 `json:"attempts"`
	OK       uint64 `json:"ok"`
	Fail     uint64 `json:"fail"`
	Unknown  uint64 `json:"unknown"`
	// AckedPerSec is ACKed sends of the window per second of the window.
	AckedPerSec *float64 `json:"acked_per_sec"`
	// AckP50Ms, AckP99Ms: ACK latency from the intended send time.
	AckP50Ms *float64 `json:"ack_p50_ms"`
	AckP99Ms *float64 `json:"ack_p99_ms"`
	// ServiceP99Ms: actual send to ACK; SendDelayP99Ms: intended to
	// actual send (the generator's own lateness).
	ServiceP99Ms *float64 `json:"service_p99_ms"`
	// ServiceP99StepMs: the same over every ACKed send of the step, the
	// warm-up included: what the diagnosis of a step stopped early (before
	// its window's sends were ACKed) rests on.
	ServiceP99StepMs *float64 `json:"service_p99_step_ms"`
	// AckP50HalvesMs is the ACK p50 of the window's first and second
	// halves: a latency that keeps growing through the window is a queue
	// that grows, a rate that is not sustainable however short the step.
	AckP50HalvesMs [2]*float64 `json:"ack_p50_halves_ms"`
	SendDelayP99Ms *float64    `json:"send_delay_p99_ms"`
	// LateFraction: sends of the whole step that started more than the
	// pacer's LateAfter after their intended time, or never (missed).
	// Missed counts the sends the generator never started while the step
	// ran; NotStarted the sends of its schedule's rest when it was stopped
	// early (never started, and no lateness of the generator's). Either
	// way they have no outcome: ErrorRate and UnknownRate are fractions
	// of the window's sends that started (Attempts).
	LateFraction *float64 `json:"late_fraction"`
	Missed       uint64   `json:"missed"`
	NotStarted   uint64   `json:"not_started,omitempty"`
	ErrorRate    *float64 `json:"error_rate"`
	UnknownRate  *float64 `json:"unknown_rate"`
	// LagS is the largest consumer lag age over LagPolls complete polls.
	LagS     *float64 `json:"lag_s"`
	LagPolls int      `json:"lag_polls"`
	// LagGroups is each consumer group's largest lag age at the first and
	// the last complete poll of the window (two polls at least): a lag that
	// grows through the window is a pipeline that does not keep up.
	LagGroups []GroupLag `json:"lag_groups,omitempty"`
	// BacklogAtStartS is the largest lag age when the step began, set when
	// the backlog of the steps before it did not fall below the search's
	// SettleLag within SettleMax (BacklogGroup names the group): the step
	// shared the target with that backlog's drain.
	BacklogAtStartS *float64 `json:"backlog_at_start_s,omitempty"`
	BacklogGroup    string   `json:"backlog_group,omitempty"`
	// RowsPerMsg: inbox rows per ACKed send (the checker's witness pulls).
	RowsPerMsg *float64   `json:"rows_per_msg"`
	CPU        []ProcCost `json:"cpu"`
	// GeneratorCPUShare is the generator's CPU in the measured window as a
	// fraction of the machine's (its cores over the machine's CPUs): how
	// much of the machine the target did not have. Nil: not measured.
	GeneratorCPUShare *float64 `json:"generator_cpu_share"`
	// GeneratorOverHalf: the generator took more than half of the
	// machine's CPU in the window; the step measured a target that had less
	// than half of the machine.
	GeneratorOverHalf bool `json:"generator_over_half,omitempty"`
	// Valid is the checker's verdict on the step's ledger (nil: not
	// checked).
	Valid *bool `json:"valid"`
	Held  bool  `json:"held"`
	// Broken lists why the step did not hold; Limit whose limit it was.
	// GeneratorBehind: the generator fell behind its schedule in a step
	// put down to the server (both broke it; the verdict says so).
	Broken          []string `json:"broken,omitempty"`
	Limit           string   `json:"limit,omitempty"`
	GeneratorBehind bool     `json:"generator_behind,omitempty"`
	StoppedEarly    string   `json:"stopped_early,omitempty"`
	// refused: the step's load had no ACK and answers 401/403
	// (summary.CredentialsRefused); it ends the search.
	refused error
	Seconds float64 `json:"seconds"`
	// RestCores is the rest of the machine in the measured window: the
	// cores busy beyond the watched processes (nil: not measured).
	RestCores *float64 `json:"rest_cores,omitempty"`
	// LoadAverage is the machine's at the step's start and end; Busy the
	// BUSY warning (stepBusy).
	LoadAverage *LoadAverage `json:"load_average,omitempty"`
	Busy        string       `json:"busy,omitempty"`
	RunDir      string       `json:"run_dir"`
	Errors      []string     `json:"errors,omitempty"`
}

// Early-stop thresholds (see the package doc).
const (
	brokenSeconds   = 3
	brokenAckFactor = 3
	brokenErrFactor = 10
	brokenErrFloor  = 0.05
	// stepMargin is added to a step's deadline beyond its own phases.
	stepMargin = 15 * time.Second
)

// watcher sees the step's seconds: it samples CPU at the window's edges
// and stops the step when the SLO is clearly broken. Called from
// loadgen's reporter goroutine; mu guards what the step reads after.
type watcher struct {
	mu                sync.Mutex
	slo               SLO
	warm, end         int // window rows are warm < T <= end
	procs             *cpuwatch.Watch
	cpu0, cpu1        *cpuwatch.Sample
	windowOK          uint64
	missed            uint64 // sends missed in the rows before the step was stopped
	streak            int
	stopped           string
	cancel            context.CancelFunc
	maxErrs, maxAckUS float64
	// inWindow is set while the measured window runs (lag polls count).
	inWindow atomic.Bool
}

func (w *watcher) second(row summary.Second) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if row.T == w.warm {
		s := w.procs.Sample()
		w.cpu0 = &s
		w.inWindow.Store(true)
	}
	if row.T > w.warm && row.T <= w.end {
		w.windowOK += row.OK
	}
	if w.stopped == "" {
		w.missed += row.Missed
	}
	if row.T == w.end {
		s := w.procs.Sample()
		w.cpu1 = &s
		w.inWindow.Store(false)
	}
	// The warm-up absorbs a cold start (new users' first rows, pools
	// filling): only measured seconds can stop a step.
	if w.stopped != "" || row.T <= w.warm {
		return
	}
	why := ""
	att := row.OK + row.Fail + row.Unknown
	switch {
	case row.Started > 0 && row.OK == 0:
		why = "sends started and none ACKed (stalled)"
	case w.maxAckUS > 0 && row.Response.Count > 0 && float64(row.Response.P99) > w.maxAckUS:
		why = fmt.Sprintf("ACK p99 %s beyond %d x the limit", time.Duration(row.Response.P99)*time.Microsecond, brokenAckFactor)
	case att > 0 && float64(row.Fail+row.Unknown)/float64(att) > w.maxErrs:
		why = fmt.Sprintf("%.1f%% of sends failed or unknown", 100*float64(row.Fail+row.Unknown)/float64(att))
	}
	if why == "" {
		w.streak = 0
		return
	}
	w.streak++
	if w.streak >= brokenSeconds {
		w.stopped = fmt.Sprintf("at t=%ds: %s for %d seconds", row.T, why, brokenSeconds)
		w.cancel()
	}
}

// runStep runs one rate and judges it.
func (s *search) runStep(ctx context.Context, phase string, rate float64) *Step {
	c := s.cfg
	idx := len(s.res.Steps)
	st := &Step{Index: idx, Phase: phase, OfferedPerSec: rate,
		RunDir: filepath.Join(c.OutDir, "steps", fmt.Sprintf("%02d-%s-%.0f", idx, phase, rate))}
	began, la := time.Now(), loadStart()
	defer func() {
		st.Seconds = time.Since(began).Seconds()
		la.finish()
		st.LoadAverage, st.Busy = la, stepBusy(st.RestCores, la, s.res.Machine.CPUs)
	}()

	lc := c.Load
	lc.Shape = schedule.Constant{PerSec: rate}
	lc.Duration = c.WarmUp + c.Step
	lc.RunDir = st.RunDir
	lc.CeilingFor = 0
	lc.Progress = nil
	lc.Pop.UIDBase = c.Load.Pop.UIDBase + uint64(idx*c.Load.Pop.Users)
	lc.Pop.GroupBase = c.Load.Pop.GroupBase + uint64(idx*max(c.Load.Pop.Groups, 1))
	bound := lc.Duration + lc.Pacer.Grace + lc.Settle + lc.DrainTimeout + stepMargin
	sctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	w := &watcher{slo: c.SLO, warm: int(c.WarmUp / time.Second), end: int((c.WarmUp + c.Step) / time.Second), procs: s.watch, cancel: cancel,
		maxErrs: brokenErrFloor, maxAckUS: float64(brokenAckFactor*c.SLO.ackLimit()) / float64(time.Microsecond)}
	if c.SLO.Errors != nil {
		w.maxErrs = max(brokenErrFloor, brokenErrFactor**c.SLO.Errors)
	}
	lc.OnSecond = w.second

	lagCtx, stopLag := context.WithCancel(sctx)
	lagDone := make(chan lablag.Result, 1)
	go func() { lagDone <- lablag.Poll(lagCtx, c.Load.Target, w.inWindow.Load) }()

	sum, runErr := loadgen.Run(sctx, lc)
	stopLag()
	lag := <-lagDone

	w.mu.Lock()
	st.StoppedEarly = w.stopped
	cpu0, cpu1, windowOK, missed := w.cpu0, w.cpu1, w.windowOK, w.missed
	w.mu.Unlock()
	if runErr != nil && st.StoppedEarly == "" {
		if sctx.Err() != nil && ctx.Err() == nil {
			st.StoppedEarly = fmt.Sprintf("the step's deadline (%s) passed", bound)
		}
		st.Errors = append(st.Errors, "load: "+runErr.Error())
	}
	if sum != nil {
		st.Errors = append(st.Errors, sum.Errors...)
		st.refused = sum.CredentialsRefused()
		st.Missed = sum.Pacer.Missed
		if st.StoppedEarly != "" && sum.Pacer.Canceled {
			// A stopped step's pacer counts its schedule's rest missed: those
			// sends were not started because the step was stopped, not
			// because the generator fell behind.
			st.Missed = min(missed, sum.Pacer.Missed)
			st.NotStarted = sum.Pacer.Missed - st.Missed
		}
		if n := sum.Pacer.Started + st.Missed; n > 0 {
			st.LateFraction = ptr(float64(sum.Pacer.Late+st.Missed) / float64(n))
		}
	}
	if err := s.window(st); err != nil {
		st.Errors = append(st.Errors, err.Error())
	}
	if lag.Polls > 0 {
		st.LagS, st.LagPolls = ptr(lag.Max), lag.Polls
		st.LagGroups = lagGroups(lag)
	}
	if st.StoppedEarly == "" && runErr == nil && c.Check {
		s.check(st)
	}
	st.CPU = costs(s.procs, cpu0, cpu1, windowOK, st.RowsPerMsg)
	if rest, ok := cpuwatch.Rest(cpu0, cpu1); ok {
		st.RestCores = &rest
	}
	st.GeneratorCPUShare, st.GeneratorOverHalf = generatorShare(st.CPU, s.res.Machine.CPUs)
	s.judge(st)
	return st
}

// window reads the step's ledger: outcomes and latency of the sends
// whose intended time is in the measured window.
func (s *search) window(st *Step) error {
	from, to := s.cfg.WarmUp, s.cfg.WarmUp+s.cfg.Step
	resp, svc, svcAll, delay := newHist(), newHist(), newHist(), newHist()
	halves := [2]*hdr.Histogram{newHist(), newHist()}
	mid := from + s.cfg.Step/2
	_, err := ledger.ReadDir(st.RunDir, func(_ int, r *ledger.Record) error {
		if r.Kind != ledger.KindAttempt {
			return nil
		}
		a := r.Attempt
		if a.Outcome == ledger.OK {
			_ = svcAll.RecordValue(max(1, (a.Ended - a.Started).Microseconds()))
		}
		if a.Intended < from || a.Intended >= to {
			return nil
		}
		st.Attempts++
		_ = delay.RecordValue(max(1, (a.Started - a.Intended).Microseconds()))
		switch a.Outcome {
		case ledger.OK:
			st.OK++
			_ = resp.RecordValue(max(1, (a.Ended - a.Intended).Microseconds()))
			h := 0
			if a.Intended >= mid {
				h = 1
			}
			_ = halves[h].RecordValue(max(1, (a.Ended - a.Intended).Microseconds()))
			_ = svc.RecordValue(max(1, (a.Ended - a.Started).Microseconds()))
		case ledger.Fail:
			st.Fail++
		default:
			st.Unknown++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	if st.Attempts > 0 {
		st.ErrorRate = ptr(float64(st.Fail+st.Unknown) / float64(st.Attempts))
		st.UnknownRate = ptr(float64(st.Unknown) / float64(st.Attempts))
		st.SendDelayP99Ms = ptr(float64(delay.ValueAtQuantile(99)) / 1000)
	}
	if st.StoppedEarly == "" && st.Attempts > 0 {
		st.AckedPerSec = ptr(float64(st.OK) / s.cfg.Step.Seconds())
	}
	if st.OK > 0 {
		st.AckP50Ms = ptr(float64(resp.ValueAtQuantile(50)) / 1000)
		st.AckP99Ms = ptr(float64(resp.ValueAtQuantile(99)) / 1000)
		st.ServiceP99Ms = ptr(float64(svc.ValueAtQuantile(99)) / 1000)
	}
	if svcAll.TotalCount() > 0 {
		st.ServiceP99StepMs = ptr(float64(svcAll.ValueAtQuantile(99)) / 1000)
	}
	for i, h := range halves {
		if h.TotalCount() > 0 {
			st.AckP50HalvesMs[i] = ptr(float64(h.ValueAtQuantile(50)) / 1000)
		}
	}
	return nil
}

func newHist() *hdr.Histogram { return hdr.New(1, int64(time.Hour/time.Microsecond), 3) }

// check runs the checker on the step's ledger.
func (s *search) check(st *Step) {
	v, err := checker.Check(st.RunDir)
	if err != nil {
		st.Errors = append(st.Errors, "checker: "+err.Error())
		return
	}
	st.Valid = ptr(v.Valid)
	if ok := v.Attempts["ok"]; ok > 0 && v.Witnessed > 0 {
		st.RowsPerMsg = ptr(float64(v.Witnessed) / float64(ok))
	}
}

// costs turns the window's CPU samples into per-message figures.
func costs(procs []Proc, c0, c1 *cpuwatch.Sample, ok uint64, rowsPerMsg *float64) []ProcCost {
	out := make([]ProcCost, 0, len(procs))
	for _, p := range procs {
		pc := ProcCost{Name: p.Name, PID: p.PID}
		switch {
		case c0 == nil || c1 == nil:
			pc.Err = "the window did not complete: no CPU sample"
		case c0.Errs[p.PID] != "" || c1.Errs[p.PID] != "":
			pc.Err = c0.Errs[p.PID] + c1.Errs[p.PID]
		default:
			used := c1.Used[p.PID] - c0.Used[p.PID]
			wall := c1.At.Sub(c0.At)
			pc.CPUSeconds = ptr(used.Seconds())
			if wall > 0 {
				pc.Cores = ptr(used.Seconds() / wall.Seconds())
			}
			if ok > 0 {
				us := float64(used.Microseconds()) / float64(ok)
				pc.USPerMsg = ptr(us)
				if rowsPerMsg != nil && *rowsPerMsg > 0 {
					pc.USPerRow = ptr(us / *rowsPerMsg)
				}
			}
		}
		out = append(out, pc)
	}
	return out
}

// generatorShare is the generator's share of the machine's CPU (cores over
// cpus) and whether it passed half; nil when its cores were not measured.
func generatorShare(cpu []ProcCost, cpus int) (*float64, bool) {
	for _, pc := range cpu {
		if pc.Name == generatorProc && pc.Cores != nil && cpus > 0 {
			sh := *pc.Cores / float64(cpus)
			return ptr(sh), sh > 0.5
		}
	}
	return nil, false
}

// judge decides whether the step held and, if not, whose limit it was.
func (s *search) judge(st *Step) {
	c := s.cfg
	st.Broken = c.SLO.judge(st)
	if why := growing(st, c.SLO.ackLimit()); why != "" {
		st.Broken = append(st.Broken, why)
	}
	if why := falling(st, c.Step); why != "" {
		st.Broken = append(st.Broken, why)
	}
	if st.StoppedEarly != "" {
		st.Broken = append([]string{"stopped early " + st.StoppedEarly}, st.Broken...)
	}
	if st.Attempts == 0 {
		st.Broken = append(st.Broken, "no send in the measured window")
	}
	why := behind(st, c.Step)
	if why != "" {
		st.Broken = append(st.Broken, why)
	}
	if c.Check && st.StoppedEarly == "" {
		switch {
		case st.Valid == nil:
			st.Broken = append(st.Broken, "not checked: the checker could not judge the ledger")
		case !*st.Valid:
			st.Broken = append(st.Broken, "the checker's verdict is INVALID")
		}
	}
	st.Held = len(st.Broken) == 0
	if st.Held {
		return
	}
	st.Limit = LimitServer
	if st.refused != nil {
		st.Limit = LimitCredentials
		return
	}
	if s.generatorLimited(st) {
		st.Limit = LimitGenerator
	}
	st.GeneratorBehind = st.Limit == LimitServer && why != ""
}

// MaxSendDelay bounds the window's send delay p99 (intended to actual
// send) of a step that holds, and MinSendDelayBound is the least bound a
// short step gets: a generator further behind its schedule than a tenth
// of the step (within these) did not offer the step's rate, whatever the
// server answered (an SLO with no latency term would not see it
// otherwise: sends spread late over more seconds arrive at a lower rate).
const (
	MaxSendDelay      = time.Second
	MinSendDelayBound = 200 * time.Millisecond
)

// sendDelayBound is the send delay p99 a step of this length may show.
func sendDelayBound(step time.Duration) time.Duration {
	return max(MinSendDelayBound, min(MaxSendDelay, step/10))
}

// behind says why the generator did not offer the step's rate, or "".
func behind(st *Step, step time.Duration) string {
	lim := sendDelayBound(step)
	switch {
	case st.Missed > 0:
		return fmt.Sprintf("the generator fell behind: %d sends never started, the step did not offer its rate", st.Missed)
	case st.SendDelayP99Ms != nil && *st.SendDelayP99Ms > float64(lim)/float64(time.Millisecond):
		return fmt.Sprintf("the generator fell behind: send delay p99 %.0fms > %s, the step did not offer its rate", *st.SendDelayP99Ms, lim)
	}
	return ""
}

// lateShare is the share of a step's sends that started late (or never)
// beyond which the generator fell behind its own schedule.
const lateShare = 0.5

// generatorLimited: the step offered 90% of the generator's ceiling or
// more, or its sends started late (or it fell behind its schedule:
// behind) while the server answered in time
// (service time within the ACK limit, errors within the SLO). A step
// stopped early may have no ACK of its window: the service time of the
// whole step stands in.
func (s *search) generatorLimited(st *Step) bool {
	c := s.cfg
	if s.res.Ceiling != nil && st.OfferedPerSec >= 0.9*s.res.Ceiling.PerSec {
		return true
	}
	lim := ms(c.SLO.ackLimit())
	late := st.Missed > 0 || (st.LateFraction != nil && *st.LateFraction >= lateShare) ||
		(lim > 0 && st.SendDelayP99Ms != nil && *st.SendDelayP99Ms > lim/2) || behind(st, c.Step) != ""
	svc := st.ServiceP99Ms
	if svc == nil {
		svc = st.ServiceP99StepMs
	}
	serverOK := svc != nil && (lim == 0 || *svc <= lim) && (st.ErrorRate == nil || c.SLO.Errors == nil || *st.ErrorRate <= *c.SLO.Errors)
	return late && serverOK
}

// Growth thresholds: the second half's ACK p50 above growthFactor times
// the first half's and above growthFloor of the ACK limit (the median,
// not a tail quantile: a shared machine's spikes are not a queue).
const (
	growthFactor = 2
	growthFloor  = 0.25
)

// growing says whether the ACK latency grew through the window (a queue
// building up), or "".
func growing(st *Step, limit time.Duration) string {
	a, b := st.AckP50HalvesMs[0], st.AckP50HalvesMs[1]
	if a == nil || b == nil || limit <= 0 {
		return ""
	}
	floor := growthFloor * ms(limit)
	if *b > growthFactor**a && *b > floor {
		return fmt.Sprintf("not stable: ACK p50 grew from %.1fms to %.1fms through the window (a growing queue)", *a, *b)
	}
	return ""
}

// GroupLag is one consumer group's largest lag age at the first and the
// last complete poll of a step's window.
type GroupLag struct {
	Group  string  `json:"group"`
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
}

// lagGroups is the per-group lag at the window's first and last poll,
// sorted by group (nil with fewer than two polls).
func lagGroups(l lablag.Result) []GroupLag {
	if l.Polls < 2 {
		return nil
	}
	var out []GroupLag
	for g, end := range l.Last {
		start, ok := l.First[g]
		if !ok {
			continue
		}
		out = append(out, GroupLag{Group: g, StartS: start, EndS: end})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// Lag-growth thresholds: a group whose lag age grew through the window by
// more than lagGrowthShare of the window and at least lagGrowthFloor
// consumed less than about three quarters of what arrived (the age of the
// oldest record not consumed grows by the window times the share left
// behind).
const (
	lagGrowthShare = 0.25
	lagGrowthFloor = 2 * time.Second
)

// falling says whether some consumer group fell behind through the window
// (its lag grew), or "": the rate is not sustainable by the whole
// pipeline, whatever the ACK path shows.
func falling(st *Step, window time.Duration) string {
	lim := max(lagGrowthFloor, time.Duration(lagGrowthShare*float64(window))).Seconds()
	var why []string
	for _, g := range st.LagGroups {
		if g.EndS-g.StartS > lim {
			why = append(why, fmt.Sprintf("group %s's lag grew from %.1fs to %.1fs", g.Group, g.StartS, g.EndS))
		}
	}
	if len(why) == 0 {
		return ""
	}
	return "the pipeline fell behind: " + strings.Join(why, ", ") + " through the window (its consumers do not keep up at this rate)"
}

func ptr[T any](v T) *T { return &v }

// removeLedger deletes a step's ledger files when asked not to keep them.
func removeLedger(dir string) error {
	fs, err := ledger.Files(dir)
	if err != nil {
		return err
	}
	for _, f := range fs {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	return nil
}
