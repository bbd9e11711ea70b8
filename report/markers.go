package report

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// markerText is how much of a marker's name its text in the top margin
// shows.
type markerText int

const (
	textLabel  markerText = iota // the label: shortened to MaxMarkerLabelRunes, whole where it fits (widen)
	textKind                     // the marker kind alone
	textTag                      // a numbered tag ("[2]") that the chart's footnote resolves
	textShared                   // no text: a neighbour's tag names it in the footnote too
	textRides                    // no text: the heal of a short fault, whose inject's text says both (shortFaults)
)

// markerCharWidth estimates one character's width of a marker label (font
// size 11) in SVG user units; labelGap separates neighbours in a row.
const (
	markerCharWidth = 6.3
	labelGap        = 6
)

// markerSlot is where one marker's text went.
type markerSlot struct {
	x      float64
	flip   bool   // the text ends at the line instead of starting there
	label  string // shortened; the kind when the label is empty
	kind   string
	row    int // 0 = top
	text   markerText
	shares int // for textShared: the slot whose tag names this marker too
}

// labelRow is one row of the top margin: the right end of its last text
// and that text's slot.
type labelRow struct {
	used bool
	end  float64
	last int
}

// markerLayout places the texts of one chart's markers, taken in time
// order, in the top margin's rows without overlap, and never drops one:
// a marker gets the lowest row where its label fits, else where its kind
// alone fits, else where a numbered tag fits (the chart's footnote names
// it under that tag). With no room even for a tag, the nearest text
// that ends a row becomes a tag, and the marker gets its own tag beside
// it or, when their lines are closer than a tag's width, shares it.
type markerLayout struct {
	rows     [markerLabelRows]labelRow
	slots    []markerSlot
	tagRunes int // runes of the widest tag the chart can have
}

// newMarkerLayout is the layout of a chart with n markers.
func newMarkerLayout(n int) *markerLayout {
	return &markerLayout{tagRunes: len(strconv.Itoa(max(n, 1))) + 2}
}

// add places the text of the next marker (in time order), a line at x.
func (l *markerLayout) add(x float64, flip bool, label, kind string) {
	i := len(l.slots)
	l.slots = append(l.slots, markerSlot{x: x, flip: flip, label: label, kind: kind, shares: -1})
	for _, t := range []markerText{textLabel, textKind, textTag} {
		// Best a row where no marker line meets the text; else one where
		// lines pass behind it (texts are drawn over every line, each on a
		// halo of the background).
		for _, cross := range []bool{false, true} {
			if row, ok := l.free(i, t, cross); ok {
				l.put(i, row, t)
				return
			}
		}
	}
	l.crowd(i)
}

// runes is the width in runes of slot i's text t.
func (l *markerLayout) runes(i int, t markerText) int {
	switch t {
	case textLabel:
		return utf8.RuneCountInString(l.slots[i].label)
	case textKind:
		return utf8.RuneCountInString(l.slots[i].kind)
	case textTag:
		return l.tagRunes
	}
	return 0
}

// extent is the horizontal span of slot i's text t.
func (l *markerLayout) extent(i int, t markerText) (lo, hi float64) {
	return l.span(i, l.runes(i, t))
}

// extentOf is the horizontal span text would take as slot i's.
func (l *markerLayout) extentOf(i int, text string) (lo, hi float64) {
	return l.span(i, utf8.RuneCountInString(text))
}

// span is the horizontal span of a text of n runes at slot i's line.
func (l *markerLayout) span(i, n int) (lo, hi float64) {
	s := &l.slots[i]
	w := float64(n) * markerCharWidth
	if s.flip {
		return s.x - 3 - w, s.x
	}
	return s.x, s.x + 3 + w
}

