package report

import (
	"maps"
	"regexp"
	"slices"
)

// seedRE finds design-document names in page text: "seed 003", "seeds
// 000/003", "seed 000, 003 and 004".
var seedRE = regexp.MustCompile(`(?i)\bseeds?\s+00[034]\b(?:\s*(?:/|,|&|and|or)\s*00[034]\b)*`)

// designDoc says in words what the design document named "seed n" is
// ("" for a number that names none).
func designDoc(n string) string {
	switch n {
	case "000":
		return "the design document on offline messages: the inbox table, per-user seq, pull by cursor, per-device sync cursor, the Redis hot layer and its failure table"
	case "003":
		return "the design document on the message queue: store before deliver, the outbox and its relay, idempotent consumers, per-conversation order, backlog and dead letters, lag as the age of the oldest unprocessed message, reconciliation"
	case "004":
		return "the design document on the MongoDB history: buckets of 100 messages per conversation, position addressing, update-then-insert writes, read-time projection, delete semantics, tombstones for holes"
	}
	return ""
}

// glossary explains every design-document name ("seed 000", "seed 003",
// "seed 004": the specification the lab is built from, which the page's
// reader may not have) that appears anywhere in r's text, in number order.
func glossary(r *Report) []glossView {
	var texts []string
	add := func(ss ...string) { texts = append(texts, ss...) }
	add(r.Title, r.Scenario, r.Description, r.DurationLabel, r.Backends, r.Verdict)
	add(r.Notes...)
	for _, kv := range r.Settings {
		add(kv[0], kv[1])
	}
	for _, c := range r.Checks {
		add(c.Name, c.Want, c.Got)
	}
	for _, f := range r.Findings {
		add(f.Name)
		add(f.Examples...)
	}
	for _, m := range r.Markers {
		add(m.Label)
	}
	for _, c := range r.Charts {
		add(c.Title, c.Unit, c.ThresholdLabel)
		for _, s := range c.Series {
			add(s.Name)
		}
	}
	for _, t := range r.Tables {
		add(t.Title)
		add(t.Header...)
		for _, row := range t.Rows {
			add(row...)
		}
	}
	for _, l := range r.Latencies {
		add(l.Name, l.Of, l.Means, l.Unknown)
	}
	seen := map[string]bool{}
	for _, t := range texts {
		for _, m := range seedRE.FindAllString(t, -1) {
			for _, n := range numRE.FindAllString(m, -1) {
				seen[n] = true
			}
		}
	}
	var out []glossView
	for _, n := range slices.Sorted(maps.Keys(seen)) {
		out = append(out, glossView{Term: "seed " + n, Means: designDoc(n)})
	}
	return out
}

// numRE is a design document's number inside a seedRE match.
var numRE = regexp.MustCompile(`00[034]`)
