package driver

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"imlab/checker"
	"imlab/ledger"
	"imlab/targets/tinode/tinodefake"
)

// sendMix sends n messages round the population: p2p between neighbours
// and every third to the group.
func (r *labRun) sendMix(ctx context.Context, n int) []ledger.Attempt {
	var out []ledger.Attempt
	users := uint64(len(r.pop.Users))
	for i := range n {
		from := uint64(i)%users + 1
		if i%3 == 2 && from <= 3 {
			out = append(out, r.send(ctx, from, ConvGroup, 100))
			continue
		}
		out = append(out, r.send(ctx, from, ConvP2P, from%users+1))
	}
	return out
}

func wantFinding(t *testing.T, v *checker.Verdict, name string, msgs []uint64, text string) {
	t.Helper()
	f := v.Findings[name]
	if f == nil || f.NotMade != "" {
		t.Fatalf("%s: %+v", name, f)
	}
	if msgs != nil && !slices.Equal(f.MsgIDs, msgs) {
		t.Errorf("%s: msg_ids %v, want %v (%+v)", name, f.MsgIDs, msgs, f)
	}
	if text != "" && !strings.Contains(strings.Join(f.Examples, "\n"), text) {
		t.Errorf("%s: examples %q lack %q", name, f.Examples, text)
	}
}

func counts(v *checker.Verdict) map[string]int {
	out := map[string]int{}
	for n, f := range v.Findings {
		if f.Count > 0 {
			out[n] = f.Count
		}
	}
	return out
}

// TestCleanRunValid: a run against a fake without faults is VALID, every
// message delivered to every recipient device and in the witness; the
// inbox findings are not made, with the reason.
func TestCleanRunValid(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := fakeServer(t)
	r := newLabRun(t, ctx, testConfig(srv.URL(), fakeKey, "clean"), 4)
	as := r.sendMix(ctx, 30)
	for _, a := range as {
		if a.Outcome != ledger.OK {
			t.Fatalf("send %+v", a)
		}
	}
	v := r.finish(ctx, checker.Options{})
	if !v.Valid || v.Target != "tinode" || v.OK != 30 {
		t.Fatalf("valid %v target %q ok %d findings %v", v.Valid, v.Target, v.OK, counts(v))
	}
	if f := v.Findings[checker.Skipped]; !strings.Contains(f.NotMade, "no per-user inbox") {
		t.Errorf("skipped: %+v", f)
	}
	if v.Deliveries < 60 {
		t.Errorf("deliveries %d", v.Deliveries)
	}
}

// TestHoleNextIsUnexplainedGap: a publish refused with 500 whose seq the
// topic consumed without storing anything leaves a seq no message, no
// delete and no send of unknown outcome explains.
func TestHoleNextIsUnexplainedGap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := fakeServer(t)
	r := newLabRun(t, ctx, testConfig(srv.URL(), fakeKey, "hole"), 3)
	r.send(ctx, 1, ConvP2P, 2)
	srv.HoleNext(tinodefake.P2PID(r.d.tid[0], r.d.tid[1]), 1, tinodefake.ReplyError)
	if a := r.send(ctx, 1, ConvP2P, 2); a.Outcome != ledger.Fail || a.Status != 500 {
		t.Fatalf("holed send: %+v", a)
	}
	r.send(ctx, 2, ConvP2P, 1)
	v := r.finish(ctx, checker.Options{})
	conv := r.d.p2pConv(0, 1)
	if v.Valid || !slices.Equal(v.Findings[checker.UnexplainedGap].Convs, []uint64{conv}) {
		t.Fatalf("valid %v findings %v gap %+v", v.Valid, counts(v), v.Findings[checker.UnexplainedGap])
	}
	wantFinding(t, v, checker.UnexplainedGap, nil, "1 conv_seqs up to 3 hold no message (2)")
}

