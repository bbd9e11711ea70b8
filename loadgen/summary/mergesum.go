package summary

import (
	"slices"

	"imlab/loadgen/schedule"
)

// MergeSummaries adds up the segments' counts (sends, outcomes, pacer,
// deliveries, witness) and sums their timelines second by second (each
// segment's seconds from its own start, which the runner starts within a
// few milliseconds of the others). Percentiles cannot be added: the merged
// Latency comes from the checker's histograms over every segment's records
// (the caller sets it); a merged second's ACK percentiles are the largest
// of the segments', an upper bound.
func MergeSummaries(sums []*Summary) *Summary {
	m := *sums[0]
	m.Latency = map[string]Quantiles{}
	m.Timeline = nil
	m.FailedByIntended = []IntendedFailures{}
	m.AckedByIntended = nil
	m.Errors = nil
	m.OK, m.Fail, m.Unknown, m.Retries, m.Deliveries, m.AchievedPerSec = 0, 0, 0, 0, 0, 0
	m.RetriedSends, m.Refused = 0, 0
	m.LabCPU = mergeLabCPU(sums)
	m.StartedPerSec, m.LoadSeconds, m.AckSeconds = 0, 0, 0
	m.Pacer = schedule.Stats{}
	m.Drain = DrainSummary{Complete: true}
	m.Split.Users = 0
	byT := map[int]*Second{}
	var ts []int
	for _, s := range sums {
		if s.StartedAt.Before(m.StartedAt) {
			m.StartedAt = s.StartedAt
		}
		m.AddOutcomes(s)
		m.Retries += s.Retries
		m.Refused += s.Refused
		m.Deliveries += s.Deliveries
		m.StartedPerSec += s.StartedPerSec
		m.Split.Users += s.Split.Users
		m.Pacer.Scheduled += s.Pacer.Scheduled // Started and Late: AddOutcomes
		m.Pacer.Missed += s.Pacer.Missed
		m.Pacer.Direct += s.Pacer.Direct
		m.Pacer.Canceled = m.Pacer.Canceled || s.Pacer.Canceled
		m.Pacer.Workers += s.Pacer.Workers
		m.Pacer.QueuePeak += s.Pacer.QueuePeak // at most: the segments peak apart
		m.Drain.Complete = m.Drain.Complete && s.Drain.Complete
		m.Drain.Rounds = max(m.Drain.Rounds, s.Drain.Rounds)
		m.Drain.Seconds = max(m.Drain.Seconds, s.Drain.Seconds)
		m.Drain.WitnessUIDs += s.Drain.WitnessUIDs
		m.Drain.WitnessErrors += s.Drain.WitnessErrors
		m.LedgerBytes += s.LedgerBytes
		for _, e := range s.Errors {
			m.Errors = append(m.Errors, "segment "+s.Split.Segment.String()+": "+e)
		}
		m.FailedByIntended = addIntended(m.FailedByIntended, s.FailedByIntended)
		for i, n := range s.AckedByIntended {
			if i == len(m.AckedByIntended) {
				m.AckedByIntended = append(m.AckedByIntended, 0)
			}
			m.AckedByIntended[i] += n
		}
		for _, sec := range s.Timeline {
			row := byT[sec.T]
			if row == nil {
				row = &Second{T: sec.T}
				byT[sec.T] = row
				ts = append(ts, sec.T)
			}
			addSecond(row, sec)
		}
	}
	slices.Sort(ts)
	for _, t := range ts {
		m.Timeline = append(m.Timeline, *byT[t])
	}
	m.Outcome = m.Outcomes(OverloadFraction)
	return &m
}

// mergeLabCPU is the segments' generators together: they ran at once, each
// in its own process, so their CPU seconds add up over the longest window
// (nil when any segment's was not measured: unknown, never a part of it).
func mergeLabCPU(sums []*Summary) *LabCPU {
	var m LabCPU
	for _, s := range sums {
		l := s.LabCPU
		if l == nil || l.CPUs <= 0 {
			return nil
		}
		m.CPUSeconds += l.CPUSeconds
		m.WindowSeconds = max(m.WindowSeconds, l.WindowSeconds)
		m.CPUs = l.CPUs
		for _, p := range l.InProcess {
			if !slices.Contains(m.InProcess, p) {
				m.InProcess = append(m.InProcess, p)
			}
		}
	}
	if m.WindowSeconds <= 0 {
		return nil
	}
	m.Share = m.CPUSeconds / (float64(m.CPUs) * m.WindowSeconds)
	m.OverHalf = m.Share > 0.5
	return &m
}

// addIntended adds b's bins to a's (both in order of At, one bin per
// IntendedBin: the segments start within milliseconds of each other).
func addIntended(a, b []IntendedFailures) []IntendedFailures {
	out := make([]IntendedFailures, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].At < b[j].At):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].At < a[i].At:
			out = append(out, b[j])
			j++
		default:
			x := a[i]
			x.Fail, x.Unknown, x.Retried = x.Fail+b[j].Fail, x.Unknown+b[j].Unknown, x.Retried+b[j].Retried
			out = append(out, x)
			i, j = i+1, j+1
		}
	}
	return out
}

func addSecond(row *Second, s Second) {
	row.Started += s.Started
	row.OK += s.OK
	row.Fail += s.Fail
	row.Unknown += s.Unknown
	row.Late += s.Late
	row.Missed += s.Missed
	row.Deliveries += s.Deliveries
	row.Workers += s.Workers
	row.Response = maxQuantiles(row.Response, s.Response)
	row.SendDelay = maxQuantiles(row.SendDelay, s.SendDelay)
	row.E2E = maxQuantiles(row.E2E, s.E2E)
}

func maxQuantiles(a, b Quantiles) Quantiles {
	a.Count += b.Count
	a.P50, a.P90, a.P99, a.P999, a.Max = max(a.P50, b.P50), max(a.P90, b.P90), max(a.P99, b.P99), max(a.P999, b.P999), max(a.Max, b.Max)
	return a
}