// free returns the lowest row where slot i's text t fits: clear of the
// row's last text and, unless cross, of every marker line (crosses).
func (l *markerLayout) free(i int, t markerText, cross bool) (int, bool) {
	lo, hi := l.extent(i, t)
	for row := markerLabelRows - 1; row >= 0; row-- {
		if r := &l.rows[row]; (!r.used || r.end+labelGap <= lo) && (cross || !l.crosses(i, row, lo, hi)) {
			return row, true
		}
	}
	return 0, false
}

// lineClear is how far a marker line keeps from the ends of a text it
// passes (user units).
const lineClear = 0.5

// crosses tells whether slot i's text at [lo, hi] in row would meet a
// marker line, or its own line (from row down to the plot) a text: a line
// starts just above its own text, so it passes every row below it.
func (l *markerLayout) crosses(i, row int, lo, hi float64) bool {
	x := l.slots[i].x
	for j := range i {
		o := &l.slots[j]
		switch {
		case o.text == textShared || o.text == textRides:
			// No text; its line starts at the plot (drawMarkers).
		case o.row < row && o.x > lo+lineClear && o.x < hi-lineClear:
			return true // o's line through this text
		case o.row > row:
			olo, ohi := l.extent(j, o.text)
			if x > olo+lineClear && x < ohi-lineClear {
				return true // this line through o's text
			}
		}
	}
	return false
}

// put gives slot i the text t at the end of row.
func (l *markerLayout) put(i, row int, t markerText) {
	_, hi := l.extent(i, t)
	l.slots[i].row, l.slots[i].text = row, t
	l.rows[row] = labelRow{used: true, end: hi, last: i}
}

// ride adds the line of a marker at x that has no text of its own: the
// text of slot with (placed before it) says it too.
func (l *markerLayout) ride(x float64, with int) {
	l.slots = append(l.slots, markerSlot{x: x, flip: l.slots[with].flip, text: textRides, shares: with})
}

// crowd gives slot i, which has no room even for a tag, the tag of the
// nearest last text of a row, shortened to its tag (its marker is then
// named in the footnote). When that makes room, slot i gets its own tag
// beside it; else (the two lines are closer than a tag's width) the tag
// stands for both. Every row is in use when this is called: else slot i
// would have fitted.
func (l *markerLayout) crowd(i int) {
	best, dist := 0, math.Inf(1)
	for row := markerLabelRows - 1; row >= 0; row-- {
		if d := math.Abs(l.slots[l.rows[row].last].x - l.slots[i].x); d < dist {
			best, dist = row, d
		}
	}
	r := &l.rows[best]
	if p := r.last; l.slots[p].text != textTag {
		_, hi := l.extent(p, textTag)
		l.slots[p].text, r.end = textTag, hi
	}
	if lo, _ := l.extent(i, textTag); r.end+labelGap <= lo {
		l.put(i, best, textTag)
		return
	}
	l.slots[i].row, l.slots[i].text, l.slots[i].shares = best, textShared, r.last
}

// widen gives every slot drawn with its shortened label its whole label
// (full[i]) where that fits: its row's neighbours still clear by labelGap,
// the text inside [lo, hi] of the drawing, and no marker line from a row
// above crossing the added part. It runs after every slot
// is placed, so a longer text never takes a later marker's room.
func (l *markerLayout) widen(full []string, lo, hi float64) {
	for row := range markerLabelRows {
		var in []int // the row's drawn texts, left to right
		for i := range l.slots {
			if s := &l.slots[i]; s.row == row && s.text != textShared && s.text != textRides {
				in = append(in, i)
			}
		}
		slices.SortStableFunc(in, func(a, b int) int {
			la, _ := l.extent(a, l.slots[a].text)
			lb, _ := l.extent(b, l.slots[b].text)
			return cmp.Compare(la, lb)
		})
		for k, i := range in {
			s := &l.slots[i]
			if s.text != textLabel || utf8.RuneCountInString(full[i]) <= utf8.RuneCountInString(s.label) {
				continue
			}
			short := s.label
			s.label = full[i]
			wlo, whi := l.extent(i, textLabel)
			fits := wlo >= lo && whi <= hi
			if fits && k > 0 {
				_, prev := l.extent(in[k-1], l.slots[in[k-1]].text)
				fits = prev+labelGap <= wlo
			}
			if fits && k+1 < len(in) {
				next, _ := l.extent(in[k+1], l.slots[in[k+1]].text)
				fits = whi+labelGap <= next
			}
			// Nor across a line that comes down from a row above (the
			// shortened label crosses none: crosses).
			for j := range l.slots {
				o := &l.slots[j]
				if fits && j != i && o.text != textShared && o.text != textRides && o.row < row && o.x > wlo+lineClear && o.x < whi-lineClear {
					fits = false
				}
			}
			if !fits {
				s.label = short
			}
		}
	}
}

