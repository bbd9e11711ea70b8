package report

import (
	"strings"
	"testing"
)

// TestSeriesSlotPicksItsColour: a series with a Slot is drawn in that
// palette colour whatever its position; one without keeps its position's.
func TestSeriesSlotPicksItsColour(t *testing.T) {
	r := sample()
	r.Charts = []Chart{{Title: "cpu", Unit: "cores", Series: []Series{
		{Name: "first", Points: []Point{{T: 0, V: 1}, {T: 1, V: 2}}},
		{Name: "grey one", Slot: 8, Points: []Point{{T: 0, V: 1}, {T: 1, V: 1}}},
	}}}
	var b strings.Builder
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, `stroke="`+seriesColor(7)+`"`) || !strings.Contains(page, `stroke="`+seriesColor(0)+`"`) || strings.Contains(page, `stroke="`+seriesColor(1)+`"`) {
		t.Error("the slotted series is not in its slot's colour, or the other left its position's")
	}
}

// TestCountAxisHasWholeTicks: a chart of counts whose values are all 0 (an
// empty outbox) has whole ticks, not 0.5 records; a chart of seconds keeps
// its fractional ones.
func TestCountAxisHasWholeTicks(t *testing.T) {
	for _, c := range []struct {
		unit string
		half bool
	}{{"records", false}, {"s", true}} {
		r := sample()
		r.Charts = []Chart{{Title: "backlog", Unit: c.unit, Series: []Series{{Name: "outbox", Points: []Point{{T: 0, V: 0}, {T: 1, V: 0}}}}}}
		var b strings.Builder
		if err := WriteHTML(&b, r); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), ">0.5<") || strings.Contains(b.String(), ">0.2<"); got != c.half {
			t.Errorf("%s: fractional ticks %v, want %v", c.unit, got, c.half)
		}
	}
}
