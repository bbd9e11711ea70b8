// Package dbtime puts the time bounds of the reference server's range
// statements on the store's time grid: every time column of the schema is
// DATETIME(3), milliseconds.
//
// The pools interpolate parameters: a time.Time goes into the statement's
// text with its sub-millisecond digits, and MariaDB reads a comparison of
// a DATETIME(3) column with a literal of more fractional digits along the
// whole index (or the whole table) instead of a range of it. A bound
// rounded up to the millisecond selects the same stored values and keeps
// the range read.
//
// It computes times only; it must not execute anything or know any table.
package dbtime

import "time"

// Ceil rounds t up to the millisecond, in UTC and without a monotonic
// reading: for every stored value v (a whole millisecond), v < t exactly
// when v < Ceil(t), and v >= t exactly when v >= Ceil(t). A bound "at or
// before t" is "before Ceil(t.Add(time.Nanosecond))".
func Ceil(t time.Time) time.Time {
	t = t.UTC().Round(0)
	if f := t.Truncate(time.Millisecond); !f.Equal(t) {
		return f.Add(time.Millisecond)
	}
	return t
}
