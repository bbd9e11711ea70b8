package summary

import (
	"fmt"
	"io"

	"imlab/checker"
)

// WriteText writes the summary as imlab load prints it: the run, its
// split and clock, the generator, the sends and their outcome, the lab's
// CPU, the latencies, the drain, the evidence, the queue lag, the errors.
func (s *Summary) WriteText(w io.Writer) {
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
	if s.Refused > 0 {
		fmt.Fprintf(w, "refused: %d requests answered 401 or 403: the target did not take the lab's credentials for them\n", s.Refused)
	}
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
