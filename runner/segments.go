package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"imlab/checker"
	"imlab/checker/judge"
	"imlab/loadgen"
	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
	"imlab/runner/proc"
	"imlab/scenario"
)

// DefaultLoadChildArgs are the arguments (after this executable's path) of
// the command that runs one load segment: imlab's hidden
// "scenario load-child".
func DefaultLoadChildArgs() []string { return []string{"scenario", "load-child"} }

// LoadChildSpec is what the runner writes, as one line of JSON, to the stdin
// of a load segment's process: the run's load config with its rate shape
// as text (a Shape is an interface) and no progress writer.
type LoadChildSpec struct {
	Rate   string         `json:"rate"`
	Config loadgen.Config `json:"config"`
}

// LoadChildMain runs one load segment from the spec line on stdin (see
// LoadChildSpec) and writes its ledger and summary to the spec's run
// directory; it prints one line, "done RUN_DIR", on stdout when the run
// ended without error.
func LoadChildMain(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 0, 4096), proc.MaxChildLine)
	if !sc.Scan() {
		return fmt.Errorf("%w: load child: no spec line on stdin (%v)", scenario.ErrInvalid, sc.Err())
	}
	var spec LoadChildSpec
	if err := json.Unmarshal(sc.Bytes(), &spec); err != nil {
		return fmt.Errorf("%w: load child: spec: %v", scenario.ErrInvalid, err)
	}
	sh, err := schedule.Parse(spec.Rate)
	if err != nil {
		return fmt.Errorf("%w: load child: %w", scenario.ErrInvalid, err)
	}
	lc := spec.Config
	lc.Shape, lc.Progress = sh, nil
	if err := lc.Validate(); err != nil {
		return fmt.Errorf("load child: %w", err)
	}
	if _, err := loadgen.Run(ctx, lc); err != nil {
		return fmt.Errorf("load child: segment %s: %w", lc.Segment, err)
	}
	_, err = fmt.Fprintln(stdout, "done", lc.RunDir)
	return err
}

// loadChildCommand is the configured command, or this executable's.
func (c Config) loadChildCommand() ([]string, error) {
	return selfCommand(c.LoadChildCommand, DefaultLoadChildArgs(), "load segments need a command (Config.LoadChildCommand)")
}

// segmentProcs is the GOMAXPROCS of each of n generator processes sharing
// this machine: loadgen's default (twice the CPUs) divided among them, at
// least 2.
func segmentProcs(n int) int { return max(2, loadgen.DefaultProcs()/n) }

// runSegments runs lc as n segments, each in an OS process of its own with
// its own GOMAXPROCS and run directory (RunDir/seg-I), all started at once,
// and returns their summaries merged and the checker's sources.
func (r *run) runSegments(ctx context.Context, lc loadgen.Config, n int) (*summary.Summary, []checker.Source, error) {
	argv, err := r.cfg.loadChildCommand()
	if err != nil {
		return nil, nil, err
	}
	dirs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		c := lc
		c.Segment = summary.Segment{Index: i + 1, Count: n}
		c.RunDir = filepath.Join(lc.RunDir, "seg-"+strconv.Itoa(i+1))
		dirs[i] = c.RunDir
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.runSegment(ctx, argv, c, segmentProcs(n))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	srcs, plan, err := judge.Sources(dirs, false)
	if err != nil {
		return nil, nil, err
	}
	var sums []*summary.Summary
	for _, s := range srcs {
		sum, err := summary.Read(s.Dir)
		if err != nil {
			return nil, nil, err
		}
		sums = append(sums, sum)
	}
	if plan != nil {
		r.segNotes = plan.Notes
	}
	return summary.MergeSummaries(sums), srcs, nil
}

// runSegment runs one segment's process to its end; its stderr goes to
// OutDir/load-seg-I.log.
func (r *run) runSegment(ctx context.Context, argv []string, c loadgen.Config, procs int) error {
	spec, err := json.Marshal(LoadChildSpec{Rate: c.Shape.String(), Config: withoutShape(c)})
	if err != nil {
		return fmt.Errorf("scenarios: segment %s: %w", c.Segment, err)
	}
	logPath := filepath.Join(r.cfg.OutDir, fmt.Sprintf("load-seg-%d.log", c.Segment.Index))
	logf, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("scenarios: segment %s: %w", c.Segment, err)
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(procs))
	cmd.Stdin = bytes.NewReader(append(spec, '\n'))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.WaitDelay = proc.StopTimeout
	cmd.SysProcAttr = proc.ChildProcAttr()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("scenarios: load segment %s (log %s): %w", c.Segment, logPath, err)
	}
	return nil
}

// withoutShape is c ready for JSON: no Shape, no Progress.
func withoutShape(c loadgen.Config) loadgen.Config {
	c.Shape, c.Progress = nil, nil
	return c
}

// latencyFromVerdict sets the summary's latency quantiles from the
// checker's histograms (merged over every segment's records).
func latencyFromVerdict(sum *summary.Summary, v *checker.Verdict) {
	for name, l := range v.Latency {
		sum.Latency[name] = summary.Quantiles{Count: l.Count, P50: l.P50, P90: l.P90, P99: l.P99, P999: l.P999, Max: l.Max}
	}
}

// ServeChild runs this process as a child command the runner starts when
// args (os.Args[1:]) name one: a server process (proc.DefaultChildArgs)
// or a load segment (DefaultLoadChildArgs). It returns the exit status and
// true; otherwise 0 and false. A test binary that runs scenarios calls it
// first in TestMain, so that it is its own child command, as imlab is.
func ServeChild(args []string) (int, bool) {
	if code, ok := proc.ServeChild(args); ok {
		return code, true
	}
	if !slices.Equal(args, DefaultLoadChildArgs()) {
		return 0, false
	}
	if err := LoadChildMain(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scenario load-child:", err)
		return 1, true
	}
	return 0, true
}
