package capacity

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"imlab/internal/htmltest"
)

// Geometry of the page's tables, to estimate their narrowest width the
// way a browser lays them out: a cell wraps only between words, so a
// column is at least its longest word wide.
const (
	// pageContentPx is what the page's main column holds: max-width
	// 960px less 20px of padding each side (report's pageStyle).
	pageContentPx = 920
	// charPx is a generous average glyph width at the tables' .92em of
	// 16px (bold headers included).
	charPx = 8.5
	// cellPadPx is a cell's padding (8px each side) and border.
	cellPadPx = 17
)

// minTableWidth is the narrowest the table can be laid out: per column
// the longest word of its header and cells.
func minTableWidth(table *html.Node) (float64, []string) {
	var widest []int
	var words []string
	for _, tr := range htmltest.FindAll(table, "tr") {
		col := 0
		for c := tr.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode || (c.Data != "td" && c.Data != "th") {
				continue
			}
			if col == len(widest) {
				widest, words = append(widest, 0), append(words, "")
			}
			for _, w := range strings.Fields(htmltest.Text(c)) {
				if n := len([]rune(w)); n > widest[col] {
					widest[col], words[col] = n, w
				}
			}
			col++
		}
	}
	px := 0.0
	for _, n := range widest {
		px += float64(n)*charPx + cellPadPx
	}
	return px, words
}

// wideResult is a search whose every figure is measured, with a step
// that broke on two terms and one where the generator took more than
// half of the machine: the widest cells the steps table has.
func wideResult() *Result {
	r := pageResult()
	for _, st := range r.Steps {
		st.Phase = "repeat"
		st.AckedPerSec, st.ServiceP99Ms, st.SendDelayP99Ms = ptr(st.OfferedPerSec), ptr(12345.6), ptr(23456.7)
		st.LateFraction, st.ErrorRate, st.UnknownRate, st.LagS = ptr(0.1234), ptr(0.01234), ptr(0.00123), ptr(123.45)
		st.Valid, st.GeneratorCPUShare = ptr(true), ptr(0.62)
		st.GeneratorOverHalf, st.Missed = true, 3
		if !st.Held {
			st.Limit, st.GeneratorBehind = "server", true
			st.Broken = []string{"ack p99 12345.6 ms > 200 ms", "errors 1.234% > 0.100%"}
		}
	}
	return r
}

// The steps table fits the page (a 1280px-wide window shows the page's
// 960px main column): its verdict column is not behind a horizontal
// scrollbar. Abbreviated headers are explained under the table.
func TestStepsTableFitsThePage(t *testing.T) {
	var page bytes.Buffer
	if err := wideResult().WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&page)
	if err != nil {
		t.Fatal(err)
	}
	var steps *html.Node
	for _, s := range htmltest.FindAll(doc, "section", "extra") {
		if h := htmltest.FindAll(s, "h2"); len(h) == 1 && htmltest.Text(h[0]) == "Steps" {
			steps = s
		}
	}
	if steps == nil {
		t.Fatal("no Steps table")
	}
	table := htmltest.FindAll(steps, "table")[0]
	px, words := minTableWidth(table)
	if px > pageContentPx {
		t.Errorf("steps table at least %.0fpx wide, the page holds %dpx: its last columns scroll out of sight (longest word per column %q)", px, pageContentPx, words)
	}
	ths := htmltest.FindAll(table, "th")
	if len(ths) == 0 || htmltest.Text(ths[len(ths)-1]) != "verdict" {
		t.Fatalf("the verdict is not the table's last column")
	}
	for _, td := range htmltest.FindAll(table, "td") {
		if strings.Contains(htmltest.Text(td), "BROKE (server, and the generator fell behind): ack p99") {
			return
		}
	}
	t.Error("no verdict cell gives the broken step's reasons")
}

// A step's live line says a figure it did not measure is unknown (the
// lag of a set-up without a queue, the latency of a step without an
// ACK), never a bare "-".
func TestStepLineSaysUnknown(t *testing.T) {
	st := &Step{Index: 3, Phase: "ramp", OfferedPerSec: 160, AckedPerSec: ptr(160.0), AckP50Ms: ptr(5.4), AckP99Ms: ptr(56.0), ErrorRate: ptr(0.0), Held: true}
	l := stepLine(st)
	if strings.Contains(l, " - ") || !strings.Contains(l, "lag unknown (no complete lag poll") || !strings.Contains(l, "ack p50 5.4 ms p99 56.0 ms") {
		t.Errorf("step line %q", l)
	}
	st = &Step{Index: 4, Phase: "bisect", OfferedPerSec: 300, LagS: ptr(0.25), StoppedEarly: "stalled", Limit: "server", Broken: []string{"stopped early"}}
	l = stepLine(st)
	if strings.Contains(l, " - ") || !strings.Contains(l, "acked unknown, ack p50 unknown p99 unknown, errors unknown") || !strings.Contains(l, "lag 0.25 s") {
		t.Errorf("step line %q", l)
	}
}