// finish returns each slot's text and the footnotes: footnote k (tag
// "[k+1]") lists its slots, the tag's own first. Tags are numbered left
// to right.
func (l *markerLayout) finish() (texts []string, notes [][]int) {
	texts = make([]string, len(l.slots))
	note := make([]int, len(l.slots)) // the footnote of a tag's slot
	for i, s := range l.slots {
		switch s.text {
		case textLabel:
			texts[i] = s.label
		case textKind:
			texts[i] = s.kind
		case textTag:
			note[i] = len(notes)
			notes = append(notes, []int{i})
			texts[i] = "[" + strconv.Itoa(len(notes)) + "]"
		case textShared:
			// The tag's slot comes first: every slot shares an earlier one.
			k := note[s.shares]
			notes[k] = append(notes[k], i)
		}
	}
	return texts, notes
}

// markerNote is one footnote of a chart: a tag drawn above its markers'
// lines and the markers it stands for.
type markerNote struct {
	Tag   string
	Kind  string // the kind of the tag's own marker, for its colour
	Items []markerNoteItem
}

type markerNoteItem struct{ Kind, Text string }

// markerName is a marker in words for a footnote: its time, then its
// label, led by its kind unless the label already starts with it.
func markerName(xn xNames, m Marker) string {
	t := xn.at(formatValue(m.T)) + " "
	if m.Kind == kindMark {
		return t + m.Label // a chart's own mark: its label says what it is
	}
	switch label := strings.TrimSpace(m.Label); {
	case label == "":
		return t + m.Kind
	case label == m.Kind || strings.HasPrefix(label, m.Kind+" "):
		return t + label
	default:
		return t + m.Kind + ": " + label
	}
}

// shortFaultGap is how close (user units) a heal's line may come to its
// inject's before the two are drawn as one fault: closer, two texts would
// sit on one line, the heal's above the inject's.
const shortFaultGap = 12

// shortFaults pairs each inject with the heal of the same fault (Marker.Fault)
// that follows it when their lines are closer than shortFaultGap: rides[j] = i
// when heal j is drawn without text beside inject i, whose label then says
// both (healedLabel); -1 elsewhere.
func shortFaults(ax axis, markers []Marker) (rides []int) {
	rides = make([]int, len(markers))
	for i := range rides {
		rides[i] = -1
	}
	for i, m := range markers {
		if m.Kind != KindInject || m.Fault == "" {
			continue
		}
		for j := i + 1; j < len(markers); j++ {
			h := markers[j]
			if h.Fault != m.Fault {
				continue
			}
			// The fault's next marker: its heal, or not (an error, injected
			// again) and this inject stands alone.
			if h.Kind == KindHeal && rides[j] < 0 && h.T >= m.T && xPos(ax, h.T)-xPos(ax, m.T) < shortFaultGap {
				rides[j] = i
			}
			break
		}
	}
	return rides
}

// healedSuffix is what an inject's label gains when its heal rides on it:
// how long the fault lasted.
func healedSuffix(inject, heal Marker) string {
	d := time.Duration((heal.T - inject.T) * float64(time.Second))
	if d >= time.Millisecond {
		d = d.Round(time.Millisecond)
	} else {
		d = d.Round(time.Microsecond)
	}
	return ", healed " + d.String() + " later"
}
