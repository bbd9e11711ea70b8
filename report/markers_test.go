package report

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// crowdedReport is a 16 s chart (0..16 on the time axis: 51.25 user units
// a second) with markers.
func crowdedReport(ms ...Marker) *Report {
	return &Report{Title: "crowded", Markers: ms, Charts: []Chart{
		{Title: "lag", Unit: "s", Series: []Series{{Name: "a", Points: []Point{{T: 0, V: 1}, {T: 16, V: 2}}}}},
		{Title: "throughput", Unit: "msg/s", Series: []Series{{Name: "b", Points: []Point{{T: 0, V: 5}, {T: 16, V: 3}}}}},
	}}
}

// markerLabels are the texts of an svg's markers, in the order of their
// lines (g.marker): drawn after every line, each on a halo.
func markerLabels(svg *html.Node) []*html.Node {
	return findAll(svg, elem("text", "marker-label"))
}

// labelText is a marker text's own words (its hover title aside).
func labelText(n *html.Node) string {
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}

// footnote is one entry of the page's marker footnote as rendered (every
// chart shares the markers and the time axis: one footnote above them).
type footnote struct {
	tag   string
	items []string
}

func footnotes(doc *html.Node) []footnote {
	var out []footnote
	for _, ul := range findAll(doc, elem("ul", "marker-notes")) {
		for _, li := range findAll(ul, elem("li")) {
			if hasClass(li, "lead") {
				continue
			}
			f := footnote{tag: text(findAll(li, elem("b", "tag"))[0])}
			for _, sp := range findAll(li, elem("span")) {
				f.items = append(f.items, text(sp))
			}
			out = append(out, f)
		}
	}
	return out
}

// checkEveryMarkerNamed fails unless every chart of the page names each of
// ms: above its line (its label, shortened or whole, or its kind) or in the
// page's one footnote (time and full label) under a tag drawn on the
// chart. Every footnote's tag is drawn once on each chart, no two texts of
// a row overlap, and no marker's line crosses another's text. It returns
// the number of footnote entries.
func checkEveryMarkerNamed(t *testing.T, doc *html.Node, ms []Marker) int {
	t.Helper()
	sorted := slices.Clone(ms)
	slices.SortStableFunc(sorted, func(a, b Marker) int { return cmp.Compare(a.T, b.T) })
	figs := findAll(doc, elem("figure", "chart"))
	if len(figs) == 0 {
		t.Fatal("no chart")
	}
	if n := len(findAll(doc, elem("ul", "marker-notes"))); n > 1 {
		t.Fatalf("%d marker footnotes: want one for the page", n)
	}
	notes := footnotes(doc)
	entries := 0
	for ci, fig := range figs {
		gs := findAll(fig, elem("g", "marker"))
		labels := markerLabels(fig)
		if len(gs) != len(sorted) || len(labels) != len(sorted) {
			t.Fatalf("chart %d: %d markers and %d texts drawn, want %d", ci+1, len(gs), len(labels), len(sorted))
		}
		drawn := map[string]int{}
		for _, l := range labels {
			drawn[labelText(l)]++
		}
		// inNote finds m in the footnote of tag (any footnote for ""),
		// and uses the entry up: each names one marker.
		used := map[[2]int]bool{}
		inNote := func(m Marker, tag string) string {
			want := "t=" + formatValue(m.T) + " s "
			for fi, f := range notes {
				if tag != "" && f.tag != tag {
					continue
				}
				for ii, it := range f.items {
					named := strings.Contains(it, strings.TrimSpace(m.Label))
					if strings.TrimSpace(m.Label) == "" {
						named = strings.HasSuffix(it, " "+m.Kind)
					}
					if !used[[2]int{fi, ii}] && strings.HasPrefix(it, want) && named {
						used[[2]int{fi, ii}] = true
						return f.tag
					}
				}
			}
			return ""
		}
		tagged := 0 // markers named by a footnote only
		for i, m := range sorted {
			if title := text(findAll(gs[i], elem("title"))[0]); !strings.Contains(title, m.Label) {
				t.Fatalf("chart %d: marker %d title %q is not %q's", ci+1, i, title, m.Label)
			}
			got := labelText(labels[i])
			if got != "" && (got == shorten(m.Label, MaxMarkerLabelRunes) || got == shorten(m.Label, MaxMarkerLabelWideRunes) || got == m.Kind) {
				continue
			}
			tagged++
			if inNote(m, got) == "" {
				t.Errorf("chart %d: marker t=%g %q is drawn with text %q and is not in the footnote of that tag (or of any, with no text)", ci+1, m.T, m.Label, got)
			}
		}
		items := 0
		for _, f := range notes {
			items += len(f.items)
			if drawn[f.tag] != 1 || !strings.HasPrefix(f.tag, "[") {
				t.Errorf("chart %d: footnote tag %q is drawn %d times, want once", ci+1, f.tag, drawn[f.tag])
			}
			if ci == 0 {
				entries += len(f.items)
			}
		}
		if items != tagged {
			t.Errorf("chart %d: %d footnote entries for %d markers drawn without their label or kind", ci+1, items, tagged)
		}
		checkNoLabelOverlap(t, findAll(fig, elem("svg"))[0])
		lineCrossings(t, findAll(fig, elem("svg"))[0])
	}
	return entries
}

