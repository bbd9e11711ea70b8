// Package costfit fits a capacity search's marginal cost: each watched
// process's cores against the ACKed rate over the steps, by least squares.
package costfit

import (
	"fmt"
	"slices"
)

// DistinctRate is how far apart (relative) two steps' ACKed rates must be
// to count as distinct rates for a fit: a repeat step at the same offered
// rate ACKs within a few % of it, and adds no spread.
const DistinctRate = 0.05

// MinRates is the least number of distinct rates a fit needs.
const MinRates = 3

// Marginal is a least-squares line of one process's cores against the
// ACKed rate: USPerMsg is its slope in CPU-µs per message, IdleCores its
// intercept.
type Marginal struct {
	Name      string   `json:"name"`
	USPerMsg  *float64 `json:"cpu_us_per_extra_msg"`
	IdleCores *float64 `json:"idle_cores"`
	R2        *float64 `json:"r2"`
	Steps     int      `json:"steps"`
	Note      string   `json:"note,omitempty"`
}

// Line fits one process's cores (ys) against the ACKed rate (xs) over
// the steps that ran their whole window; with fewer than MinRates
// distinct rates among them (DistinctRate) there is no fit: two rates
// and a repeat make three points but a line through two.
func Line(name string, xs, ys []float64) Marginal {
	m := Marginal{Name: name, Steps: len(xs)}
	slope, icept, r2, ok := Fit(xs, ys)
	if !ok || distinctRates(xs) < MinRates {
		m.Note = "fewer than 3 steps at distinct rates: no fit"
	} else if slope < 0 {
		// A cost per message below zero is not a cost: the line says
		// only that the process's CPU did not grow with the rate.
		m.R2 = &r2
		m.Note = fmt.Sprintf("no marginal cost: the fit's slope is negative (%.1f CPU-µs per msg/s, R² %.2f): the process's CPU did not grow with the rate (other load on it, or a fixed cost)", slope*1e6, r2)
	} else {
		us := slope * 1e6
		m.USPerMsg, m.IdleCores, m.R2 = &us, &icept, &r2
		if r2 < 0.5 {
			m.Note = "a poor fit: the process's CPU hardly follows the rate (other load on it, or a fixed cost)"
		}
	}
	return m
}

// distinctRates counts the rates in xs at least DistinctRate apart.
func distinctRates(xs []float64) int {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := 0
	for i, x := range s {
		if i == 0 || x > s[i-1]*(1+DistinctRate) {
			n++
		}
	}
	return n
}

// Fit is ordinary least squares y = a x + b with R²; ok is false with
// fewer than 3 points or no spread in x.
func Fit(xs, ys []float64) (a, b, r2 float64, ok bool) {
	n := float64(len(xs))
	if len(xs) < 3 {
		return 0, 0, 0, false
	}
	var sx, sy, sxx, sxy, syy float64
	for i := range xs {
		sx, sy = sx+xs[i], sy+ys[i]
		sxx, sxy, syy = sxx+xs[i]*xs[i], sxy+xs[i]*ys[i], syy+ys[i]*ys[i]
	}
	vx := sxx - sx*sx/n
	if vx <= 0 {
		return 0, 0, 0, false
	}
	a = (sxy - sx*sy/n) / vx
	b = (sy - a*sx) / n
	vy := syy - sy*sy/n
	if vy > 0 {
		r2 = a * a * vx / vy
	} else {
		r2 = 1
	}
	return a, b, r2, true
}
