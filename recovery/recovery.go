// Package recovery computes a run's recovery figures from its lag
// timeline: how far each consumer group fell behind (peak lag age and
// records), the backlog peak, how long after the end of a burst or the heal
// of the last fault every group's lag age was back under a stated bound and
// stayed there, how fast the backlog drained meanwhile (records/s and inbox
// rows/s), and the outbox backlog's peak and drain time.
//
// It is a pure computation on samples the caller measured: it does no I/O
// and knows nothing of scenarios, servers or Kafka. It must not invent a
// figure: a sample that was not measured is unknown, never 0, and a figure
// that cannot be computed from known samples is absent (nil) with a reason.
//
// # Definitions
//
// A sample is classified, per group, as good (known and lag age <= Bound),
// bad (known and age > Bound) or unknown (the poll failed, the group was
// missing from it, or it reported a measurement error). Only samples at or
// after From are classified.
//
// Each part is judged on what was measured for it, and only on that. The
// groups' recovery, the run's status and recovery time (what lag_recovered
// and max_recovery judge) read the consumer lag alone: the outbox is not
// part of it. A sample whose consumer lag was measured but whose outbox
// was not (its query failed: Known true, OutboxAge < 0) is therefore known
// for every group, and unknown for the outbox's drain, which reads only
// samples that measured the outbox. A sample that is not Known is unknown
// for every part, the outbox too. Nothing unmeasured counts as passing: an
// unknown sample is never good for the part it did not measure. The run
// page draws the same split: consumer lag where Known, outbox points
// where the outbox was measured, a gap in each line where its part is
// unknown.
//
// A group has recovered at R when the sample at R is good and no later
// sample is bad. An unknown sample breaks a run of good samples that has
// not yet lasted Hold (nothing says the lag stayed under the bound across
// it), so R is then the first good sample after it; once good samples have
// spanned Hold, later unknown samples are gaps in an established recovery
// and only a bad sample ends it. Recovery must have held for at least Hold
// up to the last sample, and R must not lie past Deadline (the drain
// timeout): otherwise the group has not recovered. A group that went
// good and then bad again counts a relapse. The run has recovered when
// every group has, at the latest group's R; its recovery time is R - From.
// The status is "recovered", "not_recovered" (the last classified sample
// is bad, or recovery came after the deadline, or was not held), or
// "unknown" (no known sample after From, or the samples since the last bad
// one are unknown).
//
// The drain window of a group runs from the last known sample at or before
// From (the first after it if there is none) to its R (to the last known
// sample if it did not recover). Its drain rate is the records the group
// consumed in the window (the sum over partitions of end offset minus
// records behind) over the window's length; inbox rows/s is the growth of
// the inbox row count over the run's window. A window of zero length, a
// group with no backlog after From, or a consumed count that went down (a
// topic re-created) gives no rate.
//
// The outbox is drained when its oldest pending row's age is <= Bound and
// stays so (the same rule as a group, over the samples that are Known and
// measured the outbox; the others are unknown for it); its drain time
// counts from From. Its figures are reported beside the groups', not part
// of the run's status.
//
// Resolution: every figure is as fine as the samples (the lab polls once a
// second).
package recovery

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Statuses.
const (
	Recovered    = "recovered"
	NotRecovered = "not_recovered"
	Unknown      = "unknown"
)

// Group is one consumer group in one sample.
type Group struct {
	// Age is the lag age in seconds (oldest unprocessed message).
	Age float64
	// Records behind.
	Records int64
	// Consumed is the group's position summed over partitions (records
	// consumed so far); negative: not measured.
	Consumed int64
}

// Sample is one measurement.
type Sample struct {
	// T is seconds since the run's time base.
	T float64
	// Known: the poll answered and measured the consumer lag (no
	// measurement error but, possibly, the outbox's). An unknown sample is
	// unknown for every group and for the outbox.
	Known bool
	// Groups present in the sample; a group absent from a known sample is
	// unknown in it.
	Groups map[string]Group
	// OutboxBacklog (rows pending) and OutboxAge (oldest pending row's age,
	// seconds); OutboxAge < 0: not measured (no outbox, or its query
	// failed), unknown for the outbox only when Known.
	OutboxBacklog int64
	OutboxAge     float64
	// InboxRows is the inbox table's row count; negative: not measured.
	InboxRows int64
}

