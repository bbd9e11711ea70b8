package runpage

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"imlab/report"
	"imlab/result"

	"imlab/internal/htmltest"
)

// capacitySmoke is the result.json an `imlab scenario run
// scenarios/capacity-smoke.yaml --out /tmp/gs-cap` wrote (its paths left
// as they were): a search, no sends or lag of its own.
func capacitySmoke(t *testing.T) *result.Result {
	t.Helper()
	res, err := result.ReadResult("testdata/capacity-smoke.result.json")
	if err != nil {
		t.Fatal(err)
	}
	if res.Capacity == nil {
		t.Fatal("the capacity-smoke result has no capacity summary")
	}
	return res
}

// A capacity run's page says what the search measured where its charts
// would be (not "no charts"), gives the answer figure by figure, and no
// cell of its tables is a bare dash: a figure not found says why.
func TestCapacityRunPageSaysWhatWasMeasured(t *testing.T) {
	res := capacitySmoke(t)
	var b bytes.Buffer
	if err := report.WriteHTML(&b, HTMLReport(res)); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	var charts *html.Node
	for _, s := range htmltest.FindAll(doc, "section") {
		if htmltest.Attr(s, "id") == "charts" {
			charts = s
		}
	}
	if charts == nil {
		t.Fatal("no Charts section")
	}
	got := htmltest.Text(charts)
	if strings.Contains(got, "no charts") {
		t.Errorf("the Charts section says only %q", got)
	}
	for _, want := range []string{"capacity search measures step by step", "5 steps (5 checked, 0 INVALID)", filepath.Join(filepath.Dir(res.Capacity.Result), "report.html")} {
		if !strings.Contains(got, want) {
			t.Errorf("the Charts section does not say %q: %q", want, got)
		}
	}
	var table *html.Node
	for _, s := range htmltest.FindAll(doc, "section", "extra") {
		if strings.HasPrefix(htmltest.Text(htmltest.FindAll(s, "h2")[0]), "Capacity search") {
			table = s
		}
	}
	if table == nil {
		t.Fatal("no Capacity search table")
	}
	row := htmltest.Text(htmltest.FindAll(table, "tbody")[0])
	cost := fmt.Sprintf("api[api] %.0f, generator %.0f", res.Capacity.Cost["api[api]"], res.Capacity.Cost["generator"])
	for _, want := range []string{"ack_p99<=2s,errors<=1%", "160 sends/s", "none broke (the search's upper bound held)", "no step met the knee rule", cost} {
		if !strings.Contains(row, want) {
			t.Errorf("capacity row %q lacks %q", row, want)
		}
	}
	for _, td := range htmltest.FindAll(doc, "td") {
		if c := strings.TrimSpace(htmltest.Text(td)); c == "-" || c == "" {
			t.Errorf("a table cell is %q, saying nothing of why", c)
		}
	}
}

// A capacity run's page states the generator settings its search's steps
// ran with (the search's own pacer: the runtime's timers, spin 0, as its
// capacity/result.json records), not the load section's pacer spin that
// no step used.
func TestCapacityRunPageGeneratorSettings(t *testing.T) {
	res := capacitySmoke(t)
	got := settingRow(HTMLReport(res).Settings, "generator")
	if strings.Contains(got, "pacer spin") || !strings.Contains(got, "the capacity search's steps: GOMAXPROCS 2, pacing on the runtime's timers") ||
		!strings.Contains(got, "late: started more than 2 ms after the intended time (capacity/result.json, generator)") {
		t.Fatalf("generator setting %q", got)
	}
}
