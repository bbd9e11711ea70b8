package dbtime

import (
	"testing"
	"time"
)

// TestCeil: a bound on the grid is kept, one between two milliseconds goes
// to the later one, and the comparisons a statement makes with stored
// values (whole milliseconds) are the same with either bound.
func TestCeil(t *testing.T) {
	base := time.Date(2026, 12, 4, 12, 0, 0, 123_000_000, time.FixedZone("x", 3600))
	for _, c := range []struct {
		in, want time.Time
	}{
		{base, base},
		{base.Add(time.Nanosecond), base.Add(time.Millisecond)},
		{base.Add(999_999 * time.Nanosecond), base.Add(time.Millisecond)},
		{base.Add(-time.Nanosecond), base},
	} {
		got := Ceil(c.in)
		if !got.Equal(c.want) || got.Location() != time.UTC {
			t.Errorf("Ceil(%s) = %s, want %s UTC", c.in, got, c.want)
		}
		for _, v := range []time.Time{base.Add(-time.Millisecond), base, base.Add(time.Millisecond), base.Add(2 * time.Millisecond)} {
			if v.Before(c.in) != v.Before(got) {
				t.Errorf("stored %s: before %s %v, before %s %v", v, c.in, v.Before(c.in), got, v.Before(got))
			}
			through := Ceil(c.in.Add(time.Nanosecond))
			if !v.After(c.in) != v.Before(through) {
				t.Errorf("stored %s: at or before %s %v, before %s %v", v, c.in, !v.After(c.in), through, v.Before(through))
			}
		}
	}
	if m := Ceil(time.Now()); m.Round(0) != m {
		t.Error("monotonic reading kept")
	}
}
