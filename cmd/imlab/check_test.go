package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"imlab/checker"
	"imlab/expect"
	"imlab/loadgen"
	"imlab/loadgen/faketarget"
	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
	"imlab/report"
	"imlab/report/runpage"
	"imlab/result"
)

// TestCheckReportsLoadBesideTheVerdict: imlab check prints latencies as
// durations, "achieved" as ACKed sends/s with the unknown and failed
// fractions, and a VALID run whose sends mostly stayed unknown as
// OVERLOADED with exit status 3, the safety verdict still VALID.
func TestCheckReportsLoadBesideTheVerdict(t *testing.T) {
	const secret = "check-cmd-test-secret-0123456"
	srv, err := faketarget.Start(faketarget.DefaultConfig(secret))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	cfg := loadgen.DefaultConfig(srv.URL(), secret, dir)
	cfg.Shape, cfg.Duration = schedule.Constant{PerSec: 200}, time.Second
	cfg.Pop.Users, cfg.Pop.Groups, cfg.Pop.GroupShare = 10, 0, 0
	cfg.Settle, cfg.CeilingFor, cfg.Timeout = 200*time.Millisecond, 0, 30*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := loadgen.Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// The run's own pacer lateness is the machine's (a loaded CI runner
	// starts sends late and the run is honestly OVERLOADED): the first
	// check is about the lines, so it reads the producer's summary with
	// the late count set to none.
	p := filepath.Join(dir, summary.File)
	s, err := summary.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Pacer.Late = 0
	b, _ := json.Marshal(s)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	check := func() (string, error) {
		root := &cobra.Command{Use: "imlab", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(newCheckCmd())
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{"check", dir})
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	out, err := check()
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	if !strings.Contains(out, "load: achieved ") || !strings.Contains(out, "ACKed sends/s") || !regexp.MustCompile(`unknown 0\.0%, failed 0\.0%, retried 0\.0%, started late [0-9.]+% \(start delay p99 [0-9.]+ ms\): within load`).MatchString(out) {
		t.Fatalf("no load line:\n%s", out)
	}
	if !regexp.MustCompile(`(?m): generator used \d+% of the machine's CPU during the measured window \(`).MatchString(out) {
		t.Fatalf("no line with the generator's share of the machine, read from summary.json:\n%s", out)
	}
	row := regexp.MustCompile(`(?m)^response +\d+ +(\S+)`).FindStringSubmatch(out)
	if row == nil {
		t.Fatalf("no response row:\n%s", out)
	}
	if _, err := time.ParseDuration(row[1]); err != nil {
		t.Fatalf("response p50 %q is not a duration:\n%s", row[1], out)
	}
	if strings.Contains(out, "note: the load summary's end_to_end") {
		t.Fatalf("summary and check count end_to_end differently:\n%s", out)
	}
	checkHistoryNotMade(t, dir, out)

	// The same ledger, with a summary saying 40 of 240 sends stayed unknown.
	s.Unknown = s.OK / 5
	b, _ = json.Marshal(s)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = check()
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != checkExitOverloaded {
		t.Fatalf("overloaded run: error %v, want exit status %d\n%s", err, checkExitOverloaded, out)
	}
	if !strings.Contains(out, "verdict: VALID") || !strings.Contains(out, "result: VALID but OVERLOADED") || !strings.Contains(out, "unknown 16.7%") {
		t.Fatalf("overloaded run output:\n%s", out)
	}

	// Every send ended ok, but a tenth needed a second try: overloaded too
	// (the exit status had said a clean pass while the load line said
	// OVERLOADED).
	s.Unknown, s.RetriedSends = 0, s.OK/10
	b, _ = json.Marshal(s)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = check()
	if !errors.As(err, &ee) || ee.code != checkExitOverloaded {
		t.Fatalf("retried run: error %v, want exit status %d\n%s", err, checkExitOverloaded, out)
	}
	if !strings.Contains(out, "result: VALID but OVERLOADED") || !strings.Contains(out, "retried") {
		t.Fatalf("retried run output:\n%s", out)
	}
}

// checkHistoryNotMade: a run with no history witness, no history page and
// no conversation pull on a target with an inbox (the fake's) made no
// check that feeds history-overwritten or history-duplicated, so the
// table, verdict.json and the report page say NOT MADE, never 0 (the ACKs
// alone put messages into the conversation logs but cannot show a store
// that overwrote or copied one).
func checkHistoryNotMade(t *testing.T, dir, out string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "verdict.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v *checker.Verdict
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{checker.HistoryOverwritten, checker.HistoryDuplicated} {
		if !regexp.MustCompile(`(?m)^` + n + ` \* +NOT MADE`).MatchString(out) {
			t.Errorf("%s is not NOT MADE in the table:\n%s", n, out)
		}
		f := v.Findings[n]
		if f == nil || !strings.Contains(f.NotMade, checker.CheckHistoryWitness) || !strings.Contains(f.NotMade, checker.CheckHistoryPages) {
			t.Errorf("verdict.json's %s: %+v", n, f)
		}
	}
	rep := runpage.HTMLReport(&result.Result{Scenario: "check", Verdict: v, Findings: expect.Findings(v)})
	for _, f := range rep.Findings {
		if (f.Name == checker.HistoryOverwritten || f.Name == checker.HistoryDuplicated) && !f.NotMade {
			t.Errorf("the report page shows %s as a count: %+v", f.Name, f)
		}
	}
	if !slices.ContainsFunc(rep.Findings, func(f report.Finding) bool { return f.Name == checker.HistoryDuplicated }) {
		t.Errorf("no history-duplicated on the page: %+v", rep.Findings)
	}
}
