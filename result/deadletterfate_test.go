package result

import (
	"path/filepath"
	"strings"
	"testing"

	"imlab/ref/server"
)

// replay rebuilds the dead-letter input of a stored run from what its
// result.json holds: its fault events, lag samples, repairs and lost
// messages, the reconciler's grace from its file, and the fan-out topic's
// messages at the end given as its unaccounted ones (result.json keeps
// only the count of the others, which were neither repaired nor lost and
// so take no part in the account).
func replay(t *testing.T, file string) (*Result, DeadLetterInput) {
	t.Helper()
	back, err := ReadRun(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	d := back.DeadLetters
	if d == nil || !d.Known || d.Records != 0 {
		t.Fatalf("%s: want a known account and no letters: %+v", file, d)
	}
	queued := map[uint64]bool{}
	for _, id := range d.Unaccounted {
		queued[id] = true
	}
	in := DeadLetterInput{Route: &server.DeadLettersAnswer{Topic: d.Topic, InboxGroup: "imlab-inbox", HistoryGroup: "imlab-history"},
		Queued: queued, Repaired: back.Repairs.MsgIDs, Ledger: true, Events: back.Events, Lag: back.Lag,
		ReconcileGraceS: back.Spec.Server.ReconcileGrace.D().Seconds()}
	for _, f := range back.Findings {
		if f.Name == "lost" {
			in.Lost = f.MsgIDs
		}
	}
	return back, in
}

// TestAccountQueueLossStore replays a queue-loss-store run (the consumer
// killed, the fan-out topic's records deleted by kafka_record_loss,
// reconciliation every second with a 1s grace). The records the fault
// deleted unconsumed are the messages not in the topic at the end, and the
// account names the fault and what it deleted; the messages published
// after it were in the topic, repaired while the restarted consumer was
// seconds behind: not said to be skipped by the consumer.
func TestAccountQueueLossStore(t *testing.T) {
	back, in := replay(t, "queue-loss-store.result.json")
	s := AccountDeadLetters(in)
	stored := back.DeadLetters
	if len(s.Unaccounted) != len(stored.Unaccounted) || s.NeverQueued != stored.NeverQueued || stored.Queued != len(stored.Unaccounted) {
		t.Fatalf("replay: unaccounted %d, never queued %d; the run said %d, %d (queued %d)",
			len(s.Unaccounted), s.NeverQueued, len(stored.Unaccounted), stored.NeverQueued, stored.Queued)
	}
	if len(s.RemovedBy) != 1 || s.RemovedBy[0].Affected != 449 || !s.InboxBehind || s.InboxPeakAgeS < 4 || s.ReconcileGraceS != 1 {
		t.Fatalf("removed by %+v, behind %v (peak %.2fs, grace %.1fs)", s.RemovedBy, s.InboxBehind, s.InboxPeakAgeS, s.ReconcileGraceS)
	}
	line := s.AccountLine()
	for _, want := range []string{
		"224 repaired or lost were not in the fan-out topic at the end: taken out of it by the run's fault " +
			"(kafka_record_loss(imlab.scn.df45b22a16) at t=3.3s removed 449 records, consumed or not), or never published",
		"451 queued messages repaired by reconciliation before the consumer delivered them, none dead-lettered " +
			"(the inbox consumer was up to 4.6s behind, against the reconciler's 1s grace: " +
			"records it had not reached yet cannot be told from records it skipped)",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("line lacks %q:\n%s", want, line)
		}
	}
	if strings.Contains(line, "the consumer skipped") {
		t.Errorf("line blames the consumer:\n%s", line)
	}
}

// TestAccountConsumerSkips replays a run of the shipped consumer-skips-records
// defect (ref/fanout acknowledges about one record in 8 unwritten) on the
// store policy, reconciliation every second with a 2s grace and no fault:
// the consumer kept up (0.1s behind at most), so the queued messages that
// reconciliation repaired are the consumer's skips, and said so.
func TestAccountConsumerSkips(t *testing.T) {
	back, in := replay(t, "consumer-skips.result.json")
	if got := settingOf(back, "defects"); !strings.HasPrefix(got, "consumer-skips-records") {
		t.Fatalf("defects setting %q", got)
	}
	s := AccountDeadLetters(in)
	line := s.AccountLine()
	if s.InboxBehind || len(s.Unaccounted) != 79 || s.NeverQueued != 0 || len(s.RemovedBy) != 0 ||
		!strings.Contains(line, "; 79 queued messages the consumer skipped (neither delivered nor dead-lettered; each repaired later or counted lost above)") {
		t.Fatalf("behind %v (peak %.2fs), unaccounted %d, never queued %d; line:\n%s", s.InboxBehind, s.InboxPeakAgeS, len(s.Unaccounted), s.NeverQueued, line)
	}
}

func settingOf(r *Result, name string) string {
	for _, s := range r.Settings {
		if s.Name == name {
			return s.Value
		}
	}
	return ""
}

// TestAccountConsumerKeptUp: the same messages, queued and repaired, with a
// consumer that never fell behind the grace are skipped by the consumer,
// and said so; so is a queued message lost.
func TestAccountConsumerKeptUp(t *testing.T) {
	_, in := replay(t, "queue-loss-store.result.json")
	in.Events = nil
	in.Lag = []LagSample{{T: 1, MaxAge: map[string]float64{"imlab-inbox": 0.1}}, {T: 2, MaxAge: map[string]float64{"imlab-inbox": 0.2}}}
	in.ReconcileGraceS = 5
	s := AccountDeadLetters(in)
	line := s.AccountLine()
	if s.InboxBehind || !strings.Contains(line, "; 451 queued messages the consumer skipped (neither delivered nor dead-lettered") ||
		!strings.Contains(line, "224 repaired or lost were not in the fan-out topic at the end (never published, or removed by a fault)") {
		t.Fatalf("behind %v, line:\n%s", s.InboxBehind, line)
	}
	// Behind, a queued message lost is still the consumer's.
	in.Lag, in.Lost = nil, s.Unaccounted[:1]
	line = AccountDeadLetters(in).AccountLine()
	if !strings.Contains(line, "; 450 queued messages repaired by reconciliation") || !strings.Contains(line, "the inbox consumer's lag was not measured") ||
		!strings.Contains(line, "; 1 queued messages the consumer skipped (neither delivered nor dead-lettered; counted lost above)") {
		t.Fatalf("line:\n%s", line)
	}
}
