package report

import (
	"strconv"
	"strings"
	"testing"
)

// An off-scale threshold's label is not drawn inside the plot, where the
// data's top points lie (a capacity chart's highest rate sits at the top
// right, under where the label was): the chart says it in a note under
// the plot, and only a short stub marks the top edge.
func TestOffScaleThresholdLabelClearOfData(t *testing.T) {
	r := &Report{Title: "t", Charts: []Chart{{Title: "rate vs ACK latency", Unit: "ms", Threshold: 1000, ThresholdLabel: "SLO ack_p99",
		XAxis:  &XAxis{Label: "offered rate", Unit: "sends/s"},
		Series: []Series{{Name: "ACK p99", Dots: true, Points: []Point{{T: 100, V: 20}, {T: 250, V: 90}, {T: 400, V: 200}}}}}}}
	_, doc := render(t, r)
	fig := findAll(doc, elem("figure", "chart"))[0]
	svg := findAll(fig, elem("svg"))[0]
	g := findAll(svg, elem("g", "threshold"))
	if len(g) != 1 {
		t.Fatalf("%d threshold groups, want 1", len(g))
	}
	for _, tx := range findAll(g[0], elem("text")) {
		y, _ := strconv.ParseFloat(attr(tx, "y"), 64)
		// 11-unit glyphs above the baseline y: inside the plot when any
		// part of them is under its top line.
		if y > plotTop && y-11 < plotBottom {
			t.Errorf("off-scale label %q drawn inside the plot (baseline y %v, plot %d..%d), over the data's top points", text(tx), y, plotTop, plotBottom)
		}
	}
	notes := findAll(fig, elem("p", "threshold-note"))
	if len(notes) != 1 {
		t.Fatalf("no note under the chart names the off-scale threshold")
	}
	if got := text(notes[0]); !strings.Contains(got, "SLO ack_p99") || !strings.Contains(got, "1000 ms") || !strings.Contains(got, "off scale") ||
		!strings.Contains(got, "200 ms") {
		t.Errorf("off-scale note %q: want the label, its value, off scale and the largest point", got)
	}
	// To scale, the label stays on its line and no note is written.
	r.Charts[0].Threshold = 300
	_, doc = render(t, r)
	if n := findAll(doc, elem("p", "threshold-note")); len(n) != 0 {
		t.Errorf("threshold to scale got a note: %q", text(n[0]))
	}
	if tx := findAll(findAll(doc, elem("g", "threshold"))[0], elem("text")); len(tx) != 1 || !strings.Contains(text(tx[0]), "SLO ack_p99") {
		t.Errorf("threshold to scale lost its label")
	}
}
