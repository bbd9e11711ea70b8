package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"imlab/checker"
	"imlab/loadgen"
	"imlab/loadgen/schedule"
)

// newLoadCmd is `imlab load`: open-loop load against a server through the
// contract, with a ledger the checker can judge.
func newLoadCmd() *cobra.Command {
	def := loadgen.DefaultConfig("", "", "")
	var (
		target, rate, sizes, runDir string
		drvFlags                    driverFlags
		segment, claimDir, cpuProf  string
		check                       bool
		gogc, procs                 int
		waitReady                   time.Duration
	)
	var regErr error
	cfg := def
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
			secret, err := lookupSecret(cmd, true)
			if err != nil {
				return err
			}
			shape, err := schedule.Parse(rate)
			if err != nil {
				return usageError(fmt.Errorf("--rate: %w", err))
			}
			gs, err := loadgen.ParseSizes(sizes)
			if err != nil {
				return usageError(fmt.Errorf("--group-sizes: %w", err))
			}
			seg, err := loadSegment(segment, claimDir, os.LookupEnv)
			if err != nil {
				return usageError(err)
			}
			if waitReady < 0 || waitReady > maxWaitReady {
				return usageError(fmt.Errorf("--wait-ready %s: want 0 (do not wait) .. %s", waitReady, maxWaitReady))
			}
			if runDir == "" {
				runDir = filepath.Join("runs", time.Now().UTC().Format("20060102-150405"))
			}
			runDir = strings.ReplaceAll(runDir, "{segment}", strconv.Itoa(max(seg.Index, 1)))
			out := cmd.OutOrStdout()
			c := cfg
			c.Segment = seg
			c.Target, c.Secret, c.Shape, c.RunDir = target, secret.value, shape, runDir
			c.TargetOptions = drvFlags.options()
			c.Pop.GroupSizes = gs
			if c.Pop.Groups == 0 {
				c.Pop.GroupShare = 0
			}
			c.Progress = out
			if err := c.Validate(); err != nil {
				return usageError(err)
			}
			if err := setGC(gogc, cmd.ErrOrStderr()); err != nil {
				return usageError(err)
			}
			if err := setProcs(procs, cmd.ErrOrStderr()); err != nil {
				return usageError(err)
			}
			if httpTarget(target) {
				secret.warn(cmd.ErrOrStderr())
			}
			switch {
			case waitReady > 0 && !httpTarget(target):
				noHealthWait(out, target)
			case waitReady > 0:
				if err := waitHealthy(cmd.Context(), target, waitReady, out); err != nil {
					return err
				}
			}
			via := c.SendVia
			if !httpTarget(target) {
				via = "the driver's sessions"
			}
			fmt.Fprintf(out, "run dir %s: %s for %s against %s (sends over %s), %d users x %d devices, %d groups\n",
				runDir, shape, c.Duration, target, via, c.Pop.Users, c.Pop.DevicesPerUser, c.Pop.Groups)
			stopProf, err := startCPUProfile(cpuProf)
			if err != nil {
				return usageError(err)
			}
			sum, err := loadgen.Run(cmd.Context(), c)
			if perr := stopProf(); err == nil {
				err = perr
			}
			if sum != nil {
				printSummary(out, sum)
			}
			if err != nil {
				return err
			}
			if check {
				return runCheck(cmd, runDir, false)
			}
			return nil
		},
	}
	f := cmd.Flags()
	regErr = cfg.RegisterFlags(f)
	f.StringVar(&target, "target", "http://127.0.0.1:8080", "server base URL: http:// or ref+http:// (the reference server), tinode+ws://HOST:PORT (a Tinode)")
	drvFlags.register(f)
	f.DurationVar(&waitReady, "wait-ready", defaultWaitReady, "before anything else, wait up to this long for the target's GET /healthz to answer 200 (a server still starting, e.g. imlab up started just before), saying so; 0: do not wait")
	f.String("secret", "", "token signing secret (default $"+envSecret+")")
	f.StringVar(&rate, "rate", "const:1000", "rate shape")
	f.StringVar(&sizes, "group-sizes", "3:50,20:30,100:15,500:5", "group size distribution size:weight,...")
	f.IntVar(&procs, "procs", loadgen.DefaultProcs(), "GOMAXPROCS of the generator (default: twice the CPUs, for scheduling accuracy); ignored when $GOMAXPROCS is set")
	f.IntVar(&gogc, "gogc", defaultLoadGOGC, "garbage collector target percentage of the generator (-1: off); ignored when $GOGC is set")
	f.StringVar(&runDir, "run-dir", "", "where the ledger and summary go (default runs/<UTC time>); {segment} is replaced by the segment's index")
	f.StringVar(&segment, "segment", "", "drive one part of the run: i/n (1-based: 2/4 is the second quarter), index/n (i from $"+loadgen.EnvJobIndex+", 0-based, as a Kubernetes Indexed Job sets it) or claim/n (the lowest segment not yet claimed in --claim-dir, for replicas of one compose service); segments 1..n started apart with the same flags offer exactly the whole run's load; judge them together with imlab check DIR...")
	f.StringVar(&claimDir, "claim-dir", "", "with --segment claim/n: a directory shared by the replicas where each claims its segment")
	f.StringVar(&cpuProf, "cpuprofile", "", "write a CPU profile of the generator over the run to this file (go tool pprof FILE)")
	f.BoolVar(&check, "check", false, "run the checker afterwards and fail when the run is invalid")
	return cmd
}

