package report

import (
	"math"
	"regexp"
	"strings"
	"testing"
)

func TestNiceAxis(t *testing.T) {
	cases := []struct {
		lo, hi   float64
		target   int
		wantLo   float64
		wantHi   float64
		wantStep float64
		labels   string
	}{
		{0, 100, 10, 0, 100, 10, "0 10 20 30 40 50 60 70 80 90 100"},
		{0, 97.3, 10, 0, 100, 10, "0 10 20 30 40 50 60 70 80 90 100"},
		{0, 4, 5, 0, 4, 1, "0 1 2 3 4"},
		{0, 0.37, 5, 0, 0.4, 0.1, "0 0.1 0.2 0.3 0.4"},
		{0, 0, 5, 0, 1, 0.2, "0 0.2 0.4 0.6 0.8 1.0"},
		{-3, 7, 5, -4, 8, 2, "-4 -2 0 2 4 6 8"},
		{0, 9, 5, 0, 10, 2, "0 2 4 6 8 10"},
		{0, 3600, 10, 0, 4000, 500, "0 500 1000 1500 2000 2500 3000 3500 4000"},
		{0, 48000, 5, 0, 50000, 10000, "0 10k 20k 30k 40k 50k"},
		{0, 2.5e6, 5, 0, 2.5e6, 5e5, "0 0.5M 1.0M 1.5M 2.0M 2.5M"},
		{0, 3e9, 5, 0, 3e9, 1e9, "0 1G 2G 3G"},
		{0, 0.0012, 5, 0, 0.0015, 0.0005, "0 0.0005 0.0010 0.0015"},
	}
	for _, c := range cases {
		a, err := niceAxis(c.lo, c.hi, c.target)
		if err != nil {
			t.Fatalf("niceAxis(%g, %g): %v", c.lo, c.hi, err)
		}
		if !near(a.lo, c.wantLo) || !near(a.hi, c.wantHi) || !near(a.step, c.wantStep) {
			t.Errorf("niceAxis(%g, %g, %d) = [%g, %g] step %g, want [%g, %g] step %g",
				c.lo, c.hi, c.target, a.lo, a.hi, a.step, c.wantLo, c.wantHi, c.wantStep)
		}
		var labels []string
		for _, v := range a.ticks() {
			labels = append(labels, a.label(v))
		}
		if got := strings.Join(labels, " "); got != c.labels {
			t.Errorf("niceAxis(%g, %g) labels %q, want %q", c.lo, c.hi, got, c.labels)
		}
		// 1-2-5 steps only.
		m := a.step / math.Pow10(a.exp)
		if !near(m, 1) && !near(m, 2) && !near(m, 5) {
			t.Errorf("niceAxis(%g, %g) step %g is not 1, 2 or 5 times a power of ten", c.lo, c.hi, a.step)
		}
		if n := len(a.ticks()) - 1; n > c.target+2 {
			t.Errorf("niceAxis(%g, %g) has %d intervals, target %d", c.lo, c.hi, n, c.target)
		}
	}
}

func TestNiceAxisRefusesWhatCannotBeDrawn(t *testing.T) {
	for _, c := range [][2]float64{
		{math.NaN(), 1},
		{0, math.Inf(1)},
		{-math.MaxFloat64, math.MaxFloat64},
	} {
		if _, err := niceAxis(c[0], c[1], 5); err == nil {
			t.Errorf("niceAxis(%g, %g) accepted", c[0], c[1])
		}
	}
}

func TestSeriesColorsDistinct(t *testing.T) {
	hex := regexp.MustCompile(`^#[0-9a-f]{6}$`)
	seen := map[string]int{}
	for _, kind := range []string{KindInject, KindHeal, KindError} {
		stroke, _, _ := markerStyle(kind)
		seen[stroke] = -1
	}
	for i := range MaxSeries {
		c := seriesColor(i)
		if !hex.MatchString(c) {
			t.Fatalf("series %d colour %q is not #rrggbb", i, c)
		}
		if j, dup := seen[c]; dup {
			t.Fatalf("series %d colour %s already used by %d (-1: a marker)", i, c, j)
		}
		seen[c] = i
	}
}

func TestDecimate(t *testing.T) {
	pts := make([]Point, 50001)
	for i := range pts {
		pts[i] = Point{T: float64(i), V: float64(i % 7)}
	}
	out := decimate(pts, MaxPoints)
	if len(out) != MaxPoints {
		t.Fatalf("decimated to %d points, want %d", len(out), MaxPoints)
	}
	if out[0] != pts[0] || out[len(out)-1] != pts[len(pts)-1] {
		t.Fatalf("first/last not kept: %v %v", out[0], out[len(out)-1])
	}
	maxGap := 0.0
	for i := 1; i < len(out); i++ {
		gap := out[i].T - out[i-1].T
		if gap <= 0 {
			t.Fatalf("decimated T not increasing at %d: %g then %g", i, out[i-1].T, out[i].T)
		}
		maxGap = math.Max(maxGap, gap)
	}
	// Evenly: every gap is the floor or the ceiling of 50000/19999.
	if maxGap > 3 {
		t.Fatalf("largest gap %g, want <= 3 (even spacing)", maxGap)
	}
	short := pts[:10]
	if got := decimate(short, MaxPoints); len(got) != 10 {
		t.Fatalf("short series changed length to %d", len(got))
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 1.5: "1.5", 2: "2", 12.34: "12.3", 12.04: "12", 1234.6: "1235", -0.0001: "-0.0001",
		0.25: "0.25", 0.0000123: "1.23e-05",
	} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%g) = %q, want %q", v, got, want)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
