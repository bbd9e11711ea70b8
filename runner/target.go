package runner

import (
	"context"
	"fmt"
	"imlab/runner/proc"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"imlab/chaos"
	"imlab/checker"
	"imlab/expect"
	"imlab/faults"
	"imlab/loadgen"
	"imlab/loadgen/summary"
	"imlab/result"
	"imlab/scenario"
)

// executeTarget carries out a file whose target block names a server the
// runner does not start from its own code (scenario.TargetSpec): the
// proxy in front of its database on the address its configuration names,
// its process from the user's command (started, stopped, killed and
// started again by the schedule), the load through its driver, and the
// checker with the liveness bound. Nothing of the reference server's
// topology (compose, Kafka, lag, repairs) is started or read.
func (r *run) executeTarget(ctx context.Context) error {
	t := r.f.Target
	bin, args, dir, skip := t.ResolveExec(os.LookupEnv)
	key, ok := os.LookupEnv(t.APIKeyEnvOr())
	if skip == "" && (!ok || key == "") {
		skip = fmt.Sprintf("target.api_key_env: %s is not set (the API key of the %s server the user brings)", t.APIKeyEnvOr(), t.Driver)
	}
	if skip != "" {
		r.res.Skipped = skip
		return nil
	}
	if err := r.startTarget(ctx, bin, args, dir); err != nil {
		return err
	}
	steps, err := r.targetSteps()
	if err != nil {
		return err
	}
	lc, err := r.loadConfig()
	if err != nil {
		return err
	}
	lc.TargetOptions = map[string]string{"apikey": key}
	lc.ProbeFraction = 0 // read-after-ACK probes are the reference server's lab routes
	r.targetSettings(lc, bin, args)
	return r.targetLoad(ctx, lc, steps)
}

// startTarget starts the proxy in front of the target's database (when
// the file names one) and the target's process from the user's command,
// its output to the process log.
func (r *run) startTarget(ctx context.Context, bin string, args []string, dir string) error {
	t := r.f.Target
	if d := t.Database; d != nil {
		px, err := chaos.StartProxiesOn(ctx, map[string]string{scenario.TargetDatabaseProxy: d.Upstream},
			map[string]string{scenario.TargetDatabaseProxy: d.Listen})
		if err != nil {
			return fmt.Errorf("scenarios: target.database: %w", err)
		}
		r.px = px
		r.onStop(func(context.Context) error { return px.Close() })
	}
	logPath := r.processLog(scenario.TargetServerProcess)
	logw, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("scenarios: target process log: %w", err)
	}
	r.onStop(func(context.Context) error { return logw.Close() })
	r.ext = &proc.External{Name: scenario.TargetServerProcess, Bin: bin, Args: args, Dir: dir, Addr: t.Address, ReadyPath: t.Ready.Path,
		ReadyFor: t.ReadyTimeoutOr(), StopTimeout: t.Exec.StopTimeoutOr(), LogW: logw, LogPath: logPath}
	if err := r.ext.Start(ctx); err != nil {
		return err
	}
	ext := r.ext
	r.onStop(func(ctx context.Context) error {
		if !ext.Running() {
			return nil
		}
		return ext.Stop(ctx)
	})
	return nil
}

