package checker

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteTable prints the verdict as a table.
func (v *Verdict) WriteTable(w io.Writer) {
	verdict := "VALID"
	if !v.Valid {
		verdict = "INVALID"
	}
	fmt.Fprintf(w, "verdict: %s  (valid iff every deciding finding (*) is within its allowance, 0 unless named)", verdict)
	if p := v.Partly(); len(p) > 0 {
		fmt.Fprintf(w, "; judged on partial evidence: %s", strings.Join(p, "; "))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "population: %d users, %d devices, %d groups; attempts ok %d, fail %d, unknown %d; deliveries %d; witnessed %d; stored %d; probes %d\n",
		v.Users, v.Devices, v.Groups, v.Attempts["ok"], v.Attempts["fail"], v.Attempts["unknown"], v.Deliveries, v.Witnessed, v.Stored, v.Probes)
	fmt.Fprintf(w, "ledger version %d; server ack policy %s", v.LedgerVersion, cmp.Or(v.Policy, "unknown"))
	if v.Target != "" {
		fmt.Fprintf(w, "; target %s", v.Target)
	}
	fmt.Fprintln(w)
	if c := v.Conversations; c != nil {
		fmt.Fprintf(w, "conversations: %d conv pulls, %d history pages, %d revokes, %d deletes, %d clears, %d reads; history witness %d slots, %d watermarks; retention %d deletions\n",
			c.Pulls, c.Pages, c.Revokes, c.Deletes, c.Clears, c.Reads, c.Slots, c.Watermarks, c.Deletions)
	}
	for _, c := range v.Checks {
		state := "made"
		switch {
		case !c.Made:
			state = "NOT MADE"
		case c.Partial:
			state = "partial"
		}
		detail := c.Detail
		if c.Unexercised {
			detail = "not exercised: " + detail
		}
		fmt.Fprintf(w, "check %-15s %-9s %s\n", c.Name, state, detail)
	}
	fmt.Fprintf(w, "%-22s %9s %9s  %s\n", "finding", "count", "pairs", "msg_ids")
	fmt.Fprintf(w, "%-22s %9d %9s  %s\n", "ok", v.OK, "", "")
	for _, n := range Names {
		f := v.Findings[n]
		if f == nil {
			continue
		}
		ids := make([]string, 0, MaxListed)
		for i, m := range f.MsgIDs {
			if i == MaxListed {
				ids = append(ids, fmt.Sprintf("... (+%d)", len(f.MsgIDs)-MaxListed))
				break
			}
			ids = append(ids, fmt.Sprint(m))
		}
		pairs := ""
		if f.Pairs > 0 || n == Lost || n == Skipped {
			pairs = fmt.Sprint(f.Pairs)
		}
		name := n
		if f.Decides {
			name += " *"
		}
		if f.Allowed > 0 {
			name += fmt.Sprintf(" (≤%d)", f.Allowed)
		}
		count := fmt.Sprint(f.Count)
		if f.NotMade != "" {
			count = "NOT MADE"
		}
		list := strings.Join(ids, " ")
		if n == Duplicated && f.Count > 0 {
			list = fmt.Sprintf("(%d extra copies of %d msg_ids) %s", f.Count, len(f.MsgIDs), list)
		}
		fmt.Fprintf(w, "%-22s %9s %9s  %s\n", name, count, pairs, list)
		if n == Duplicated && f.Count > 0 { // as the report's findings table says it
			fmt.Fprintf(w, "%-22s %9s %9s    %s\n", "", "", "", "allowed: does not decide the verdict (the same message stored again, recognisable by its msg_id)")
		}
		for _, e := range f.Examples {
			fmt.Fprintf(w, "%-22s %9s %9s    e.g. %s\n", "", "", "", e)
		}
	}
	fmt.Fprintln(w, FindingsLegend)
	fmt.Fprintf(w, "%-11s %8s %9s %9s %9s %9s %9s\n", "latency", "count", "p50", "p90", "p99", "p999", "max")
	for _, n := range []string{"response", "service", "send_delay", "end_to_end"} {
		l := v.Latency[n]
		fmt.Fprintf(w, "%-11s %8d %9s %9s %9s %9s %9s\n", n, l.Count, Dur(l.P50), Dur(l.P90), Dur(l.P99), Dur(l.P999), Dur(l.Max))
	}
	fmt.Fprintln(w, LatencyLegend)
	for _, s := range v.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
}

// FindingsLegend defines the columns of the findings rows: count is in each
// finding's own unit, msg_ids lists distinct messages, so the two differ
// where one message counts more than once.
const FindingsLegend = "(count: distinct messages, except duplicated: one per extra copy a device stored; history-mismatch also counts clear watermarks, history-view and conv-pull also count pages wrong without a message to name, refused-after-heal counts refused sends, unexplained-gap conv_seqs; pairs: (message, device) pairs for lost and skipped, (message, uid) for the store findings, (row, device) for retention-unpulled; msg_ids: the distinct messages; NOT MADE: no check that feeds it was made, see the checks)"

// LatencyLegend defines the latency rows of the verdict table (and of the
// load summary, whose histograms follow the same definitions).
const LatencyLegend = "(response: intended send to ACK; end_to_end: intended send to a recipient device's first copy, ACKed sends only)"

// Dur formats a latency in microseconds as a duration to three
// significant digits ("9.42s", "212ms", "840µs").
func Dur(us int64) string {
	d := time.Duration(us) * time.Microsecond
	// Round to a hundredth of the largest power of ten at most d.
	for p := 100 * time.Second; p >= time.Millisecond; p /= 10 {
		if d >= p {
			return d.Round(p / 100).String()
		}
	}
	return d.String()
}

// WriteJSON writes the verdict as indented JSON.
func (v *Verdict) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
