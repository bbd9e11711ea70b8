package loadgen

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"imlab/checker"
	"imlab/loadgen/clientmix"
	"imlab/loadgen/summary"
	"imlab/targets/tinode/tinodefake"
)

const tinodeFakeKey = "fake-api-key"

// runTinodeFake runs a load through the tinode driver against the
// protocol fake (prepare sets its faults once the population exists) and
// judges the ledger.
func runTinodeFake(t *testing.T, prepare func(*tinodefake.Server)) (*summary.Summary, *checker.Verdict) {
	t.Helper()
	return runTinodeFakeMix(t, prepare, clientmix.Mix{})
}

// runTinodeFakeMix is runTinodeFake with the client mix mix.
func runTinodeFakeMix(t *testing.T, prepare func(*tinodefake.Server), mix clientmix.Mix) (*summary.Summary, *checker.Verdict) {
	t.Helper()
	srv, err := tinodefake.Start(tinodefake.Config{APIKey: tinodeFakeKey})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg := testConfig(t, "tinode+"+strings.TrimSuffix(srv.URL(), "/v0/channels"), 100, 2*time.Second)
	cfg.TargetOptions = map[string]string{"apikey": tinodeFakeKey}
	cfg.Pop.Users, cfg.Pop.Groups = 8, 2
	cfg.Timeout = 5 * time.Second
	cfg.Mix = mix
	if prepare != nil {
		prepare(srv)
	}
	return runChecked(t, cfg)
}

// runChecked runs cfg's load, bounded by testBound, and judges its ledger.
func runChecked(t *testing.T, cfg Config) (*summary.Summary, *checker.Verdict) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	sum, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := checker.CheckSourcesWith([]checker.Source{{Dir: cfg.RunDir}}, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return sum, v
}

// TestTinodeLoadValid: a load through the tinode driver against the fake
// is VALID: every send ACKed, every recipient device holds every message,
// the conversation log read whole has no gap; the inbox witnesses are not
// made, with the reason.
func TestTinodeLoadValid(t *testing.T) {
	sum, v := runTinodeFake(t, nil)
	if !v.Valid || v.Target != "tinode" || sum.OK != 200 || sum.Fail+sum.Unknown != 0 || len(sum.Errors) > 0 {
		t.Fatalf("valid %v target %q ok %d fail %d unknown %d errors %v findings %v", v.Valid, v.Target, sum.OK, sum.Fail, sum.Unknown, sum.Errors, v.Findings)
	}
	if f := v.Findings[checker.Lost]; f.NotMade != "" || f.Count != 0 {
		t.Errorf("lost %+v", f)
	}
	if !strings.Contains(sum.Evidence.StoreWitness.Reason, "keeps no per-user inbox") {
		t.Errorf("store witness %+v", sum.Evidence.StoreWitness)
	}
}

// TestTinodeLoadMix: the client mix on the tinode driver against the
// fake, every action made often (revokes as hard deletes by the sender
// where it may delete for everyone, deletes and clears as soft deletes,
// reads as the user's read mark, pulls above a conv_seq), is VALID under
// Tinode's semantics, and every action was made and recorded.
func TestTinodeLoadMix(t *testing.T) {
	mix := clientmix.Mix{EnterOnOnline: 1, OpenOnPush: 0.5, HistoryPage: 20, Revoke: 0.05, Delete: 0.3, Clear: 0.05, Read: 0.8}
	sum, v := runTinodeFakeMix(t, nil, mix)
	m := sum.Mix
	if m == nil || m.Entered == 0 || m.ConvPulls == 0 || m.HistoryPages == 0 || m.Revokes == 0 || m.Deletes == 0 || m.Clears == 0 || m.Reads == 0 {
		t.Fatalf("mix %+v", m)
	}
	if !v.Valid || sum.OK != 200 || len(sum.Errors) > 0 {
		t.Fatalf("valid %v ok %d errors %v findings %v", v.Valid, sum.OK, sum.Errors, counts(v))
	}
	for _, n := range []string{checker.HistoryView, checker.ConvPullWrong, checker.HistoryMismatch, checker.HistoryLost} {
		if f := v.Findings[n]; f == nil || f.NotMade != "" || f.Count != 0 {
			t.Errorf("%s: %+v", n, f)
		}
	}
}

// TestTinodeLoadDeleteLogDropped: deletes the fake applies and answers ok
// but leaves out of its delete log (Tinode's range flattening swallowing
// ranges) make the run INVALID through delete-log-dropped, not
// history-lost: the deletions were answered, the log is what is wrong.
func TestTinodeLoadDeleteLogDropped(t *testing.T) {
	// No clears: a later clear by the same user would put a dropped
	// delete's conv_seq back into the log.
	mix := clientmix.Mix{EnterOnOnline: 1, OpenOnPush: 0.5, HistoryPage: 20, Revoke: 0.05, Delete: 0.3, Read: 0.8}
	sum, v := runTinodeFakeMix(t, func(s *tinodefake.Server) { s.DropDelLog("", 5) }, mix)
	if m := sum.Mix; m == nil || m.Deletes < 5 {
		t.Fatalf("mix %+v", m)
	}
	t.Logf("mix %+v; findings %v", sum.Mix, counts(v))
	if v.Valid || v.Findings[checker.DeleteLogDropped].Count == 0 {
		t.Fatalf("valid %v findings %v", v.Valid, counts(v))
	}
	for n, c := range counts(v) {
		if n != checker.DeleteLogDropped && slices.Contains(checker.Deciding, n) {
			t.Errorf("%s %d: only the delete log is wrong", n, c)
		}
	}
}

