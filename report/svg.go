package report

import (
	"fmt"
	"math"
	"strconv"
)

// Geometry of one chart, in SVG user units (the viewBox). The plot area is
// [plotLeft, plotRight] x [plotTop, plotBottom]; marker labels sit in the
// top margin, tick labels and the time caption in the bottom one.
const (
	svgWidth   = 900
	svgHeight  = 280
	plotLeft   = 64
	plotRight  = 884
	plotTop    = 48
	plotBottom = 244

	// Wanted number of tick intervals per axis; the 1-2-5 step that
	// reaches at most this many is used.
	xTickTarget = 10
	yTickTarget = 5

	// Marker labels are staggered over this many rows so that neighbours
	// do not overlap; a label is right-aligned when its line is closer
	// than markerFlipRoom to the right edge.
	markerLabelRows = 3
	markerRowHeight = 12
	markerFlipRoom  = 180
)

// axis is a nice linear axis: [lo, hi] in steps of step = m·10^exp, m ∈ {1, 2, 5}.
type axis struct {
	lo, hi, step float64
	exp          int
}

// niceAxis returns the axis with the smallest 1-2-5 step that divides
// [lo, hi] into at most target intervals, widened outwards to whole steps.
// An empty range is widened first ([0, 1] for [0, 0]); a range whose span
// is not a finite positive number cannot be drawn.
func niceAxis(lo, hi float64, target int) (axis, error) {
	if !finite(lo) || !finite(hi) {
		return axis{}, fmt.Errorf("%w: axis range [%g, %g] is not finite", ErrInvalid, lo, hi)
	}
	if hi < lo {
		lo, hi = hi, lo
	}
	if hi == lo {
		if lo == 0 {
			hi = 1
		} else {
			pad := math.Abs(lo) / 2
			lo, hi = lo-pad, hi+pad
		}
	}
	span := hi - lo
	if !finite(span) || span <= 0 {
		return axis{}, fmt.Errorf("%w: axis range [%g, %g] is too wide to draw", ErrInvalid, lo, hi)
	}
	rough := span / float64(target)
	exp := int(math.Floor(math.Log10(rough)))
	mag := math.Pow10(exp)
	if mag == 0 || !finite(mag) {
		return axis{}, fmt.Errorf("%w: axis range [%g, %g] cannot be divided into ticks", ErrInvalid, lo, hi)
	}
	var m float64
	switch norm := rough / mag; {
	case norm <= 1+1e-9:
		m = 1
	case norm <= 2+1e-9:
		m = 2
	case norm <= 5+1e-9:
		m = 5
	default:
		m, exp = 1, exp+1
	}
	step := m * math.Pow10(exp)
	a := axis{lo: math.Floor(lo/step) * step, hi: math.Ceil(hi/step) * step, step: step, exp: exp}
	if !finite(a.lo) || !finite(a.hi) || a.hi <= a.lo {
		return axis{}, fmt.Errorf("%w: axis range [%g, %g] cannot be divided into ticks", ErrInvalid, lo, hi)
	}
	return a, nil
}

// ticks returns the tick values lo, lo+step, ..., hi.
func (a axis) ticks() []float64 {
	n0 := math.Round(a.lo / a.step)
	n := int(math.Round(a.hi/a.step - n0))
	out := make([]float64, 0, n+1)
	for i := 0; i <= n; i++ {
		out = append(out, (n0+float64(i))*a.step)
	}
	return out
}

// label formats a tick value with as many decimals as the step needs.
// Large axes use an SI suffix (k from 10^4, M from 10^6, G from 10^9) when
// that needs at most one decimal.
func (a axis) label(v float64) string {
	if v == 0 {
		return "0"
	}
	type suffix struct {
		from float64
		exp  int
		name string
	}
	maxAbs := math.Max(math.Abs(a.lo), math.Abs(a.hi))
	for _, s := range [...]suffix{{1e9, 9, "G"}, {1e6, 6, "M"}, {1e4, 3, "k"}} {
		if maxAbs >= s.from && s.exp-a.exp <= 1 {
			return strconv.FormatFloat(v/math.Pow10(s.exp), 'f', max(0, s.exp-a.exp), 64) + s.name
		}
	}
	return strconv.FormatFloat(v, 'f', max(0, -a.exp), 64)
}

// frac is v's position on the axis, 0 at lo and 1 at hi.
func (a axis) frac(v float64) float64 { return (v - a.lo) / (a.hi - a.lo) }

// xPos and yPos map data to SVG user units.
func xPos(ax axis, t float64) float64 { return plotLeft + ax.frac(t)*(plotRight-plotLeft) }
func yPos(ay axis, v float64) float64 { return plotBottom - ay.frac(v)*(plotBottom-plotTop) }

// coord formats an SVG coordinate with 0.1 unit resolution.
func coord(f float64) string { return string(appendCoord(nil, f)) }

func appendCoord(b []byte, f float64) []byte {
	f = math.Round(f*10) / 10
	if f == 0 {
		f = 0 // no "-0"
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

// polylinePoints builds the points attribute of a polyline from numbers
// only.
func polylinePoints(ax, ay axis, pts []Point) string {
	b := make([]byte, 0, len(pts)*12)
	for i, p := range pts {
		if i > 0 {
			b = append(b, ' ')
		}
		b = appendCoord(b, xPos(ax, p.T))
		b = append(b, ',')
		b = appendCoord(b, yPos(ay, p.V))
	}
	return string(b)
}

// seriesColor is the stroke of the i-th series of a chart: a fixed palette
// without the marker colours (red, green) first, then hues a golden angle
// apart with alternating lightness, so every one of MaxSeries differs.
func seriesColor(i int) string {
	palette := [...]string{
		"#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
		"#17becf", "#bcbd22", "#7f7f7f", "#393b79", "#e7ba52",
	}
	if i >= 0 && i < len(palette) {
		return palette[i]
	}
	hue := math.Mod(float64(i)*137.508, 360)
	light := 0.36 + 0.08*float64(i%3)
	return hslHex(hue, 0.65, light)
}

// hslHex converts an HSL colour (h in degrees, s and l in [0, 1]) to #rrggbb.
func hslHex(h, s, l float64) string {
	c := (1 - math.Abs(2*l-1)) * s
	hp := h / 60
	x := c * (1 - math.Abs(math.Mod(hp, 2)-1))
	var r, g, b float64
	switch {
	case hp < 1:
		r, g = c, x
	case hp < 2:
		r, g = x, c
	case hp < 3:
		g, b = c, x
	case hp < 4:
		g, b = x, c
	case hp < 5:
		r, b = x, c
	default:
		r, b = c, x
	}
	m := l - c/2
	byteOf := func(v float64) int { return int(math.Round((v + m) * 255)) }
	return fmt.Sprintf("#%02x%02x%02x", byteOf(r), byteOf(g), byteOf(b))
}

// markerStyle is the stroke, dash pattern and width of a marker kind.
func markerStyle(kind string) (stroke, dash, width string) {
	switch kind {
	case KindInject:
		return "#d62728", "", "1.5"
	case KindHeal:
		return "#2ca02c", "5 3", "1.5"
	case KindAlign:
		return "#7f7f7f", "1 3", "1.5"
	case kindMark:
		return "#006600", "3 3", "1.5"
	default: // KindError
		return "#222222", "2 2", "2"
	}
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
