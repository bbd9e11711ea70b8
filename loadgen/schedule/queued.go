package schedule

import (
	"context"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// queuedTick is a send started by the pacer, waiting for a sender.
type queuedTick struct {
	t       Tick
	started time.Duration
	late    bool
}

// runQueued is Run's queued mode (Config.Senders > 0): the pacer goroutine
// waits for each tick's intended time, takes a queue slot (waiting, and so
// starting late, only when MaxQueued sends are already waiting), stamps
// the start and queues it; Senders goroutines take the queue in order and
// call h. The goroutine count stays Senders + 1 however many sends are in
// flight: a slow server grows the queue, not the runtime's stacks. When
// ctx ends, the sends still queued are not made: they count missed, not
// started, and Run returns once the sends being made have returned.
func runQueued(ctx context.Context, cfg Config, it *Iter, start time.Time, live *Live, h Handler) (Stats, error) {
	hard := start.Add(time.Duration(it.dur) + cfg.Grace)
	f := &feed{it: it}
	slots := make(chan struct{}, cfg.MaxQueued) // held from queueing to a sender's take
	q := make(chan queuedTick, cfg.MaxQueued)
	var wg sync.WaitGroup
	for id := range cfg.Senders {
		wg.Add(1)
		go func() { // owned by Run: ends when q is closed and drained
			defer wg.Done()
			for x := range q {
				// Counted out of the queue before its slot is given back,
				// so Queued never exceeds the slots held (the pacer counts
				// a send in after it took a slot): QueuePeak <= MaxQueued.
				live.Queued.Add(-1)
				<-slots
				if ctx.Err() != nil {
					// Cancelled: a send still queued is never made, so it
					// was not started after all (missed), and the run ends
					// now instead of after the queue's worth of answers.
					live.Started.Add(^uint64(0))
					if x.late {
						live.Late.Add(^uint64(0))
					}
					live.Missed.Add(1)
					continue
				}
				h(id, x.t, x.started)
			}
		}()
	}
	live.Workers.Store(int64(cfg.Senders))
	st := Stats{Workers: cfg.Senders}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	canceled := func() {
		st.Canceled = true
		live.Missed.Add(f.drain())
	}
loop:
	for {
		next, ok := f.peek()
		if !ok {
			break
		}
		if !waitUntil(ctx, timer, start.Add(next.Intended), cfg.SpinWindow) {
			canceled()
			break
		}
		if !time.Now().Before(hard) {
			live.Missed.Add(f.drain())
			break
		}
		tick, _ := f.takeDue(time.Since(start)) // only the pacer takes ticks here
		select {
		case slots <- struct{}{}:
		default:
			timer.Reset(time.Until(hard))
			select {
			case slots <- struct{}{}:
			case <-timer.C:
				live.Missed.Add(1 + f.drain())
				break loop
			case <-ctx.Done():
				live.Missed.Add(1)
				canceled()
				break loop
			}
		}
		started := time.Since(start)
		live.Started.Add(1)
		late := started-tick.Intended > cfg.LateAfter
		if late {
			live.Late.Add(1)
		}
		if n := live.Queued.Add(1); n > st.QueuePeak {
			st.QueuePeak = n
		}
		q <- queuedTick{t: tick, started: started, late: late} // never blocks: a slot is held
	}
	close(q)
	wg.Wait()
	st.Started = live.Started.Load()
	st.Late = live.Late.Load()
	st.Missed = live.Missed.Load()
	st.Scheduled = st.Started + st.Missed
	return st, nil
}

// waitUntil sleeps until due; false when ctx ended first. A pacer
// catching up after a stall does not wait, but still looks at ctx, so that
// cancellation stops a burst at once. The runtime's timers wake about 1 ms
// late on a busy machine, so for the last spin of the wait it sleeps in
// the kernel instead (spinSleep).
func waitUntil(ctx context.Context, timer *time.Timer, due time.Time, spin time.Duration) bool {
	for {
		d := time.Until(due)
		if d <= 0 {
			return ctx.Err() == nil
		}
		if d <= spin {
			spinSleep(due)
			if ctx.Err() != nil {
				return false
			}
			continue
		}
		timer.Reset(d - spin)
		select {
		case <-timer.C:
		case <-ctx.Done():
			return false
		}
	}
}

// spinSleep lets every goroutine that is ready run first (one yield), then
// waits for due asleep in nanosleep(2) (high-resolution: it wakes within
// the kernel's slack, about 50 µs for a normal thread, against about 1 ms
// for the runtime's timers). Yielding in a loop instead, as the pacer once
// did for the whole window and later for its last 60 µs, kept a core busy:
// at 500 sends/s a third of the generator's CPU, and at 50,000/s, where
// every interval is shorter than that tail, most of it (RESULTS.md, "The
// lab lighter than what it measures"). The sleep blocks this thread only;
// the runtime hands its processor to the other goroutines meanwhile. A raw
// system call that keeps the processor (so that the runtime's monitor does
// not hand it off) measured the same (BenchmarkPacerCPU, two passes) and
// would hold a processor up to the spin window: not kept. A signal ends
// the sleep early: the caller looks at the clock again.
func spinSleep(due time.Time) {
	runtime.Gosched()
	d := time.Until(due)
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil)
}
