package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"imlab/capacity"
	"imlab/checker"
	"imlab/compare"
	"imlab/internal/testenv"
	"imlab/loadgen/summary"
	"imlab/result"
)

// TestFormatNames: the formats compare reads are the ones the producers
// write.
func TestFormatNames(t *testing.T) {
	for _, c := range [][2]string{
		{compare.ScenarioResultFormat, result.ResultFormat},
		{compare.LoadSummaryFormat, summary.Format},
		{compare.VerdictFormat, checker.VerdictFormat},
		{compare.CapacityFormat, capacity.ResultFormat},
	} {
		if c[0] != c[1] {
			t.Errorf("compare reads %q, the producer writes %q", c[0], c[1])
		}
	}
}

// TestReadersOfRealRuns runs two shipped scenarios with the real runner,
// the clean queue-loss-store and the lossy queue-loss-unsafe (its negative
// control: the unsafe policy loses messages), against the real MariaDB and
// Redis, and reads what it wrote with every reader: compare gates the
// clean run against the lossy one (exit 1, the lost row REGRESSED), the
// review page lists the lost msg_ids and the failed and unknown sends per
// second, check judges the load directories (only JSON on stdout with
// --json), and every reader refuses a result of a format it does not know,
// naming the file. The terminal got the live line and the verdicts, not
// the server processes' logs, which are in the run directories.
func TestReadersOfRealRuns(t *testing.T) {
	my := testenv.NewMySQL(t)
	rd := testenv.NewRedis(t)
	t.Setenv(envSecret, "readers-test-secret-0123456789")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runImlab(t, ctx, "scenario", "run", "--out", out, "--backends", "external",
		"--mysql-dsn", my.DSN, "--redis-addr", rd.Addr, "--redis-prefix", rd.Keys.Prefix,
		"../../scenarios/queue-loss-store.yaml", "../../scenarios/queue-loss-unsafe.yaml")
	t.Logf("scenario run: exit %d\n%s\n%s", code, stdout, stderr)
	clean, lossy := filepath.Join(out, "queue-loss-store"), filepath.Join(out, "queue-loss-unsafe")
	for _, d := range []string{clean, lossy} {
		if _, err := os.Stat(filepath.Join(d, result.ResultFile)); err != nil {
			t.Fatalf("the run wrote no result: %v", err)
		}
	}
	// The noise stays in the run directories.
	if strings.Contains(stdout+stderr, "level=") || strings.Contains(stdout+stderr, "[mysql]") {
		t.Errorf("server logs on the terminal:\n%s", tail(stdout+stderr))
	}
	for _, p := range []string{filepath.Join(clean, "process-api.log"), filepath.Join(clean, "process-consumer.log")} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("process log %s: %v", p, err)
		}
	}
	if !strings.Contains(stdout, "live line, once a second") || !strings.Contains(stdout, "retried=") || !strings.Contains(stdout, "    load: within load") {
		t.Errorf("no live line legend, retries or load verdict on the terminal:\n%s", tail(stdout))
	}

	lossyRes, err := result.ReadRun(lossy)
	if err != nil {
		t.Fatal(err)
	}
	// The throughput chart's seconds as the real producer writes them:
	// every ACK counted once in its send's intended second, the same
	// total as by the second the answers came.
	cleanRes, err := result.ReadRun(clean)
	if err != nil {
		t.Fatal(err)
	}
	var byAnswer, byIntended uint64
	for _, s := range cleanRes.Sends {
		if s.IntendedOK == nil {
			t.Fatalf("second %g has no intended_ok: the chart would fall back to the answer's second", s.T)
		}
		byAnswer, byIntended = byAnswer+s.OK, byIntended+*s.IntendedOK
	}
	if byAnswer == 0 || byIntended != byAnswer {
		t.Fatalf("ACKs by intended second %d, by answer second %d: want the same, above 0", byIntended, byAnswer)
	}
	var lost result.FindingSummary
	for _, f := range lossyRes.Findings {
		if f.Name == "lost" {
			lost = f
		}
	}
	if lost.Count == 0 || len(lost.MsgIDs) == 0 {
		t.Fatalf("the negative control lost nothing (%+v): the readers cannot be tested on it", lost)
	}

	t.Run("compare", func(t *testing.T) {
		code, stdout, stderr := runImlab(t, ctx, "compare", "--allow-mismatch", clean, lossy)
		row := regexp.MustCompile(`(?m)^lost +0 +(\d+) .*$`).FindStringSubmatch(stdout)
		if code != 1 || row == nil || !strings.Contains(row[0], "REGRESSED") || row[1] != strconv.FormatUint(lost.Count, 10) {
			t.Fatalf("compare clean lossy: exit %d, lost row %q, want exit 1 and lost 0 -> %d REGRESSED\n%s\n%s", code, row, lost.Count, stdout, stderr)
		}
		if code, stdout, _ := runImlab(t, ctx, "compare", lossy, lossy); code != 0 {
			t.Errorf("compare lossy lossy: exit %d\n%s", code, stdout)
		}
	})

	t.Run("review page", func(t *testing.T) {
		page := filepath.Join(t.TempDir(), "review.html")
		if code, stdout, stderr := runImlab(t, ctx, "report", "compare", clean, lossy, "-o", page); code != 0 {
			t.Fatalf("report compare: exit %d\n%s\n%s", code, stdout, stderr)
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		html := string(b)
		for _, want := range []string{"#2 queue-loss-unsafe: lost", strconv.FormatUint(lost.MsgIDs[0], 10),
			"Sends failed or of unknown outcome per second", "INVALID, as its scenario expects: a negative control",
			filepath.Join(lossy, result.ResultFile)} {
			if !strings.Contains(html, want) {
				t.Errorf("review page lacks %q", want)
			}
		}
		if strings.Contains(html, "no findings") {
			t.Error("the review page says no findings")
		}
		// BUSY as the runs' own CPU timelines decide it: each busy run
		// named with its reason, none when neither was.
		busy := 0
		for _, r := range []*result.Result{cleanRes, lossyRes} {
			b, known := r.Busy()
			if _, _, n, _ := r.CPU.Others(); !known || n == 0 {
				t.Errorf("%s: BUSY decided by its CPU timeline: known %v, %d seconds of the rest of the machine", r.Scenario, known, n)
			}
			if b {
				busy++
				if !strings.Contains(html, r.BusyWhy()) {
					t.Errorf("review page lacks %s's BUSY reason %q", r.Scenario, r.BusyWhy())
				}
			}
		}
		if want := fmt.Sprintf("BUSY: %d of 2 runs", busy); busy > 0 != strings.Contains(html, want) || busy == 0 && strings.Contains(html, "BUSY:") {
			t.Errorf("review page: %d runs busy by their timelines, page says BUSY %v", busy, strings.Contains(html, "BUSY:"))
		}
	})

	t.Run("check", func(t *testing.T) {
		code, stdout, _ := runImlab(t, ctx, "check", "--json", filepath.Join(lossy, result.LoadDir))
		var rep struct {
			Valid  bool             `json:"valid"`
			Result string           `json:"result"`
			Load   *summary.Outcome `json:"load"`
		}
		dec := json.NewDecoder(strings.NewReader(stdout))
		if err := dec.Decode(&rep); err != nil || dec.More() {
			t.Fatalf("check --json: not one JSON object (%v):\n%s", err, tail(stdout))
		}
		if code != 1 || rep.Valid || rep.Result != "INVALID" || rep.Load == nil || rep.Load.AckedPerSec <= 0 {
			t.Fatalf("check --json of the lossy run: exit %d, %+v", code, rep)
		}
		if code, stdout, _ := runImlab(t, ctx, "check", filepath.Join(clean, result.LoadDir)); code != 0 && code != 3 {
			t.Fatalf("check of the clean run: exit %d\n%s", code, tail(stdout))
		}
		// The scenario run's own directory: its load is judged, and the
		// output says so first.
		code, stdout, _ = runImlab(t, ctx, "check", lossy)
		if want := lossy + " is a scenario run: judging its ledger in " + filepath.Join(lossy, result.LoadDir); code != 1 || !strings.HasPrefix(stdout, want) {
			t.Fatalf("check of the lossy scenario run's directory: exit %d, want 1 and %q first\n%s", code, want, tail(stdout))
		}
		// compare reads the load runs with the verdicts check wrote.
		code, stdout, stderr := runImlab(t, ctx, "compare", "--allow-mismatch", filepath.Join(clean, result.LoadDir), filepath.Join(lossy, result.LoadDir))
		if row := regexp.MustCompile(`(?m)^lost +0 +[1-9]\d* .*REGRESSED`).FindString(stdout); code != 1 || row == "" {
			t.Fatalf("compare of the load runs: exit %d, no lost row REGRESSED\n%s\n%s", code, stdout, stderr)
		}
		// The load summary says how its generator ran (GOMAXPROCS), which
		// compare reads as part of where it was measured.
		if r, err := compare.Read(filepath.Join(clean, result.LoadDir)); err != nil || !strings.HasPrefix(r.Env.Generator, "GOMAXPROCS ") {
			t.Fatalf("compare.Read of the load run: generator %q (%v)", r.Env.Generator, err)
		}
	})

	t.Run("formats", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(lossy, result.ResultFile))
		if err != nil {
			t.Fatal(err)
		}
		future := filepath.Join(t.TempDir(), "future")
		if err := os.MkdirAll(future, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(future, result.ResultFile)
		if err := os.WriteFile(p, bytes.Replace(b, []byte(result.ResultFormat), []byte("imlab-scenario-result/9"), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"compare", "--allow-mismatch", clean, future},
			{"report", "compare", clean, future, "-o", filepath.Join(t.TempDir(), "r.html")},
		} {
			code, _, stderr := runImlab(t, ctx, args...)
			if code != 2 || !strings.Contains(stderr, p) || !strings.Contains(stderr, "imlab-scenario-result/9") {
				t.Errorf("imlab %s: exit %d, stderr %q: want 2 naming the file and its format", strings.Join(args[:2], " "), code, stderr)
			}
		}
		// A load summary of another format: check and compare refuse it.
		sum := filepath.Join(clean, result.LoadDir, summary.File)
		sb, err := os.ReadFile(sum)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		for _, n := range []string{summary.File} {
			if err := os.WriteFile(filepath.Join(dir, n), bytes.Replace(sb, []byte(summary.Format), []byte("imlab-load-summary/9"), 1), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ledgers, _ := filepath.Glob(filepath.Join(clean, result.LoadDir, "ledger-*.bin"))
		for _, l := range ledgers {
			lb, err := os.ReadFile(l)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(l)), lb, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, args := range [][]string{{"check", dir}, {"compare", "--allow-mismatch", filepath.Join(clean, result.LoadDir), dir}} {
			code, _, stderr := runImlab(t, ctx, args...)
			if code != 2 || !strings.Contains(stderr, filepath.Join(dir, summary.File)) || !strings.Contains(stderr, "imlab-load-summary/9") {
				t.Errorf("imlab %s: exit %d, stderr %q: want 2 naming the summary and its format", args[0], code, stderr)
			}
		}
	})
}
