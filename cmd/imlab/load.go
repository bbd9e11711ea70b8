package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"imlab/checker/judge"
	"imlab/loadgen"
	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
	"imlab/targets/ref"
)

// loadOpts are imlab load's own flags (the generator's are the config's:
// loadgen.Config.RegisterFlags).
type loadOpts struct {
	target, rate, sizes, runDir string
	drv                         driverFlags
	segment, claimDir, cpuProf  string
	check                       bool
	gogc, procs                 int
	waitReady                   time.Duration
}

// newLoadCmd is `imlab load`: open-loop load against a server through the
// contract, with a ledger the checker can judge.
func newLoadCmd() *cobra.Command {
	var o loadOpts
	var regErr error
	cfg := loadgen.DefaultConfig("", "", "")
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Open-loop load (constant, steps, bursts, sine) with a ledger of every ACK and delivery",
		Long: `Sends messages at intended times given by a rate shape, from a simulated population
(online WebSocket devices, offline devices that come back and pull, crashy devices),
drains every device at the end, takes a witness pull of every inbox and writes
RUN_DIR/ledger-*.bin and RUN_DIR/summary.json. Judge the run with: imlab check RUN_DIR.

Rate shapes: const:5000 | steps:1000@10s,5000@20s | burst:base=5000,peak=50000,at=5s,len=10s[,every=60s] |
sine:mean=5000,amp=2000,period=30s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if regErr != nil {
				return regErr
			}
			return o.run(cmd, cfg)
		},
	}
	f := cmd.Flags()
	regErr = cfg.RegisterFlags(f)
	f.StringVar(&o.target, "target", "http://127.0.0.1:8080", "server base URL: http:// or ref+http:// (the reference server), tinode+ws://HOST:PORT (a Tinode)")
	o.drv.register(f)
	f.DurationVar(&o.waitReady, "wait-ready", defaultWaitReady, "before anything else, wait up to this long for the target's GET /healthz to answer 200 (a server still starting, e.g. imlab up started just before), saying so; 0: do not wait")
	f.String("secret", "", "token signing secret (default $"+envSecret+")")
	f.StringVar(&o.rate, "rate", "const:1000", "rate shape")
	f.StringVar(&o.sizes, "group-sizes", "3:50,20:30,100:15,500:5", "group size distribution size:weight,...")
	f.IntVar(&o.procs, "procs", loadgen.DefaultProcs(), "GOMAXPROCS of the generator (default: twice the CPUs, for scheduling accuracy); ignored when $GOMAXPROCS is set")
	f.IntVar(&o.gogc, "gogc", defaultLoadGOGC, "garbage collector target percentage of the generator (-1: off); ignored when $GOGC is set")
	f.StringVar(&o.runDir, "run-dir", "", "where the ledger and summary go (default runs/<UTC time>); {segment} is replaced by the segment's index")
	f.StringVar(&o.segment, "segment", "", "drive one part of the run: i/n (1-based: 2/4 is the second quarter), index/n (i from $"+loadgen.EnvJobIndex+", 0-based, as a Kubernetes Indexed Job sets it) or claim/n (the lowest segment not yet claimed in --claim-dir, for replicas of one compose service); segments 1..n started apart with the same flags offer exactly the whole run's load; judge them together with imlab check DIR...")
	f.StringVar(&o.claimDir, "claim-dir", "", "with --segment claim/n: a directory shared by the replicas where each claims its segment")
	f.StringVar(&o.cpuProf, "cpuprofile", "", "write a CPU profile of the generator over the run to this file (go tool pprof FILE)")
	f.BoolVar(&o.check, "check", false, "run the checker afterwards and fail when the run is invalid")
	return cmd
}

// config is the run's config: the generator's flags (c) with the
// command's own parsed into it.
func (o *loadOpts) config(cmd *cobra.Command, c loadgen.Config) (loadgen.Config, error) {
	secret, err := lookupSecret(cmd, true)
	if err != nil {
		return c, err
	}
	shape, err := schedule.Parse(o.rate)
	if err != nil {
		return c, usageError(fmt.Errorf("--rate: %w", err))
	}
	gs, err := loadgen.ParseSizes(o.sizes)
	if err != nil {
		return c, usageError(fmt.Errorf("--group-sizes: %w", err))
	}
	seg, err := loadSegment(o.segment, o.claimDir, os.LookupEnv)
	if err != nil {
		return c, usageError(err)
	}
	if err := checkWaitReady(o.waitReady); err != nil {
		return c, usageError(err)
	}
	runDir := o.runDir
	if runDir == "" {
		runDir = filepath.Join("runs", time.Now().UTC().Format("20060102-150405"))
	}
	c.Segment = seg
	c.Target, c.Secret, c.Shape = o.target, secret.value, shape
	c.RunDir = strings.ReplaceAll(runDir, "{segment}", strconv.Itoa(max(seg.Index, 1)))
	c.TargetOptions = o.drv.options()
	c.Pop.GroupSizes = gs
	if c.Pop.Groups == 0 {
		c.Pop.GroupShare = 0
	}
	c.Progress = cmd.OutOrStdout()
	if err := c.Validate(); err != nil {
		return c, usageError(err)
	}
	if httpTarget(o.target) {
		secret.warn(cmd.ErrOrStderr())
	}
	return c, nil
}

// run sets the generator's process up (GC, GOMAXPROCS), waits for the
// target, runs the load, prints its summary and, with --check, judges it.
func (o *loadOpts) run(cmd *cobra.Command, cfg loadgen.Config) error {
	c, err := o.config(cmd, cfg)
	if err != nil {
		return err
	}
	if err := setGC(o.gogc, cmd.ErrOrStderr()); err != nil {
		return usageError(err)
	}
	if err := setProcs(o.procs, cmd.ErrOrStderr()); err != nil {
		return usageError(err)
	}
	out := cmd.OutOrStdout()
	if err := waitReady(cmd.Context(), o.target, o.waitReady, out); err != nil {
		return err
	}
	via := c.SendVia
	if !httpTarget(o.target) {
		via = "the driver's sessions"
	}
	fmt.Fprintf(out, "run dir %s: %s for %s against %s (sends over %s), %d users x %d devices, %d groups\n",
		c.RunDir, c.Shape, c.Duration, o.target, via, c.Pop.Users, c.Pop.DevicesPerUser, c.Pop.Groups)
	stopProf, err := startCPUProfile(o.cpuProf)
	if err != nil {
		return usageError(err)
	}
	sum, err := loadgen.Run(cmd.Context(), c)
	if perr := stopProf(); err == nil {
		err = perr
	}
	if sum != nil {
		sum.WriteText(out)
	}
	if err == nil {
		err = sum.CredentialsRefused()
	}
	if err != nil {
		return err
	}
	if o.check {
		return runCheck(cmd, judge.Options{Dirs: []string{c.RunDir}})
	}
	return nil
}

// Bounds of imlab load --wait-ready.
const (
	defaultWaitReady = time.Minute
	maxWaitReady     = time.Hour
)

// checkWaitReady refuses a --wait-ready outside 0..maxWaitReady.
func checkWaitReady(d time.Duration) error {
	if d < 0 || d > maxWaitReady {
		return fmt.Errorf("--wait-ready %s: want 0 (do not wait) .. %s", d, maxWaitReady)
	}
	return nil
}

// waitReady waits up to bound (0: not at all) for an HTTP target's
// /healthz; of another target it says that it does not wait. A target
// still starting would otherwise fail a load's first seconds, or break a
// capacity search's first step and be called the server's limit.
func waitReady(ctx context.Context, target string, bound time.Duration, out io.Writer) error {
	switch {
	case bound > 0 && !httpTarget(target):
		noHealthWait(out, target)
	case bound > 0:
		return ref.WaitHealthy(ctx, target, bound, out)
	}
	return nil
}

// defaultLoadGOGC is imlab load's garbage collector setting: the generator
// keeps a small live heap and allocates per send, so at the runtime's
// default (100) it collects many times a second, and each collection takes
// a core from the pacer on a small machine; 400 collects a quarter as often.
const defaultLoadGOGC = 400

// setGC applies --gogc unless the environment already chose (GOGC).
func setGC(percent int, warn io.Writer) error {
	if percent < -1 {
		return fmt.Errorf("--gogc %d: want -1 (off) or a percentage >= 0", percent)
	}
	if os.Getenv("GOGC") != "" {
		fmt.Fprintf(warn, "GOGC=%s set: --gogc ignored\n", os.Getenv("GOGC"))
		return nil
	}
	debug.SetGCPercent(percent)
	return nil
}

// maxLoadProcs bounds --procs.
const maxLoadProcs = 1024

// setProcs applies --procs unless the environment already chose
// (GOMAXPROCS).
func setProcs(n int, warn io.Writer) error {
	if n < 1 || n > maxLoadProcs {
		return fmt.Errorf("--procs %d: want 1..%d", n, maxLoadProcs)
	}
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		fmt.Fprintf(warn, "GOMAXPROCS=%s set: --procs ignored\n", v)
		return nil
	}
	runtime.GOMAXPROCS(n)
	return nil
}

// loadSegment reads --segment (and --claim-dir for claim/n).
func loadSegment(spec, claimDir string, getenv func(string) (string, bool)) (summary.Segment, error) {
	if spec == "" {
		if claimDir != "" {
			return summary.Segment{}, fmt.Errorf("--claim-dir goes with --segment claim/n")
		}
		return summary.Segment{}, nil
	}
	seg, err := loadgen.ParseSegment(spec, getenv)
	if err != nil {
		return seg, err
	}
	if seg.Index != 0 {
		if claimDir != "" {
			return summary.Segment{}, fmt.Errorf("--claim-dir goes with --segment claim/n, not %s", spec)
		}
		return seg, nil
	}
	if claimDir == "" {
		return summary.Segment{}, fmt.Errorf("--segment %s needs --claim-dir, a directory the replicas share", spec)
	}
	host, _ := os.Hostname()
	return loadgen.ClaimSegment(claimDir, seg.Count, fmt.Sprintf("%s pid %d", host, os.Getpid()))
}
