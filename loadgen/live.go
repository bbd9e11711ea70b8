package loadgen

import (
	"fmt"
	"strconv"
	"time"

	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
)

// report prints a progress line every second and keeps the timeline.
func (r *runner) report(live *schedule.Live, sum *summary.Summary, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	var prev summary.Second
	sec := 0
	for {
		select {
		case <-stop:
			r.m.swap()
			return
		case <-tk.C:
		}
		sec++
		h := r.m.swap()
		cur := summary.Second{T: sec, Started: live.Started.Load(), OK: r.m.ok.Load(), Fail: r.m.fail.Load(), Unknown: r.m.unknown.Load(),
			Late: live.Late.Load(), Missed: live.Missed.Load(), Deliveries: r.m.deliv.Load(), Workers: live.Workers.Load(), Queued: live.Queued.Load()}
		row := summary.Second{T: sec, Started: cur.Started - prev.Started, OK: cur.OK - prev.OK, Fail: cur.Fail - prev.Fail,
			Unknown: cur.Unknown - prev.Unknown, Late: cur.Late - prev.Late, Missed: cur.Missed - prev.Missed,
			Deliveries: cur.Deliveries - prev.Deliveries, Workers: cur.Workers, Queued: cur.Queued,
			Response: quantiles(h[hResponse]), SendDelay: quantiles(h[hDelay]), E2E: quantiles(h[hE2E])}
		prev = cur
		sum.Timeline = append(sum.Timeline, row)
		if r.cfg.OnSecond != nil {
			r.cfg.OnSecond(row)
		}
		if r.cfg.Progress == nil {
			continue
		}
		retried := r.m.retried.Load()
		if ph := r.prog.line(&r.cfg); ph != "" {
			fmt.Fprintf(r.cfg.Progress, "t=%3ds %s; ok=%d errors=%d (fail %d, unknown %d) retried=%d deliveries=%d/s\n",
				sec, ph, cur.OK, cur.Fail+cur.Unknown, cur.Fail, cur.Unknown, retried, row.Deliveries)
		} else {
			if sec == 1 {
				fmt.Fprintln(r.cfg.Progress, liveLegend(r.cfg.Pacer.LateAfter))
			}
			phase := fmt.Sprintf("sending %s/%s", min(time.Duration(sec)*time.Second, r.cfg.Duration), r.cfg.Duration)
			if time.Duration(sec)*time.Second > r.cfg.Duration {
				phase += ", waiting for the answers in flight"
			}
			// A second with nothing measured prints "-", never 0s.
			fmt.Fprintf(r.cfg.Progress, "t=%3ds %s started=%6d/s ok=%d ack_p99=%s e2e_p99=%s delay_p99=%s errors=%d (fail %d, unknown %d) retried=%d late=%d missed=%d workers=%d%s deliveries=%d/s\n",
				sec, phase, row.Started, cur.OK, p99Of(row.Response), p99Of(row.E2E), p99Of(row.SendDelay),
				cur.Fail+cur.Unknown, cur.Fail, cur.Unknown, retried, cur.Late, cur.Missed, cur.Workers, queuedNote(r.cfg.Pacer, cur.Queued), row.Deliveries)
		}
	}
}

// liveLegend explains the live line's figures once, before its first line.
func liveLegend(lateAfter time.Duration) string {
	return "live line, once a second: started = sends started in that second; ok, errors (fail + unknown) and retried " +
		"(sends that needed a second try: a resent timeout, a 429) count from the start; late = sends started more than " +
		lateAfter.String() + " after their intended time (the generator fell behind its schedule; their wait counts in the " +
		"latency), missed = never started; ack_p99, e2e_p99 and delay_p99 are of the second's sends (\"-\": none measured)"
}

// p99Of is a progress figure: the p99, or "-" when nothing was measured.
func p99Of(q summary.Quantiles) string {
	if q.Count == 0 {
		return "-"
	}
	return fmtUS(q.P99)
}

// queuedNote is the progress line's queue length in the queued mode.
func queuedNote(c schedule.Config, queued int64) string {
	if c.Senders == 0 {
		return ""
	}
	return " queued=" + strconv.FormatInt(queued, 10)
}

func fmtUS(us int64) string { return (time.Duration(us) * time.Microsecond).String() }