// counts lists the findings with a count.
func counts(v *checker.Verdict) map[string]int {
	out := map[string]int{}
	for n, f := range v.Findings {
		if f.Count > 0 {
			out[n] = f.Count
		}
	}
	return out
}

// TestTinodeLoadFailedButStored: sends the server answers 500 but stores
// and delivers make the run INVALID through failed-but-stored.
func TestTinodeLoadFailedButStored(t *testing.T) {
	sum, v := runTinodeFake(t, func(s *tinodefake.Server) { s.ErrorButStore("", 3) })
	if v.Valid || sum.Fail != 3 {
		t.Fatalf("valid %v fail %d findings %v", v.Valid, sum.Fail, v.Findings)
	}
	if f := v.Findings[checker.FailedButStored]; f.Count != 3 {
		t.Fatalf("failed-but-stored %+v", f)
	}
}

// TestTinodeLoadReal runs the same load against a real Tinode named by
// IMLAB_TINODE_URL (skipped otherwise, saying so): VALID.
func TestTinodeLoadReal(t *testing.T) {
	url := os.Getenv("IMLAB_TINODE_URL")
	if url == "" {
		t.Skip("IMLAB_TINODE_URL is not set: no real Tinode to run against (set it to ws://HOST:PORT/v0/channels and IMLAB_TINODE_APIKEY to its API key)")
	}
	cfg := testConfig(t, "tinode+"+strings.TrimSuffix(url, "/v0/channels"), 50, 5*time.Second)
	cfg.TargetOptions = map[string]string{"apikey": os.Getenv("IMLAB_TINODE_APIKEY")}
	cfg.Pop.Users, cfg.Pop.Groups = 12, 3
	cfg.Pop.ComeBackEvery = 5 * time.Second
	cfg.Timeout = 10 * time.Second
	sum, v := runChecked(t, cfg)
	if !v.Valid || sum.OK != 250 || len(sum.Errors) > 0 {
		t.Fatalf("valid %v ok %d fail %d unknown %d errors %v findings %v", v.Valid, sum.OK, sum.Fail, sum.Unknown, sum.Errors, v.Findings)
	}
	t.Logf("real Tinode: %d ACKed, %d deliveries; latency (us) response %+v service %+v send delay %+v", sum.OK, sum.Deliveries,
		sum.Latency["response"], sum.Latency["service"], sum.Latency["send_delay"])
}

// TestTinodeRetryAfterUnknownIsUnknown: on a target without idempotent
// sends, a send whose first try had no answer (the connection dropped
// after the fake stored it) and whose retry was refused is of unknown
// outcome, not failed: the first try's message is stored, so "failed"
// would be a false failed-but-stored.
func TestTinodeRetryAfterUnknownIsUnknown(t *testing.T) {
	srv, err := tinodefake.Start(tinodefake.Config{APIKey: tinodeFakeKey})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg := testConfig(t, "tinode+"+strings.TrimSuffix(srv.URL(), "/v0/channels"), 2, 2*time.Second) // sends 500ms apart: the retry comes first
	cfg.TargetOptions = map[string]string{"apikey": tinodeFakeKey}
	cfg.Pop.Users, cfg.Pop.Groups, cfg.Pop.Crashy, cfg.Pop.Online = 2, 0, 0, 1 // one topic: its ACKs name its conv
	cfg.Pop.GroupShare = 0
	cfg.Timeout, cfg.Retries = 2*time.Second, 2
	started := false
	cfg.OnStart = func(time.Time) {
		started = true
		srv.DropOnPublish("", 1, true)
		srv.HoleNext("", 1, tinodefake.ReplyError)
	}
	sum, v := runChecked(t, cfg)
	if !started {
		t.Fatal("OnStart not called")
	}
	if sum.Fail != 0 || sum.Unknown != 1 || sum.RetriedSends != 1 {
		t.Fatalf("fail %d unknown %d retried %d (want 0, 1, 1) findings %v", sum.Fail, sum.Unknown, sum.RetriedSends, v.Findings)
	}
	if f := v.Findings[checker.FailedButStored]; f != nil && f.Count != 0 {
		t.Fatalf("failed-but-stored %+v: a retried send with an unknown try was called failed", f)
	}
	if f := v.Findings[checker.UnexplainedGap]; f != nil && f.Count != 0 {
		t.Fatalf("unexplained-gap %+v: the unknown send explains the hole its retry left", f)
	}
}

// TestTinodeLoadRetryDuplicate: publishes whose connection drops after the
// message was stored are retried (their outcome is unknown) and stored
// again, a new message each time: retry-duplicate, reported, and the run
// stays VALID; nothing is lost.
func TestTinodeLoadRetryDuplicate(t *testing.T) {
	sum, v := runTinodeFake(t, func(s *tinodefake.Server) { s.DropOnPublish("", 2, true) })
	if !v.Valid || sum.Unknown != 0 || sum.RetriedSends != 2 {
		t.Fatalf("valid %v unknown %d retried %d findings %v", v.Valid, sum.Unknown, sum.RetriedSends, v.Findings)
	}
	if f := v.Findings[checker.RetryDuplicate]; f.Count != 2 {
		t.Fatalf("retry-duplicate %+v", f)
	}
}