// Bounds of imlab load --wait-ready.
const (
	defaultWaitReady = time.Minute
	maxWaitReady     = time.Hour
	readyPoll        = 250 * time.Millisecond
)

// waitHealthy waits, up to bound, for target's GET /healthz to answer 200:
// a server started just before (imlab up &) is still starting its
// backends. It says on w that it waits, and for how long it waited; a
// target not ready by then is an error naming the last answer.
func waitHealthy(ctx context.Context, target string, bound time.Duration, w io.Writer) error {
	url := strings.TrimRight(target, "/") + "/healthz"
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	start := time.Now()
	said := false
	for {
		last := probeHealthz(ctx, hc, url)
		if last == "" {
			if said {
				fmt.Fprintf(w, "%s ready after %s\n", url, time.Since(start).Round(100*time.Millisecond))
			}
			return nil
		}
		if !said {
			fmt.Fprintf(w, "waiting up to %s for %s to answer 200 (--wait-ready): %s\n", bound, url, last)
			said = true
		}
		select {
		case <-ctx.Done():
			if cerr := context.Cause(ctx); errors.Is(cerr, context.Canceled) {
				return cerr
			}
			return fmt.Errorf("the target is not ready: %s did not answer 200 within %s (last: %s); is the server running? (imlab up prints \"imlab ready\" when it is)", url, bound, last)
		case <-time.After(readyPoll):
		}
	}
}

// probeHealthz asks url once: "" when it answered 200, else what it did.
func probeHealthz(ctx context.Context, hc *http.Client, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err.Error()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "HTTP " + resp.Status
	}
	return ""
}

