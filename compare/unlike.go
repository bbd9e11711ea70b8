package compare

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Env is where a run was measured, as its result file says (zero values:
// not recorded).
type Env struct {
	// Backends is a scenario result's backends line (embedded or external,
	// with versions).
	Backends string `json:"backends,omitempty"`
	// CPUs is the machine's CPU count; Host its name (capacity, load).
	CPUs int    `json:"cpus,omitempty"`
	Host string `json:"host,omitempty"`
	// Load1 is the 1-minute load average when the run started (nil: not
	// recorded).
	Load1 *float64 `json:"load1_at_start,omitempty"`
	// Generator is how the generator ran, where the file says: its
	// GOMAXPROCS (capacity, load) and its pacer (capacity).
	Generator string `json:"generator,omitempty"`
}

// LoadGap is how far apart the sides' 1-minute load averages at their
// starts may be, per CPU, before they are unlike: half the machine's
// cores busy with other work on one side and not on the other moves
// latencies by more than most tolerances.
const LoadGap = 0.5

// unlikeSides says how the base and new runs differ in where and how they
// were measured: backends, CPU count, host, the generator's set-up, load
// average (nil: alike, as far as the files say).
func unlikeSides(base, nw []*Run) []string {
	var out []string
	side := func(rs []*Run, f func(Env) string) []string {
		var vs []string
		for _, r := range rs {
			if v := f(r.Env); v != "" && !slices.Contains(vs, v) {
				vs = append(vs, v)
			}
		}
		return vs
	}
	differ := func(what string, f func(Env) string) {
		b, n := side(base, f), side(nw, f)
		if len(b) == 0 || len(n) == 0 {
			return
		}
		for _, v := range n {
			if !slices.Contains(b, v) {
				out = append(out, fmt.Sprintf("%s differ: base %s, new %s", what, strings.Join(b, " | "), strings.Join(n, " | ")))
				return
			}
		}
	}
	differ("backends", func(e Env) string { return e.Backends })
	differ("machines (CPUs)", func(e Env) string {
		if e.CPUs == 0 {
			return ""
		}
		return fmt.Sprint(e.CPUs)
	})
	differ("hosts", func(e Env) string { return e.Host })
	differ("generators", func(e Env) string { return e.Generator })
	if s := loadGap(base, nw); s != "" {
		out = append(out, s)
	}
	return out
}

// loadGap says when the sides' load averages per CPU at their starts are
// more than LoadGap apart ("" otherwise, or when a side did not record it).
func loadGap(base, nw []*Run) string {
	perCPU := func(rs []*Run) (lo, hi float64, ok bool) {
		lo, hi = math.Inf(1), math.Inf(-1)
		for _, r := range rs {
			if r.Env.Load1 == nil || r.Env.CPUs == 0 {
				continue
			}
			v := *r.Env.Load1 / float64(r.Env.CPUs)
			lo, hi, ok = math.Min(lo, v), math.Max(hi, v), true
		}
		return lo, hi, ok
	}
	blo, bhi, bok := perCPU(base)
	nlo, nhi, nok := perCPU(nw)
	if !bok || !nok || (nlo-bhi <= LoadGap && blo-nhi <= LoadGap) {
		return ""
	}
	hi, lo := nlo, bhi // the pair more than LoadGap apart
	if blo-nhi > LoadGap {
		hi, lo = blo, nhi
	}
	d := gapDigits(hi, lo)
	return fmt.Sprintf("machine load differs: 1-minute load average per CPU at the start %.*f–%.*f in the base, %.*f–%.*f in the new runs (%.*f apart, more than %g)",
		d, blo, d, bhi, d, nlo, d, nhi, d, hi-lo, LoadGap)
}

// gapDigits is the fewest decimals (at least 2) at which hi and lo, as
// printed, are still more than LoadGap apart, so that the reader sees why
// they were judged so (0.70 and 0.20 would read as exactly 0.5 apart;
// 0.701 and 0.200 do not).
func gapDigits(hi, lo float64) int {
	const maxDigits = 9
	for d := 2; d < maxDigits; d++ {
		p := math.Pow10(d)
		if math.Round(hi*p)-math.Round(lo*p) > LoadGap*p {
			return d
		}
	}
	return maxDigits
}

// markUnlike labels the measured rows (latency, rate, lag, recovery: what
// the machine and backends move) of a comparison between unlike sides: a
// regression becomes VUnlike, which still fails the gate; any other
// verdict keeps its word and gets a note.
func markUnlike(rows []Row, unlike []string) {
	if len(unlike) == 0 {
		return
	}
	why := "unlike sides (" + strings.Join(unlike, "; ") + "): not a like-for-like comparison"
	for i := range rows {
		r := &rows[i]
		if r.Def.Rule != Measured || r.Verdict == VMissing || r.Verdict == VNew {
			continue
		}
		if r.Verdict == VRegressed {
			r.Verdict = VUnlike
		}
		r.Note = strings.TrimPrefix(r.Note+"; "+why, "; ")
	}
}
