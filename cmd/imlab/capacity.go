package main

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"imlab/capacity"
)

// Exit statuses of imlab capacity.
const (
	capacityExitNone   = exitFailed   // the search ran and no rate held the SLO twice: none held, or it ran out of steps (--max-steps) before one was confirmed
	capacityExitBroken = exitUnusable // bad flags, or the search could not be carried out
)

// newCapacityCmd is `imlab capacity`: the search for the sustainable rate.
func newCapacityCmd() *cobra.Command {
	def := capacity.DefaultConfig("", "", "")
	cfg := def
	var (
		slo, pids, procNames, out string
		cpuProf                   string
		gogc, procs               int
		noCheck, noTargetProcs    bool
		drvFlags                  driverFlags
		ready                     time.Duration
	)
	var regErr error
	cmd := &cobra.Command{
		Use:   "capacity",
		Short: "Search the highest constant send rate that holds an SLO (ramp, bisect, repeat), with CPU-µs per message; exit 0 found, 1 none held twice (none held, or out of steps), 2 could not run",
		Long: `An open-loop search, one loadgen run per step (a fresh uid range each): the generator's
own ceiling first, then a ramp from --from (x --growth) until a step breaks the SLO or --to holds,
a bisection to --resolution, and a repeat of the highest rate that held; only a rate that held twice
is the sustainable rate. Each step sends for --warm-up (not counted) + --step (measured); its
figures are read back from its ledger for the sends intended in the measured window (ACK latency
from the intended time). A step holds only when every SLO term was measured and within its limit
and the checker's verdict is valid. A step is stopped early when the SLO is clearly broken (3 s of
ACK p99 beyond 3x its limit, errors beyond 10x theirs, or no ACK at all: a stalled server), and
each step has a deadline. A broken step is put down to the generator when it offered 90% of the
generator's ceiling or sent late while the server answered in time.

CPU per message, read from /proc at the window's edges, for every process the lab can see: the
generator itself; the server process behind --target, which names its pid and roles on the lab
route GET /v1/lab/procs (on with imlab up and the scenario runner; imlab ref only with
--lab-routes: otherwise the search says so and watches only what the flags give); --proc by
command name (default mariadbd,redis-server: every match, as NAME:PID when several); and --pid
NAME=PID. The client mix (--mix off|default and --mix-* per key, the same keys as imlab load and a
scenario's load.mix) runs in every step: the rate is sends/s, and the cost per message then
includes what the devices' conversation pulls, history pages, revokes, deletes, clears and reads
cost. A process that exits mid-search is unknown for the rest of it, never 0. All of them share
this machine's cores.

Writes OUT/result.json (every step), OUT/report.html (rate vs ACK p99, rate vs CPU, knee and
sustainable rate marked) and OUT/steps/*/summary.json; prints the table.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			broken := func(err error) error { return &exitError{code: capacityExitBroken, err: err} }
			if regErr != nil {
				return broken(regErr)
			}
			secret, err := lookupSecret(cmd, true)
			if err != nil {
				return broken(err)
			}
			c := cfg
			c.Load.Secret = secret.value
			c.Load.TargetOptions = drvFlags.options()
			c.Check = !noCheck
			if c.SLO, err = capacity.ParseSLO(slo); err != nil {
				return broken(err)
			}
			if err := setGC(gogc, cmd.ErrOrStderr()); err != nil {
				return broken(err)
			}
			if err := setProcs(procs, cmd.ErrOrStderr()); err != nil {
				return broken(err)
			}
			secret.warn(cmd.ErrOrStderr())
			c.OutDir = cmp.Or(out, filepath.Join("runs", "capacity-"+time.Now().UTC().Format("20060102-150405")))
			if err := capacityReady(cmd, c, pids, ready); err != nil {
				return broken(err)
			}
			var names []string
			if procNames != "" {
				names = strings.Split(procNames, ",")
			}
			res, err := runCapacity(cmd, c, capacity.Watch{PIDs: pids, Names: names, NoTarget: noTargetProcs}, cpuProf)
			switch {
			case err != nil:
				return broken(err)
			case res.Sustainable == nil && res.OutOfSteps:
				return &exitError{code: capacityExitNone, err: fmt.Errorf("no rate confirmed: the search ran out of its %d steps before a rate held the SLO twice (raise --max-steps)", res.MaxSteps)}
			case res.Sustainable == nil:
				return &exitError{code: capacityExitNone, err: errors.New("no rate held the SLO on a repeat")}
			}
			return nil
		},
	}
	f := cmd.Flags()
	regErr = cfg.RegisterFlags(f)
	f.StringVar(&cfg.Load.Target, "target", "http://127.0.0.1:8080", "server base URL: http:// or ref+http:// (the reference server), tinode+ws://HOST:PORT (a Tinode)")
	drvFlags.register(f)
	f.String("secret", "", "token signing secret (default $"+envSecret+")")
	f.StringVar(&slo, "slo", capacity.DefaultSLO, "what a step must hold: ack_p50, ack_p99, lag (durations), errors (failed + unknown, % of sends)")
	f.StringVar(&pids, "pid", "", "processes to read CPU from: NAME=PID,... (e.g. ref=1234)")
	f.StringVar(&procNames, "proc", "mariadbd,redis-server", "processes to read CPU from by command name: those that descend from the target's process (imlab up's private servers) where there are, else every match but this process, marked found by name (empty: none)")
	f.BoolVar(&noTargetProcs, "no-target-procs", false, "do not ask the target for its pid ("+capacity.ProcsPath+")")
	f.StringVar(&out, "out", "", "output directory (default runs/capacity-<UTC time>)")
	f.BoolVar(&noCheck, "no-check", false, "do not run the checker on each step (a step then holds on the SLO alone)")
	f.IntVar(&procs, "procs", capacity.DefaultProcs(), "GOMAXPROCS of the generator (default: half the CPUs, at least 1, not imlab load's twice: fewer threads to wake per send, the rest for the target); ignored when $GOMAXPROCS is set")
	f.DurationVar(&ready, "wait-ready", defaultWaitReady, "before the search, wait up to this long for the target's GET /healthz to answer 200 (a server still starting, e.g. imlab up started just before), saying so; 0: do not wait")
	f.StringVar(&cpuProf, "cpuprofile", "", "write a CPU profile of the generator over the whole search to this file (go tool pprof FILE)")
	f.IntVar(&gogc, "gogc", defaultLoadGOGC, "garbage collector target percentage of the generator")
	return cmd
}

// runCapacity runs the search, with a CPU profile of this process to
// cpuProf (empty: none).
func runCapacity(cmd *cobra.Command, c capacity.Config, w capacity.Watch, cpuProf string) (*capacity.Result, error) {
	stopProf, err := startCPUProfile(cpuProf)
	if err != nil {
		return nil, err
	}
	res, err := capacity.Run(cmd.Context(), c, w, cmd.OutOrStdout(), cmd.ErrOrStderr())
	if perr := stopProf(); err == nil {
		err = perr
	}
	return res, err
}

// capacityReady refuses bad input first (the search's config, --pid,
// --wait-ready), so that it is never kept waiting for a server, and then
// waits up to ready for the target's /healthz.
func capacityReady(cmd *cobra.Command, c capacity.Config, pids string, ready time.Duration) error {
	if err := checkWaitReady(ready); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if _, err := capacity.ParsePIDs(pids); err != nil {
		return err
	}
	return waitReady(cmd.Context(), c.Load.Target, ready, cmd.OutOrStdout())
}
