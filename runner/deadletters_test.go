package runner

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"imlab/expect"
	"imlab/result"
	"imlab/scenario"
)

// TestRunDeadLetters runs the shipped dead-letters scenario (MySQL down
// past the lowered transient window): records reach the dead-letter topic,
// the runner reads them through the server's route and the topic itself,
// and result.json — read back as every reader reads it — accounts for
// each: repaired later, none silently gone, each retried for the window.
func TestRunDeadLetters(t *testing.T) {
	f, err := scenario.ReadFile(filepath.Join("../scenarios", "dead-letters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Under the race detector the consumer drains what it held after the
	// outage several times slower (30 s measured, against 2-6 s without):
	// reconciliation's grace must outlast that, or it writes messages whose
	// records the consumer has not reached yet, which the accounting cannot
	// tell from records dropped. The test gives it room; the file's timing
	// is the shipped one's otherwise.
	f.Server.ReconcileGrace = scenario.Duration(45 * time.Second)
	f.Load.Config.Settle = 50 * time.Second
	cfg := e2eConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // runFile's 150 s is short for this under -race
	defer cancel()
	res, err := Run(ctx, cfg, f)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !res.Passed || res.Incomplete {
		t.Fatalf("dead-letters did not pass:\n%s", expect.Table(res.Checks))
	}
	back, err := result.ReadRun(filepath.Join(cfg.OutDir, result.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	d := back.DeadLetters
	if d == nil || !d.Known || d.Records < 1 || d.Inbox != int(d.Records) || d.Transient != int(d.Records) || d.Listed != int(d.Records) ||
		len(d.MsgIDs) == 0 || d.Repaired != len(d.MsgIDs) || len(d.LostIDs) != 0 || len(d.Unaccounted) != 0 || len(d.Early) != 0 ||
		len(d.Mismatch) != 0 || d.WindowMS != 1500 || !d.LabShortWindow || d.Queued == 0 {
		t.Fatalf("dead letters in result.json: %+v", d)
	}
	// Its faults act on MySQL's proxy: that backend, and only it, is
	// behind one.
	if got := settingOf(back.Settings, "proxies"); !strings.HasPrefix(got, "mysql@127.0.0.1:") || strings.Contains(got, " ") {
		t.Fatalf("proxies setting %q: want mysql's proxy alone", got)
	}
	checks := byName(back.Checks)
	for _, n := range []string{"dead_letters_min", "dead_letters_accounted", "dead_letters_retried"} {
		if !checks[n].OK {
			t.Fatalf("%s: %+v", n, checks[n])
		}
	}
}