// lineCrossings counts the marker texts that a marker's line passes
// through (a line starts just above its own text and runs down to the
// plot), and fails unless every text is drawn over every line on an
// opaque box covering it, so that no line crosses a text's letters.
func lineCrossings(t *testing.T, svg *html.Node) int {
	t.Helper()
	type mk struct {
		x, top float64 // the line: from top down
		lo, hi float64 // the text's span
		y      float64 // the text's baseline
		txt    string
	}
	gs, labels := findAll(svg, elem("g", "marker")), markerLabels(svg)
	boxes := findAll(svg, elem("rect", "marker-box"))
	var ms []mk
	for i, g := range gs {
		ln := findAll(g, elem("line", "marker-line"))[0]
		tx := labels[i]
		x, _ := strconv.ParseFloat(attr(ln, "x1"), 64)
		top, _ := strconv.ParseFloat(attr(ln, "y1"), 64)
		tX, _ := strconv.ParseFloat(attr(tx, "x"), 64)
		y, _ := strconv.ParseFloat(attr(tx, "y"), 64)
		w := float64(len([]rune(labelText(tx)))) * markerCharWidth
		lo, hi := tX, tX+w
		if attr(tx, "text-anchor") == "end" {
			lo, hi = tX-w, tX
		}
		ms = append(ms, mk{x: x, top: top, lo: lo, hi: hi, y: y, txt: labelText(tx)})
		if labelText(tx) == "" {
			continue
		}
		if len(boxes) == 0 {
			t.Fatalf("marker text %q has no box under it", labelText(tx))
		}
		b := boxes[0]
		boxes = boxes[1:]
		bx, _ := strconv.ParseFloat(attr(b, "x"), 64)
		bw, _ := strconv.ParseFloat(attr(b, "width"), 64)
		by, _ := strconv.ParseFloat(attr(b, "y"), 64)
		bh, _ := strconv.ParseFloat(attr(b, "height"), 64)
		if bx > lo+0.1 || bx+bw < hi-0.1 || by > y-9 || by+bh < y+1 || attr(b, "fill") != "#ffffff" {
			t.Errorf("the box under %q (x %.1f+%.1f, y %.1f+%.1f) does not cover its text (x %.1f..%.1f, baseline %.1f)", labelText(tx), bx, bw, by, bh, lo, hi, y)
		}
	}
	// Every text comes after every line in the document: drawn over them.
	var order []string
	for _, n := range findAll(svg, func(n *html.Node) bool {
		return (n.Data == "line" && hasClass(n, "marker-line")) || (n.Data == "text" && hasClass(n, "marker-label")) || (n.Data == "rect" && hasClass(n, "marker-box"))
	}) {
		order = append(order, map[string]string{"line": "line", "text": "text", "rect": "text"}[n.Data])
	}
	last := -1
	for k, o := range order {
		if o == "line" {
			last = k
		}
	}
	if i := slices.Index(order, "text"); i >= 0 && i < last {
		t.Error("a marker text is drawn before a marker line: the line would cross it")
	}
	n := 0
	for i, a := range ms {
		for j, b := range ms {
			if i != j && b.txt != "" && a.x != b.x && a.top < b.y && a.x > b.lo+lineClear && a.x < b.hi-lineClear {
				n++
			}
		}
	}
	return n
}

// checkNoLabelOverlap fails when two marker texts of one row overlap.
func checkNoLabelOverlap(t *testing.T, svg *html.Node) int {
	t.Helper()
	type span struct{ lo, hi float64 }
	rows := map[string][]span{}
	for _, tx := range markerLabels(svg) {
		if labelText(tx) == "" {
			continue
		}
		x, _ := strconv.ParseFloat(attr(tx, "x"), 64)
		w := float64(len([]rune(labelText(tx)))) * markerCharWidth
		s := span{x, x + w}
		if attr(tx, "text-anchor") == "end" {
			s = span{x - w, x}
		}
		y := attr(tx, "y")
		for _, o := range rows[y] {
			if s.lo < o.hi && o.lo < s.hi {
				t.Errorf("label %q at y %s overlaps another in its row", labelText(tx), y)
			}
		}
		rows[y] = append(rows[y], s)
	}
	return len(rows)
}