// Config says what recovery means for a run.
type Config struct {
	// From is the instant (seconds since the time base) recovery counts
	// from: the end of the burst or the heal of the last fault.
	From float64
	// Bound is the lag age (seconds) under which a group counts as caught
	// up.
	Bound float64
	// Hold is how long (seconds) a group must have stayed under Bound, up
	// to the last sample, for the recovery to count.
	Hold float64
	// Deadline (seconds since the time base): recovery after it does not
	// count (the drain timeout). 0: none.
	Deadline float64
	// Outbox: the run has an outbox (the outbox policy); without it the
	// samples' outbox figures are ignored and Figures.Outbox is nil.
	Outbox bool
}

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.From) || c.From < 0:
		return errors.New("recovery: from must be >= 0")
	case !(c.Bound > 0):
		return errors.New("recovery: bound must be > 0")
	case c.Hold < 0 || math.IsNaN(c.Hold):
		return errors.New("recovery: hold must be >= 0")
	case c.Deadline != 0 && !(c.Deadline >= c.From):
		return errors.New("recovery: deadline must be 0 or >= from")
	}
	return nil
}

// GroupFigures are one group's figures.
type GroupFigures struct {
	Name string `json:"name"`
	// PeakAge (seconds) and PeakRecords over the whole timeline, with the
	// sample times they were seen at.
	PeakAge      float64 `json:"peak_age_s"`
	PeakAgeT     float64 `json:"peak_age_t_s"`
	PeakRecords  int64   `json:"peak_records"`
	PeakRecordsT float64 `json:"peak_records_t_s"`
	Status       string  `json:"status"`
	Reason       string  `json:"reason,omitempty"`
	// RecoveredAt is R (seconds since the time base), RecoverySeconds R -
	// From; nil unless recovered.
	RecoveredAt     *float64 `json:"recovered_at_s,omitempty"`
	RecoverySeconds *float64 `json:"recovery_s,omitempty"`
	Relapses        int      `json:"relapses"`
	// DrainFrom and DrainTo bound the drain window; DrainRecordsPerSec is
	// the mean over it and PeakDrainRecordsPerSec the fastest interval
	// between two samples in it (nil: no rate, see DrainNote).
	DrainFrom              float64  `json:"drain_from_s"`
	DrainTo                float64  `json:"drain_to_s"`
	DrainRecordsPerSec     *float64 `json:"drain_records_per_s,omitempty"`
	PeakDrainRecordsPerSec *float64 `json:"peak_drain_records_per_s,omitempty"`
	DrainNote              string   `json:"drain_note,omitempty"`
}

// OutboxFigures are the outbox backlog's figures.
type OutboxFigures struct {
	PeakBacklog  int64    `json:"peak_backlog"`
	PeakT        float64  `json:"peak_t_s"`
	PeakAge      float64  `json:"peak_age_s"`
	Status       string   `json:"status"`
	Reason       string   `json:"reason,omitempty"`
	DrainedAt    *float64 `json:"drained_at_s,omitempty"`
	DrainSeconds *float64 `json:"drain_s,omitempty"`
}

