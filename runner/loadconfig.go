package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"

	"imlab/capacity"
	"imlab/chaos"
	"imlab/compose"
	"imlab/faults"
	"imlab/loadgen"
	"imlab/loadgen/schedule"
	"imlab/result"
	"imlab/scenario"
)

// buildSteps turns the fault specs into chaos steps.
func (r *run) buildSteps() ([]chaos.Step, error) {
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
				if s.Name == name {
					return faults.Process{Stop: s.StopFault, Kill: s.Kill, Restart: s.Restart}, true
				}
			}
			return faults.Process{}, false
		}}
	return r.faultSteps(env)
}

// faultSteps builds each of the file's faults in env, wrapped so that the
// run knows whether it reached its target, into the schedule's steps.
func (r *run) faultSteps(env faults.Env) ([]chaos.Step, error) {
	var steps []chaos.Step
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

// loadConfig is loadgen's config for the file: the load section's
// settings (scenario.LoadDefaults with what the file set) with the run's
// target, directory, rate shape (scaled when the run says so), group
// sizes and probe fraction, and what runs inside the runner beside it.
func (r *run) loadConfig() (loadgen.Config, error) {
	l := r.f.Load
	lc := l.Config
	lc.Target, lc.Secret, lc.RunDir = r.target(), r.cfg.Secret, filepath.Join(r.cfg.OutDir, result.LoadDir)
	var sh schedule.Shape = schedule.Constant{PerSec: 1}
	var err error
	if r.f.Kind == scenario.KindCapacity {
		// A template: the search sets every step's rate, length and
		// directory.
		lc.Duration = time.Second
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
	lc.Shape = sh
	if lc.Pop.GroupSizes, err = loadgen.ParseSizes(scenario.Or(l.GroupSizes, scenario.DefaultGroupSizes)); err != nil {
		return lc, fmt.Errorf("%w: load.group_sizes: %w", scenario.ErrInvalid, err)
	}
	lc.ProbeFraction = probeFraction(schedule.Count(lc.Shape, lc.Duration)) // short runs: probe more ACKs than a load run does
	// What shares the generator's process: its CPU figure says so.
	lc.Progress, lc.InProcess = r.cfg.Progress, r.inRunner()
	if err := lc.Validate(); err != nil {
		return lc, fmt.Errorf("%w: load: %w", scenario.ErrInvalid, err)
	}
	return lc, nil
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

// generatorSetting is the "generator" setting: the load's connections,
// pool and send timeout, and how it paced: the pacer's spin for a run's
// load; for a capacity search, whose pacer is its own (CapacitySpec.Search),
// what the search's result says its steps ran with (gen; nil before the
// search ran: where its page says it).
func generatorSetting(lc loadgen.Config, search bool, gen *capacity.Generator) string {
	pool := fmt.Sprintf("max workers %d", lc.Pacer.MaxWorkers)
	if lc.Pacer.Senders > 0 {
		pool = fmt.Sprintf("queued: %d senders, at most %d sends queued", lc.Pacer.Senders, lc.Pacer.MaxQueued)
	}
	head := fmt.Sprintf("conns %d, pipeline %d on %d conns, %s", lc.Conns, lc.Pipeline, lc.PipelineConns, pool)
	switch {
	case gen != nil:
		return fmt.Sprintf("%s, send timeout %s; the capacity search's steps: %s (%s, generator)", head, lc.Timeout, gen.Text(), filepath.Join(CapacityDir, capacity.ResultFile))
	case search:
		return fmt.Sprintf("%s, send timeout %s; the capacity search paces on its own: its page says how (%s)", head, lc.Timeout, filepath.Join(CapacityDir, capacity.ReportFile))
	}
	return fmt.Sprintf("%s, pacer spin %s, send timeout %s", head, lc.Pacer.SpinWindow, lc.Timeout)
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
		r.setting("capacity", fmt.Sprintf("search %g..%g/s within %s", c.Config.From, c.Config.To, c.SLO))
	} else {
		r.setting("rate", lc.Shape.String())
		if rs := r.res.RateScale; rs != nil {
			r.setting("rate_scale", rs.Label())
		}
		r.setting("duration", lc.Duration)
	}
	r.populationSettings(lc.Pop)
	r.setting("come_back_every", lc.Pop.ComeBackEvery)
	r.setting("settle", lc.Settle)
	r.setting("generator", generatorSetting(lc, r.f.Kind == scenario.KindCapacity, nil))
	r.setting("retries", lc.Retries)
	r.setting("unread_threshold", r.procs[0].Cfg.Pull.UnreadThreshold)
	r.setting("reconcile_interval", r.procs[0].Cfg.Reconcile.Interval)
	grace := r.procs[0].Cfg.Reconcile.Grace
	if bound := lc.Duration + lc.Settle + lc.DrainTimeout; grace > bound {
		r.setting("reconcile_grace", fmt.Sprintf("%s (late: no message of this run can be repaired before the checker judged it, so a repair cannot hide a loss)", grace))
	} else {
		r.setting("reconcile_grace", fmt.Sprintf("%s (early: repairs can put back what the pipeline lost before the checker sees it; they are reported as findings)", grace))
	}
	if rc := r.procs[0].Cfg.Retention; rc.LabShortAges {
		r.setting("retention", fmt.Sprintf("LAB ONLY short ages: window %s, early deletion after %s once every device pulled, a pass every %s", rc.MaxAge, rc.PulledMinAge, rc.Interval))
	} else {
		r.setting("retention", fmt.Sprintf("window %s, early deletion after %s, a pass every %s (nothing of the run is deleted)", rc.MaxAge, rc.PulledMinAge, rc.Interval))
	}
	if r.database != "" {
		r.setting("mysql_database", r.database)
	}
	r.setting("redis_prefix", r.prefix)
	if len(r.cfg.Defects) > 0 {
		r.setting("defects", strings.Join(r.cfg.Defects, ",")+" (shipped defects: a negative control)")
	}
	if r.kafka != nil {
		via := "behind a proxy"
		if _, err := r.px.Addr(scenario.TargetKafka); err != nil {
			via = "reached directly"
		}
		r.setting("kafka", "in-process kfake "+via+", topic "+r.topic)
	}
	names := []string{}
	for _, n := range []string{scenario.TargetMySQL, scenario.TargetRedis, scenario.TargetKafka, scenario.TargetMongo} {
		if a, err := r.px.Addr(n); err == nil {
			names = append(names, n+"@"+a)
		}
	}
	if len(names) == 0 {
		names = append(names, "none (no fault acts on a backend's proxy: the servers reach every backend directly)")
	}
	r.setting("proxies", strings.Join(names, " "))
}