// Three markers within 3 user units, behind a long label that holds the
// lowest row: the third had no room for its label, its kind or the row.
func TestCrowdedMarkersAllNamed(t *testing.T) {
	ms := []Marker{
		{T: 1, Label: "inject latency(redis,50ms,jitter=10ms)", Kind: KindInject},
		{T: 2, Label: "heal kill(consumer)", Kind: KindHeal},
		{T: 2.03, Label: "inject kill(consumer)", Kind: KindInject},
		{T: 2.06, Label: "inject kafka_record_loss (120 records)", Kind: KindInject},
	}
	out, doc := render(t, crowdedReport(ms...))
	if n := checkEveryMarkerNamed(t, doc, ms); n == 0 {
		t.Fatal("no footnote: the crowded markers all had room, the test no longer tests crowding")
	}
	if !strings.Contains(out, "t=2.06 s inject kafka_record_loss (120 records)") {
		t.Error("the footnote does not name the crowded marker by its time and label")
	}
	svgFragments(t, out)
}

// Runs aligned on one page put the same fault of every run at one instant:
// the markers share tags, and every one is in a footnote.
func TestMarkersAtOneInstantShareATag(t *testing.T) {
	var ms []Marker
	for run := range 6 {
		ms = append(ms, Marker{T: 4, Label: fmt.Sprintf("run %d: inject down(kafka)", run+1), Kind: KindInject})
	}
	ms = append(ms, Marker{T: 4.01, Label: "run 1: error restart failed", Kind: KindError})
	_, doc := render(t, crowdedReport(ms...))
	checkEveryMarkerNamed(t, doc, ms)
	shared := false
	for _, f := range footnotes(doc) {
		shared = shared || len(f.items) > 1
	}
	if !shared {
		t.Error("seven markers at one instant, and no tag stands for several")
	}
}

// Near the right edge the texts end at their lines.
func TestCrowdedMarkersAtTheRightEdgeAllNamed(t *testing.T) {
	var ms []Marker
	for i := range 7 {
		ms = append(ms, Marker{T: 15 + 0.05*float64(i), Label: fmt.Sprintf("heal partition(%d)", i), Kind: KindHeal})
	}
	_, doc := render(t, crowdedReport(ms...))
	if n := checkEveryMarkerNamed(t, doc, ms); n == 0 {
		t.Fatal("no footnote for seven markers within 20 user units")
	}
}

// Markers whose labels fit keep them, and the chart has no footnote.
func TestFittingMarkersHaveNoFootnote(t *testing.T) {
	r := sample()
	_, doc := render(t, r)
	if len(findAll(doc, elem("ul", "marker-notes"))) != 0 {
		t.Fatal("a footnote on a page whose marker labels all fit")
	}
	for ci, svg := range findAll(doc, elem("svg")) {
		var got []string
		for _, l := range markerLabels(svg) {
			got = append(got, labelText(l))
		}
		if s := strings.Join(got, "|"); s != "inject latency(redis,50ms)|heal latency(redis)|consumer restart failed" {
			t.Errorf("chart %d marker texts %q, want every label in full", ci+1, s)
		}
		if n := lineCrossings(t, svg); n != 0 {
			t.Errorf("chart %d: %d marker lines pass a text where there is room for none to", ci+1, n)
		}
	}
	checkEveryMarkerNamed(t, doc, r.Markers)
}

// Random bursts of markers, in clusters and alone, over the whole axis.
func TestRandomMarkersAllNamed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 14))
	kinds := []string{KindInject, KindHeal, KindError, KindAlign}
	for iter := range 60 {
		var ms []Marker
		for range 1 + rng.IntN(12) {
			at := rng.Float64() * 16
			for range 1 + rng.IntN(5) {
				k := kinds[rng.IntN(len(kinds))]
				label := "" // the kind stands for it
				if rng.IntN(4) > 0 {
					label = "#" + strconv.Itoa(len(ms)) + " " + strings.Repeat("x", rng.IntN(36))
				}
				ms = append(ms, Marker{T: at + rng.Float64()*0.3, Label: label, Kind: k})
			}
		}
		_, doc := render(t, crowdedReport(ms...))
		checkEveryMarkerNamed(t, doc, ms)
		if t.Failed() {
			t.Fatalf("iteration %d: markers %v", iter, ms)
		}
	}
}