// TestErrorButStoreIsFailedButStored: a publish answered 500 whose
// message was stored and delivered anyway.
func TestErrorButStoreIsFailedButStored(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := fakeServer(t)
	r := newLabRun(t, ctx, testConfig(srv.URL(), fakeKey, "ebs"), 3)
	r.send(ctx, 3, ConvGroup, 100)
	srv.ErrorButStore(r.d.groups[0].name, 1)
	if a := r.send(ctx, 3, ConvGroup, 100); a.Outcome != ledger.Fail || a.Status != 500 {
		t.Fatalf("send: %+v", a)
	}
	r.send(ctx, 1, ConvGroup, 100)
	v := r.finish(ctx, checker.Options{})
	if v.Valid {
		t.Fatalf("valid: %v", counts(v))
	}
	wantFinding(t, v, checker.FailedButStored, []uint64{MsgID(1, 2)}, "send 2 was refused (status 500")
}

// TestCommitTimeoutRefusedAfterHeal: tinode/chat #818 as the fake plays
// it: the insert committed but was answered 500, the topic's counter
// stayed behind, and every later publish is refused until the topic
// unloads; a conversation refusing past the bound after the heal.
func TestCommitTimeoutRefusedAfterHeal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := fakeServer(t)
	r := newLabRun(t, ctx, testConfig(srv.URL(), fakeKey, "ct"), 3)
	r.send(ctx, 1, ConvP2P, 3)
	srv.CommitTimeout(tinodefake.P2PID(r.d.tid[0], r.d.tid[2]))
	r.send(ctx, 1, ConvP2P, 3)
	healed := r.now()
	time.Sleep(60 * time.Millisecond)
	for range 3 {
		if a := r.send(ctx, 3, ConvP2P, 1); a.Outcome != ledger.Fail || a.Status != 500 {
			t.Fatalf("send after the heal: %+v", a)
		}
	}
	r.send(ctx, 2, ConvP2P, 3) // another topic is fine
	v := r.finish(ctx, checker.Options{Liveness: &checker.Liveness{Healed: healed, Bound: 50 * time.Millisecond}})
	if v.Valid {
		t.Fatalf("valid: %v", counts(v))
	}
	conv := r.d.p2pConv(0, 2)
	if f := v.Findings[checker.RefusedAfterHeal]; f == nil || f.Count != 3 || !slices.Equal(f.Convs, []uint64{conv}) {
		t.Fatalf("refused-after-heal %+v", f)
	}
	wantFinding(t, v, checker.FailedButStored, []uint64{MsgID(conv, 2)}, "")
	// Unloaded, the topic accepts again; without a liveness bound the
	// finding is not made, with its reason.
	srv.Unload(tinodefake.P2PID(r.d.tid[0], r.d.tid[2]))
}

// TestDropOnPublishIsUnknown: a publish whose connection drops before the
// answer is of unknown outcome: not lost when never stored, recovered
// when stored; the next send opens a new session.
func TestDropOnPublishIsUnknown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := fakeServer(t)
	r := newLabRun(t, ctx, testConfig(srv.URL(), fakeKey, "drop"), 3)
	topic := tinodefake.P2PID(r.d.tid[1], r.d.tid[2])
	r.send(ctx, 2, ConvP2P, 3)
	srv.DropOnPublish(topic, 1, false)
	if a := r.send(ctx, 2, ConvP2P, 3); a.Outcome != ledger.Unknown {
		t.Fatalf("dropped, not stored: %+v", a)
	}
	srv.DropOnPublish(topic, 1, true)
	if a := r.send(ctx, 2, ConvP2P, 3); a.Outcome != ledger.Unknown {
		t.Fatalf("dropped, stored: %+v", a)
	}
	if a := r.send(ctx, 3, ConvP2P, 2); a.Outcome != ledger.OK || a.ConvSeq != 3 {
		t.Fatalf("after: %+v", a)
	}
	v := r.finish(ctx, checker.Options{})
	if !v.Valid || v.Attempts["unknown"] != 2 {
		t.Fatalf("valid %v attempts %v findings %v", v.Valid, v.Attempts, counts(v))
	}
	if f := v.Findings["recovered"]; f == nil || !slices.Equal(f.MsgIDs, []uint64{MsgID(r.d.p2pConv(1, 2), 2)}) {
		t.Fatalf("recovered %+v", f)
	}
}
