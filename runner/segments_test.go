package runner

import (
	"strings"
	"testing"

	"imlab/expect"
	"imlab/scenario"
)

// The same scenario with its load in one generator and split over two
// generator processes (each with half the rate's senders): the two runs
// send the same number of messages, and the checker judges the two
// segments' ledgers as one valid run.
func TestRunLoadSegments(t *testing.T) {
	const body = `
name: segments-NAME
server:
  policy: strict
load:
  rate: const:1000
  duration: 1s
  users: 60
  devices: 2
  groups: 4
  group_share: 0.2
  group_sizes: "3:50,8:50"
  settle: 1s
  segments: SEGMENTS
expect:
  verdict: valid
  max_lost: 0
  max_skipped: 0
`
	counts := map[string]uint64{}
	for _, c := range []struct{ name, segs string }{{"one", "0"}, {"two", "2"}} {
		t.Run(c.name, func(t *testing.T) {
			f, err := scenario.Parse(c.name+".yaml", []byte(strings.NewReplacer("NAME", c.name, "SEGMENTS", c.segs).Replace(body)))
			if err != nil {
				t.Fatal(err)
			}
			cfg := e2eConfig(t)
			cfg.LoadChildCommand = testLoadChildCommand(t)
			res := runFile(t, cfg, f)
			if !res.Passed || res.Verdict == nil || !res.Verdict.Valid {
				t.Fatalf("did not pass:\n%s", expect.Table(res.Checks))
			}
			counts[c.name] = uint64(res.Verdict.Attempts["ok"] + res.Verdict.Attempts["fail"] + res.Verdict.Attempts["unknown"])
			if res.Verdict.Users != 60 || res.Verdict.Devices != 120 {
				t.Fatalf("judged %d users, %d devices: want every user and device of the run", res.Verdict.Users, res.Verdict.Devices)
			}
		})
	}
	if counts["one"] != 1000 || counts["two"] != counts["one"] {
		t.Fatalf("attempts: one generator %d, two segments %d; want 1000 each", counts["one"], counts["two"])
	}
}