// A label longer than MaxMarkerLabelRunes is drawn whole where its row
// has room, and shortened where the whole text would reach a neighbour's.
func TestLongMarkerLabelsWholeWhereRoom(t *testing.T) {
	long := "inject kafka_record_loss(imlab.fanout.msg: 342 records)" // 55 runes
	for _, c := range []struct {
		name string
		ms   []Marker
		want []string
	}{
		{"alone", []Marker{{T: 2, Kind: "inject", Label: long}}, []string{long}},
		{"a neighbour 5 s on, in the same row", []Marker{{T: 2, Kind: "inject", Label: long}, {T: 7, Kind: "heal", Label: "heal kill(consumer)"}},
			[]string{shorten(long, MaxMarkerLabelRunes), "heal kill(consumer)"}},
		// The next marker's line starts just past the shortened label
		// (so its text goes a row up) and would cross the whole one.
		{"a line from the row above just past it", []Marker{{T: 2, Kind: "inject", Label: long}, {T: 6.04, Kind: "heal", Label: "heal kill(consumer)"}},
			[]string{shorten(long, MaxMarkerLabelRunes), "heal kill(consumer)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := crowdedReport(c.ms...)
			_, doc := render(t, r)
			svg := findAll(doc, elem("svg"))[0]
			var got []string
			for _, l := range markerLabels(svg) {
				got = append(got, labelText(l))
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("marker texts %q, want %q", got, c.want)
			}
			checkEveryMarkerNamed(t, doc, r.Markers)
			checkNoLabelOverlap(t, svg)
		})
	}
}

// A fault schedule of three faults a second or so apart (strict-mysql's)
// on a 12 s axis: every marker keeps its label (none is reduced to a
// numbered tag), and where a line must pass a label the label is drawn
// over it, on a halo.
func TestScheduleLabelsStayReadable(t *testing.T) {
	ms := []Marker{
		{T: 1, Label: "inject latency(mysql,300ms)", Kind: KindInject}, {T: 2.5, Label: "heal latency(mysql,300ms)", Kind: KindHeal},
		{T: 3, Label: "inject reset_peer(mysql)", Kind: KindInject}, {T: 4, Label: "heal reset_peer(mysql)", Kind: KindHeal},
		{T: 5, Label: "inject down(mysql)", Kind: KindInject}, {T: 6, Label: "heal down(mysql)", Kind: KindHeal},
	}
	r := &Report{Title: "schedule", Markers: ms, Charts: []Chart{{Title: "throughput", Unit: "msg/s",
		Series: []Series{{Name: "ok", Points: []Point{{T: 0, V: 1}, {T: 12, V: 2}}}}}}}
	_, doc := render(t, r)
	svg := findAll(doc, elem("svg"))[0]
	for i, l := range markerLabels(svg) {
		if got := labelText(l); !strings.HasPrefix(ms[i].Label, strings.TrimSuffix(got, "…")) || len(got) < 8 {
			t.Errorf("marker %q drawn as %q: want its label", ms[i].Label, got)
		}
	}
	lineCrossings(t, svg)
	checkEveryMarkerNamed(t, doc, ms)
}

// TestShortFaultRidesOnItsInject: a heal 10 ms after its inject (one line
// on a 16 s chart) has no text of its own; the inject's says how long the
// fault lasted, its cut label keeping that; no two texts overlap.
func TestShortFaultRidesOnItsInject(t *testing.T) {
	r := &Report{Title: "t", Charts: []Chart{{Title: "c", Series: []Series{{Name: "a", Points: []Point{{T: 0, V: 1}, {T: 16, V: 2}}}}}}}
	r.Markers = []Marker{{T: 1, Label: "inject latency(redis,50ms,jitter=10ms)", Kind: KindInject, Fault: "latency(redis,50ms,jitter=10ms)"},
		{T: 1.01, Label: "heal latency(redis,50ms,jitter=10ms)", Kind: KindHeal, Fault: "latency(redis,50ms,jitter=10ms)"},
		{T: 5, Label: "inject down(kafka)", Kind: KindInject, Fault: "down(kafka)"}, {T: 9, Label: "heal down(kafka)", Kind: KindHeal, Fault: "down(kafka)"}}
	shown := func() []string {
		_, doc := render(t, r)
		svg := findAll(doc, elem("svg"))[0]
		checkNoLabelOverlap(t, svg)
		var shown []string
		for _, tx := range findAll(svg, elem("text", "marker-label")) {
			if s := ownText(tx); s != "" {
				shown = append(shown, s)
			}
		}
		return shown
	}
	// The next fault 4 s later leaves room for the label cut, not for the
	// whole one.
	if got := shown(); len(got) != 3 || got[0] != "inject laten…, healed 10ms later" || got[1] != "inject down(kafka)" || got[2] != "heal down(kafka)" {
		t.Fatalf("marker texts %q", got)
	}
	r.Markers[2].T, r.Markers[3].T = 12, 14
	if got := shown(); len(got) != 3 || got[0] != "inject latency(redis,50ms,jitter=10ms), healed 10ms later" {
		t.Fatalf("marker texts %q", got)
	}
}

// ownText is an element's own text, without its children's (a marker
// label's title).
func ownText(n *html.Node) string {
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}