// Figures are a run's recovery figures.
type Figures struct {
	From float64 `json:"from_s"`
	// Since says what From is (set by the caller: "end of the burst",
	// "heal of the last fault", ...).
	Since    string  `json:"since,omitempty"`
	Bound    float64 `json:"bound_s"`
	Hold     float64 `json:"hold_s"`
	Deadline float64 `json:"deadline_s,omitempty"`
	// Status and Reason: the whole run (every group).
	Status          string         `json:"status"`
	Reason          string         `json:"reason,omitempty"`
	RecoveredAt     *float64       `json:"recovered_at_s,omitempty"`
	RecoverySeconds *float64       `json:"recovery_s,omitempty"`
	Groups          []GroupFigures `json:"groups"`
	// BacklogPeak is the largest sum of records behind over the groups in
	// one sample (every group known in it).
	BacklogPeak  int64   `json:"backlog_peak"`
	BacklogPeakT float64 `json:"backlog_peak_t_s"`
	// DrainRowsPerSec: inbox rows written per second over the run's drain
	// window (the earliest group's start to R, or to the last sample).
	DrainRowsPerSec *float64       `json:"drain_rows_per_s,omitempty"`
	DrainRowsNote   string         `json:"drain_rows_note,omitempty"`
	Outbox          *OutboxFigures `json:"outbox,omitempty"`
	// Samples and UnknownSamples count the timeline (UnknownSamples: not
	// Known).
	Samples        int `json:"samples"`
	UnknownSamples int `json:"unknown_samples"`
}

// MinDrainRecordsPerSec is the slowest group's mean drain rate (nil when
// no group has one).
func (f *Figures) MinDrainRecordsPerSec() (*float64, string) {
	var out *float64
	name := ""
	for i := range f.Groups {
		g := &f.Groups[i]
		if g.DrainRecordsPerSec == nil {
			continue
		}
		if out == nil || *g.DrainRecordsPerSec < *out {
			v := *g.DrainRecordsPerSec
			out, name = &v, g.Name
		}
	}
	return out, name
}

// class of one sample for one series.
type class int

const (
	unknownC class = iota
	goodC
	badC
)

// run tracks the recovery rule over a series of classified samples.
type run struct {
	hold      float64
	cand      float64 // T of the first good sample since the last bad/unknown
	haveCand  bool
	lastGood  float64 // T of the last good sample of the candidate run
	last      class   // last classified
	lastKnown class   // last good or bad
	lastT     float64
	relapses  int
	any       bool    // a known sample was classified
	unkSince  float64 // T of the first unknown sample since the last known one
	unk       bool
}

// observe classifies a sample at t (ignored before cfg.From): unknown,
// good (age <= Bound) or bad.
func (r *run) observe(cfg Config, t float64, known bool, age float64) {
	if t < cfg.From {
		return
	}
	c := unknownC
	if known {
		c = badC
		if age <= cfg.Bound {
			c = goodC
		}
	}
	r.add(t, c)
}

func (r *run) add(t float64, c class) {
	switch c {
	case goodC:
		if !r.haveCand {
			r.cand, r.haveCand = t, true
		}
		r.lastGood = t
		r.any = true
	case badC:
		if r.lastKnown == goodC {
			r.relapses++ // under the bound, then over it again (unknown samples between or not)
		}
		r.haveCand = false
		r.any = true
	default:
		if r.haveCand && r.lastGood-r.cand < r.hold {
			r.haveCand = false // not established: the gap breaks it
		}
		if !r.unk {
			r.unkSince, r.unk = t, true
		}
	}
	if c != unknownC {
		r.unk = false
		r.lastKnown = c
	}
	r.last, r.lastT = c, t
}

// verdict applies Hold and Deadline; end is the last sample's T.
func (r *run) verdict(cfg Config, end float64, what string) (status, reason string, at *float64) {
	switch {
	case !r.any:
		return Unknown, fmt.Sprintf("no known %s sample at or after t=%.1fs", what, cfg.From), nil
	case r.haveCand && r.lastGood-r.cand < cfg.Hold:
		return NotRecovered, fmt.Sprintf("%s under the bound only from t=%.1fs to t=%.1fs (the last sample t=%.1fs), less than the hold of %gs", what, r.cand, r.lastGood, end, cfg.Hold), nil
	case r.haveCand && cfg.Deadline > 0 && r.cand > cfg.Deadline:
		return NotRecovered, fmt.Sprintf("%s back under the bound only at t=%.1fs, after the deadline t=%.1fs (drain timeout)", what, r.cand, cfg.Deadline), nil
	case r.haveCand:
		v := r.cand
		return Recovered, "", &v
	case r.last == badC:
		return NotRecovered, fmt.Sprintf("%s still above the bound of %gs at the last sample t=%.1fs", what, cfg.Bound, r.lastT), nil
	default:
		return Unknown, fmt.Sprintf("%s not measured since t=%.1fs: nothing says it stayed under the bound", what, r.unkSince), nil
	}
}