// targetLoad runs the load with the fault schedule on its time base,
// heals the proxy, records the events and judges the ledger with the
// liveness bound.
func (r *run) targetLoad(ctx context.Context, lc loadgen.Config, steps []chaos.Step) error {
	// The schedule's time base is the load's start (the ledger's): a
	// server provisioned through its protocol takes a while to set up,
	// and a fault in the set-up would be no fault of the load.
	started := make(chan time.Time, 1)
	lc.OnStart = func(t time.Time) { started <- t }
	schedCh := make(chan schedOut, 1)
	schedCtx, stopSched := context.WithCancel(ctx)
	defer stopSched()
	go func() { // owned by targetLoad, which waits for schedCh below
		select {
		case base := <-started:
			ev, err := chaos.RunSchedule(schedCtx, base, steps)
			schedCh <- schedOut{ev, err}
		case <-schedCtx.Done():
			schedCh <- schedOut{}
		}
	}()
	sum, loadErr := loadgen.Run(ctx, lc)
	if loadErr != nil {
		stopSched()
	}
	so := <-schedCh
	var healErr error
	if r.px != nil {
		healCtx, cancelHeal := context.WithTimeout(context.Background(), proc.StopTimeout)
		healErr = r.px.HealAll(healCtx)
		cancelHeal()
	}
	var lastHeal time.Duration
	for _, e := range so.ev {
		r.res.Events = append(r.res.Events, result.FaultEvent{At: e.At.Seconds(), Fault: e.Fault, Action: e.Action, Err: e.Err, Affected: e.Affected})
		if e.Action == "heal" {
			lastHeal = max(lastHeal, e.At)
		}
		if e.Err != "" {
			r.res.Errors = append(r.res.Errors, fmt.Sprintf("fault %s %s at %.1fs: %s", e.Fault, e.Action, e.At.Seconds(), e.Err))
		}
	}
	if sum != nil {
		r.res.TimeBase = sum.StartedAt
		r.recordLoad(lc, sum)
	}
	switch {
	case loadErr != nil:
		return fmt.Errorf("scenarios: load: %w", loadErr)
	case so.err != nil:
		return fmt.Errorf("scenarios: fault schedule: %w", so.err)
	case healErr != nil:
		return fmt.Errorf("scenarios: heal proxies: %w", healErr)
	}
	opts := checker.Options{}
	if len(steps) > 0 {
		// The schedule's time base is the ledger's (the load's start).
		opts.Liveness = &checker.Liveness{Healed: lastHeal, Bound: r.f.Target.LivenessBoundOr()}
	}
	return r.judge(lc, sum, []checker.Source{{Dir: lc.RunDir}}, opts)
}

// recordLoad puts the load's summary into the result.
func (r *run) recordLoad(lc loadgen.Config, sum *summary.Summary) {
	r.res.LoadOffset = sum.StartedAt.Sub(r.res.TimeBase).Seconds()
	r.recordSends(lc, sum)
}

