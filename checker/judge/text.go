package judge

import (
	"encoding/json"
	"fmt"
	"io"

	"imlab/checker"
	"imlab/loadgen/summary"
)

// Write writes the report as JSON or as text.
func (r *Report) Write(w io.Writer, asJSON bool) error {
	if asJSON {
		return r.WriteJSON(w)
	}
	r.WriteText(w)
	return nil
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	return nil
}

// WriteText writes the human form: the segments, a run's load line, the
// queue lag, the generator's share of the machine, the verdict table and
// the result.
func (r *Report) WriteText(out io.Writer) {
	if r.Note != "" {
		fmt.Fprintln(out, r.Note)
	}
	if sg := r.Segments; sg != nil {
		fmt.Fprintf(out, "run %s: %d of %d segments judged together (fingerprint %s)\n", sg.RunID, sg.Judged, sg.Of, sg.Fingerprint)
		for _, s := range sg.Dirs {
			fmt.Fprintf(out, "  segment %s: %s, shifted %s\n", s.Segment, s.Dir, s.Shift)
		}
	}
	if len(r.sums) == 1 && r.sums[0] != nil {
		writeLoad(out, r.sums[0], r.Verdict, r.limit)
	}
	for _, q := range r.QueueLag {
		fmt.Fprintln(out, q)
	}
	for _, l := range r.LabCPU {
		fmt.Fprintln(out, l)
	}
	r.Verdict.WriteTable(out)
	if len(r.sums) > 1 {
		fmt.Fprintf(out, "verdict written to %s\n", r.VerdictFile)
		if r.Load != nil {
			fmt.Fprintf(out, "load: %s\n", r.Load)
		}
	}
	switch {
	case r.Result == Overloaded:
		fmt.Fprintf(out, "result: VALID but OVERLOADED: not a clean pass (%s)\n", r.Load)
	case r.Load == nil && r.Valid:
		fmt.Fprintln(out, "result: VALID; the load's outcome is unknown (no summary)")
	}
}

// writeLoad writes a run's load beside its verdict: the achieved (ACKed)
// rate with the failed and unknown fractions, the generator's ceiling,
// and a note when an older summary's end_to_end differs from the
// checker's definition.
func writeLoad(w io.Writer, s *summary.Summary, v *checker.Verdict, limit float64) {
	fmt.Fprintf(w, "load: %s\n", s.Outcomes(limit))
	if s.Ceiling != nil {
		fmt.Fprintf(w, "generator ceiling (no-op endpoint): %.0f sends/s; sends started %.0f/s\n", s.Ceiling.PerSec, s.StartedPerSec)
	}
	se, ce := s.Latency["end_to_end"], v.Latency["end_to_end"]
	if se.Count != ce.Count {
		fmt.Fprintf(w, "note: the load summary's end_to_end has %d samples (p99 %s), this check %d (p99 %s): summaries written by an older imlab also counted copies of sends that failed or stayed unknown; the checker counts the first copy per device of ACKed sends only\n",
			se.Count, checker.Dur(se.P99), ce.Count, checker.Dur(ce.P99))
	}
}