// Compute derives the figures from samples (in any order; sorted by T).
func Compute(cfg Config, samples []Sample) (*Figures, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ss := append([]Sample(nil), samples...)
	sort.SliceStable(ss, func(i, j int) bool { return ss[i].T < ss[j].T })
	f := &Figures{From: cfg.From, Bound: cfg.Bound, Hold: cfg.Hold, Deadline: cfg.Deadline, Samples: len(ss), Groups: []GroupFigures{}}
	names := map[string]bool{}
	for _, s := range ss {
		if !s.Known {
			f.UnknownSamples++
			continue
		}
		for g := range s.Groups {
			names[g] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for g := range names {
		sorted = append(sorted, g)
	}
	sort.Strings(sorted)
	end := 0.0
	if len(ss) > 0 {
		end = ss[len(ss)-1].T
	}
	for _, name := range sorted {
		f.Groups = append(f.Groups, groupFigures(cfg, ss, name, end))
	}
	f.backlogPeak(ss, sorted)
	f.overall(cfg)
	f.rows(ss)
	if cfg.Outbox {
		f.Outbox = outboxFigures(cfg, ss, end)
	}
	return f, nil
}

func groupFigures(cfg Config, ss []Sample, name string, end float64) GroupFigures {
	gf := GroupFigures{Name: name}
	r := run{hold: cfg.Hold}
	for _, s := range ss {
		g, ok := s.Groups[name]
		known := s.Known && ok
		if known {
			if g.Age > gf.PeakAge {
				gf.PeakAge, gf.PeakAgeT = g.Age, s.T
			}
			if g.Records > gf.PeakRecords {
				gf.PeakRecords, gf.PeakRecordsT = g.Records, s.T
			}
		}
		r.observe(cfg, s.T, known, g.Age)
	}
	gf.Relapses = r.relapses
	var at *float64
	gf.Status, gf.Reason, at = r.verdict(cfg, end, "group "+name)
	if at != nil {
		gf.RecoveredAt = at
		d := max(0, *at-cfg.From)
		gf.RecoverySeconds = &d
	}
	drain(cfg, ss, name, &gf)
	return gf
}

// drain fills the group's drain window and rates.
func drain(cfg Config, ss []Sample, name string, gf *GroupFigures) {
	type pt struct {
		t        float64
		consumed int64
		records  int64
	}
	var pts []pt
	for _, s := range ss {
		g, ok := s.Groups[name]
		if !s.Known || !ok || g.Consumed < 0 {
			continue
		}
		if gf.RecoveredAt != nil && s.T > *gf.RecoveredAt {
			break
		}
		if s.T <= cfg.From {
			pts = pts[:0] // keep only the last one at or before From
		}
		pts = append(pts, pt{s.T, g.Consumed, g.Records})
	}
	if len(pts) == 0 {
		gf.DrainNote = "no known consumed count in the window"
		return
	}
	gf.DrainFrom, gf.DrainTo = pts[0].t, pts[len(pts)-1].t
	behind := int64(0)
	for _, p := range pts {
		behind = max(behind, p.records)
	}
	switch {
	case behind == 0:
		gf.DrainNote = "no backlog to drain after the burst or fault"
		return
	case len(pts) < 2 || gf.DrainTo <= gf.DrainFrom:
		gf.DrainNote = "the window holds a single sample"
		return
	}
	peak := -1.0
	for i := 1; i < len(pts); i++ {
		d := pts[i].consumed - pts[i-1].consumed
		dt := pts[i].t - pts[i-1].t
		if d < 0 {
			gf.DrainNote = fmt.Sprintf("the consumed count went down at t=%.1fs (topic re-created?): no rate", pts[i].t)
			return
		}
		if dt > 0 {
			peak = max(peak, float64(d)/dt)
		}
	}
	mean := float64(pts[len(pts)-1].consumed-pts[0].consumed) / (gf.DrainTo - gf.DrainFrom)
	gf.DrainRecordsPerSec = &mean
	if peak >= 0 {
		gf.PeakDrainRecordsPerSec = &peak
	}
	if gf.RecoveredAt == nil {
		gf.DrainNote = "not recovered: the rate is over the window up to the last known sample"
	}
}

func (f *Figures) backlogPeak(ss []Sample, names []string) {
	for _, s := range ss {
		if !s.Known {
			continue
		}
		sum, all := int64(0), true
		for _, n := range names {
			g, ok := s.Groups[n]
			if !ok {
				all = false
				break
			}
			sum += g.Records
		}
		if all && sum > f.BacklogPeak {
			f.BacklogPeak, f.BacklogPeakT = sum, s.T
		}
	}
}

func (f *Figures) overall(cfg Config) {
	if len(f.Groups) == 0 {
		f.Status, f.Reason = Unknown, "no consumer group in any known sample"
		return
	}
	var at float64
	f.Status = Recovered
	for _, g := range f.Groups {
		switch g.Status {
		case NotRecovered:
			f.Status, f.Reason = NotRecovered, g.Reason
		case Unknown:
			if f.Status == Recovered {
				f.Status, f.Reason = Unknown, g.Reason
			}
		default:
			at = max(at, *g.RecoveredAt)
		}
	}
	if f.Status == Recovered {
		f.RecoveredAt = &at
		d := max(0, at-cfg.From)
		f.RecoverySeconds = &d
	}
}

// rows fills the inbox rows/s over the run's drain window.
func (f *Figures) rows(ss []Sample) {
	from, to := math.Inf(1), math.Inf(-1)
	for _, g := range f.Groups {
		if g.DrainRecordsPerSec == nil {
			continue
		}
		from, to = min(from, g.DrainFrom), max(to, g.DrainTo)
	}
	if math.IsInf(from, 0) {
		f.DrainRowsNote = "no drain window"
		return
	}
	var a, b *Sample
	for i := range ss {
		s := &ss[i]
		if !s.Known || s.InboxRows < 0 || s.T < from || s.T > to {
			continue
		}
		if a == nil {
			a = s
		}
		b = s
	}
	if a == nil || b == a || b.T <= a.T {
		f.DrainRowsNote = "the inbox row count was not measured twice in the drain window"
		return
	}
	v := float64(b.InboxRows-a.InboxRows) / (b.T - a.T)
	f.DrainRowsPerSec = &v
	if a.T != from || b.T != to {
		f.DrainRowsNote = fmt.Sprintf("measured over t=%.1fs..%.1fs (the window is %.1fs..%.1fs)", a.T, b.T, from, to)
	}
}

func outboxFigures(cfg Config, ss []Sample, end float64) *OutboxFigures {
	of := &OutboxFigures{}
	r := run{hold: cfg.Hold}
	measured := false
	for _, s := range ss {
		known := s.Known && s.OutboxAge >= 0
		if known {
			measured = true
			if s.OutboxBacklog > of.PeakBacklog {
				of.PeakBacklog, of.PeakT = s.OutboxBacklog, s.T
			}
			of.PeakAge = max(of.PeakAge, s.OutboxAge)
		}
		r.observe(cfg, s.T, known, s.OutboxAge)
	}
	if !measured {
		return nil
	}
	var at *float64
	of.Status, of.Reason, at = r.verdict(cfg, end, "outbox")
	if at != nil {
		of.DrainedAt = at
		d := max(0, *at-cfg.From)
		of.DrainSeconds = &d
	}
	return of
}