// recordSends puts the load's sends (per second, failures by intended
// time, retries, errors) into the result, on the time axis of LoadOffset.
func (r *run) recordSends(lc loadgen.Config, sum *summary.Summary) {
	r.res.RunDir = lc.RunDir
	r.res.AckSeconds = sum.AckSeconds
	retried := sum.RetriedSends
	r.res.RetriedSends = &retried
	late := sum.Pacer.Late
	r.res.LateSends, r.res.LateAfterMs = &late, float64(lc.Pacer.LateAfter)/float64(time.Millisecond)
	if d := sum.Latency["send_delay"]; d.Count > 0 {
		ms := float64(d.P99) / 1000
		r.res.StartDelayP99Ms = &ms
	}
	ok, failed := intendedSeconds(sum)
	for _, s := range sum.Timeline {
		sec := result.SendSecond{T: float64(s.T) + r.res.LoadOffset, Started: s.Started, OK: s.OK, Fail: s.Fail,
			Unknown: s.Unknown, Late: s.Late, AckP50: result.AckMs(s.OK, int64(s.Response.P50)), AckP99: result.AckMs(s.OK, int64(s.Response.P99))}
		if ok != nil {
			i := s.T - 1 // the row of second T counts what started in (T-1, T]
			var o, f uint64
			if i >= 0 && i < len(ok) {
				o = ok[i]
			}
			if i >= 0 && i < len(failed) {
				f = failed[i]
			}
			sec.IntendedOK, sec.IntendedFailed = &o, &f
		}
		r.res.Sends = append(r.res.Sends, sec)
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

// intendedSeconds are the load's ACKed and its failed or unknown sends per
// second of their intended time (index i: intended from i s after the
// start); nil when the summary did not record them.
func intendedSeconds(sum *summary.Summary) (ok, failed []uint64) {
	if sum.AckedByIntended == nil {
		return nil, nil
	}
	ok = sum.AckedByIntended
	for _, b := range sum.FailedByIntended {
		i := int(math.Floor(b.At + 1e-9))
		for len(failed) <= i {
			failed = append(failed, 0)
		}
		failed[i] += b.Fail + b.Unknown
	}
	return ok, failed
}

// judge runs the checker over srcs, writes the verdict and evaluates the
// file's expectations, expect.findings included.
func (r *run) judge(lc loadgen.Config, sum *summary.Summary, srcs []checker.Source, opts checker.Options) error {
	v, err := checker.CheckSourcesWith(srcs, opts)
	if err != nil {
		return fmt.Errorf("scenarios: checker: %w", err)
	}
	if err := v.Judge(expect.Allowances(r.f.Expect)); err != nil {
		return fmt.Errorf("scenarios: checker: %w", err)
	}
	if err := result.WriteFile(filepath.Join(r.cfg.OutDir, VerdictFile), func(w io.Writer) error { return result.WriteJSON(w, v) }); err != nil {
		return err
	}
	obs := expect.Observe(v, sum, nil, 0, lc)
	obs.Faults, obs.FaultMisses = len(r.reached), faultMisses(r.reached)
	obs.RepairsKnown = true
	r.res.Findings = expect.Findings(v)
	slim := *v
	slim.Findings, slim.Followed = nil, nil
	r.res.Verdict = &slim
	r.res.Checks = append(expect.Evaluate(r.f.Expect, obs), findingChecks(r.f.Expect.Findings, v)...)
	return nil
}

// findingChecks are expect.findings: each named finding made, with at
// least one message named.
func findingChecks(names []string, v *checker.Verdict) []result.Check {
	var out []result.Check
	for _, n := range names {
		f := v.Findings[n]
		got := "none"
		ok := false
		switch {
		case f == nil:
		case f.NotMade != "":
			got = "NOT MADE: " + f.NotMade
		case f.Count > 0:
			// A refused or missing message has no msg_id: the finding
			// names its conversations and, in its examples, the sends or
			// conv_seqs.
			got = fmt.Sprintf("%d: msg_ids %v convs %v; %s", f.Count, f.MsgIDs[:min(len(f.MsgIDs), 5)], f.Convs[:min(len(f.Convs), 5)],
				strings.Join(f.Examples[:min(len(f.Examples), 2)], "; "))
			ok = len(f.MsgIDs) > 0 || len(f.Convs) > 0
		}
		out = append(out, result.Check{Name: "finding_" + n, Want: "made, naming messages or conversations", Got: got, OK: ok})
	}
	return out
}

// targetSteps turns the file's faults into chaos steps on the external
// target: proxy faults on the database proxy, stop and kill on its
// process.
func (r *run) targetSteps() ([]chaos.Step, error) {
	env := faults.Env{Proxies: r.px,
		Process: func(name string) (faults.Process, bool) {
			if name != scenario.TargetServerProcess || r.ext == nil {
				return faults.Process{}, false
			}
			return faults.Process{Stop: r.ext.Stop, Kill: r.ext.Kill, Restart: r.ext.Restart}, true
		}}
	for i, x := range r.f.Faults {
		if x.Target == scenario.TargetDatabaseProxy && r.px == nil {
			return nil, fmt.Errorf("%w: faults[%d].target database needs target.database", scenario.ErrInvalid, i)
		}
	}
	return r.faultSteps(env)
}

// targetSettings records what the run ran against.
func (r *run) targetSettings(lc loadgen.Config, bin string, args []string) {
	t := r.f.Target
	r.res.Backends = "external target " + t.Driver
	r.setting("target", t.URL())
	r.setting("target_exec", strings.Join(append([]string{bin}, args...), " ")+" (log "+r.ext.LogPath+")")
	if d := t.Database; d != nil {
		r.setting("database", "proxy database@"+d.Listen+" -> "+d.Upstream)
	}
	r.setting("liveness_bound", t.LivenessBoundOr())
	r.setting("rate", lc.Shape.String())
	r.setting("duration", lc.Duration)
	r.populationSettings(lc.Pop)
	r.setting("settle", lc.Settle)
	r.setting("retries", lc.Retries)
	r.setting("send_timeout", lc.Timeout)
	if len(r.cfg.Defects) > 0 {
		r.setting("defects", "ignored: shipped defects are the reference server's")
	}
}