func printSummary(w interface{ Write([]byte) (int, error) }, s *loadgen.Summary) {
	fmt.Fprintf(w, "run %s: %s for %s against %s, sends over %s\n", s.RunID, s.Shape, s.Duration, s.Target, s.SendVia)
	if sp := s.Split; sp.Segment.Count > 1 {
		fmt.Fprintf(w, "segment %s of run %s (fingerprint %s, seed %d): %d users on host %s\n", sp.Segment, s.RunID, sp.Fingerprint, sp.Seed, sp.Users, sp.Host)
	}
	if c := s.Split.Clock; c != nil {
		fmt.Fprintf(w, "clock offset to the target %s ± %s (%s, %d samples)\n", c.Offset, c.Precision, c.Source, c.Samples)
	} else if s.Split.ClockError != "" {
		fmt.Fprintf(w, "clock offset to the target: unknown (%s)\n", s.Split.ClockError)
	}
	if s.Ceiling != nil {
		fmt.Fprintf(w, "generator ceiling (no-op endpoint, same client, over %s): %.0f sends/s\n", s.Ceiling.Via, s.Ceiling.PerSec)
	}
	g := s.Generator
	fmt.Fprintf(w, "generator: GOMAXPROCS %d on %d CPUs, GOGC %d, %d conns, pipeline %d on %d conns, workers %d..%d\n",
		g.GOMAXPROCS, g.CPUs, g.GOGC, g.Conns, g.Pipeline, g.PipelineConns, g.Workers, g.MaxWorkers)
	fmt.Fprintf(w, "sends: scheduled %d, started %d (%.0f/s), late %d, missed %d; ok %d, fail %d, unknown %d, retries %d\n",
		s.Pacer.Scheduled, s.Pacer.Started, s.StartedPerSec, s.Pacer.Late, s.Pacer.Missed, s.OK, s.Fail, s.Unknown, s.Retries)
	if s.NotSent > 0 {
		fmt.Fprintf(w, "not sent: %d of the failed sends waited in the generator's queue past the send timeout and were never transmitted: the server answered too slowly for the offered rate\n", s.NotSent)
	}
	fmt.Fprintf(w, "load: %s\n", s.Outcome)
	fmt.Fprintln(w, s.LabCPU)
	fmt.Fprintf(w, "%-11s %8s %9s %9s %9s %9s %9s\n", "latency", "count", "p50", "p90", "p99", "p999", "max")
	for _, n := range []string{"response", "service", "send_delay", "end_to_end"} {
		l := s.Latency[n]
		fmt.Fprintf(w, "%-11s %8d %9s %9s %9s %9s %9s\n", n, l.Count, checker.Dur(l.P50), checker.Dur(l.P90), checker.Dur(l.P99), checker.Dur(l.P999), checker.Dur(l.Max))
	}
	fmt.Fprintln(w, checker.LatencyLegend)
	fmt.Fprintf(w, "deliveries %d; drain complete %v in %.1fs (%d rounds); witness %d uids (%d errors); ledger %d bytes\n",
		s.Deliveries, s.Drain.Complete, s.Drain.Seconds, s.Drain.Rounds, s.Drain.WitnessUIDs, s.Drain.WitnessErrors, s.LedgerBytes)
	ev := s.Evidence
	fmt.Fprintf(w, "evidence: server policy %q; store witness %s; read-after-ACK %s\n", ev.Policy,
		evidenceState(ev.StoreWitness.Made, fmt.Sprintf("%d uids (%d errors)", ev.StoreWitness.UIDs, ev.StoreWitness.Errors), ev.StoreWitness.Reason),
		evidenceState(ev.ReadAfterAck.Made, fmt.Sprintf("%d reads (%d failed)", ev.ReadAfterAck.Probes, ev.ReadAfterAck.Errors), ev.ReadAfterAck.Reason))
	if s.QueueLag != nil {
		fmt.Fprintf(w, "queue lag at the end: %s\n", s.QueueLag)
	}
	for _, e := range s.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
}

func evidenceState(made bool, counts, reason string) string {
	if made {
		return counts
	}
	return "NOT MADE (" + reason + ")"
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
func loadSegment(spec, claimDir string, getenv func(string) (string, bool)) (loadgen.Segment, error) {
	if spec == "" {
		if claimDir != "" {
			return loadgen.Segment{}, fmt.Errorf("--claim-dir goes with --segment claim/n")
		}
		return loadgen.Segment{}, nil
	}
	seg, err := loadgen.ParseSegment(spec, getenv)
	if err != nil {
		return seg, err
	}
	if seg.Index != 0 {
		if claimDir != "" {
			return loadgen.Segment{}, fmt.Errorf("--claim-dir goes with --segment claim/n, not %s", spec)
		}
		return seg, nil
	}
	if claimDir == "" {
		return loadgen.Segment{}, fmt.Errorf("--segment %s needs --claim-dir, a directory the replicas share", spec)
	}
	host, _ := os.Hostname()
	return loadgen.ClaimSegment(claimDir, seg.Count, fmt.Sprintf("%s pid %d", host, os.Getpid()))
}
