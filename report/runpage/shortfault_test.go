package runpage

import (
	"bytes"
	"regexp"
	"testing"

	"imlab/report"
	"imlab/result"
)

var markerText = regexp.MustCompile(`<text class="marker-label (\w+)"[^>]*><title>[^<]*</title>([^<]*)</text>`)

// drawnLabels are the marker texts drawn on a run's page, by kind.
func drawnLabels(t *testing.T, res *result.Result) map[string][]string {
	t.Helper()
	var b bytes.Buffer
	if err := report.WriteHTML(&b, HTMLReport(res)); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, m := range markerText.FindAllStringSubmatch(b.String(), -1) {
		if m[2] != "" {
			out[m[1]] = append(out[m[1]], m[2])
		}
	}
	return out
}

// TestShortFaultOneLabel: a fault healed 5 ms after its inject (one line on
// the chart) is drawn with one text on each chart, the inject's, saying how
// long it lasted, not two texts stacked on one line; a fault of seconds
// keeps a text for each.
func TestShortFaultOneLabel(t *testing.T) {
	res := sampleResult()
	res.Events = []result.FaultEvent{{At: 1, Fault: "redis_wipe", Kind: "redis_wipe", Action: "inject", Affected: 10}, {At: 1.005, Fault: "redis_wipe", Kind: "redis_wipe", Action: "heal"}}
	got := drawnLabels(t, res)
	if len(got["heal"]) != 0 || len(got["inject"]) == 0 {
		t.Fatalf("labels %q: want the inject's alone", got)
	}
	for _, l := range got["inject"] {
		if l != "inject redis_wipe (10 keys deleted), healed 5ms later" {
			t.Errorf("inject label %q", l)
		}
	}
	res.Events[1].At = 2.5
	if got := drawnLabels(t, res); len(got["heal"]) == 0 || len(got["heal"]) != len(got["inject"]) {
		t.Fatalf("labels %q: a 1.5 s fault keeps both", got)
	}
}
