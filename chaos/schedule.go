package chaos

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Limits of a schedule.
const (
	// MaxSteps is how many steps one schedule may have.
	MaxSteps = 1000
	// MaxScheduleSpan bounds At+For of every step.
	MaxScheduleSpan = 24 * time.Hour
	// HealTimeout bounds each Heal the schedule runs (on a context of its
	// own, so that faults are healed even after the schedule's context
	// ended).
	HealTimeout = 10 * time.Second
)

// Event actions.
const (
	ActionInject = "inject"
	ActionHeal   = "heal"
)

// Step is one fault of a schedule.
type Step struct {
	At    time.Duration // offset from the schedule's start
	For   time.Duration // how long the fault stays before Heal; 0 = heal right after inject (one-shot faults)
	Fault Fault
}

// Event is one action the schedule took.
type Event struct {
	At       time.Duration `json:"at_ns"` // offset from start when the action happened (began)
	Fault    string        `json:"fault"`
	Action   string        `json:"action"` // "inject" or "heal"
	Err      string        `json:"error,omitempty"`
	Took     time.Duration `json:"took_ns"`            // how long the action ran
	Affected int64         `json:"affected,omitempty"` // inject of an Impact fault: keys/counters/records changed
}

// ValidateSteps checks a schedule without running it: at most MaxSteps
// steps, each with At >= 0, For >= 0, At+For <= MaxScheduleSpan and a
// fault, whose own Validate (if it has one) passes.
func ValidateSteps(steps []Step) error {
	if len(steps) > MaxSteps {
		return fmt.Errorf("%w: %d schedule steps, at most %d", ErrInvalid, len(steps), MaxSteps)
	}
	for i, s := range steps {
		switch {
		case s.Fault == nil:
			return fmt.Errorf("%w: step %d has no fault", ErrInvalid, i)
		case s.At < 0:
			return fmt.Errorf("%w: step %d (%s): At %v is negative", ErrInvalid, i, s.Fault.Name(), s.At)
		case s.For < 0:
			return fmt.Errorf("%w: step %d (%s): For %v is negative", ErrInvalid, i, s.Fault.Name(), s.For)
		case s.At > MaxScheduleSpan || s.For > MaxScheduleSpan-s.At:
			return fmt.Errorf("%w: step %d (%s): At+For %v beyond %v", ErrInvalid, i, s.Fault.Name(), s.At+s.For, MaxScheduleSpan)
		}
		if v, ok := s.Fault.(Validator); ok {
			if err := v.Validate(); err != nil {
				return fmt.Errorf("step %d (%s): %w", i, s.Fault.Name(), err)
			}
		}
	}
	return nil
}

// recorder collects events from the step goroutines.
type recorder struct {
	start  time.Time
	mu     sync.Mutex
	events []Event
}

func (r *recorder) do(f Fault, action string, fn func() error) {
	began := time.Now()
	err := fn()
	ev := Event{At: began.Sub(r.start), Fault: f.Name(), Action: action, Took: time.Since(began)}
	if err != nil {
		ev.Err = err.Error()
	}
	if action == ActionInject {
		if im, ok := f.(Impact); ok {
			ev.Affected = im.Affected()
		}
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

// waitUntil sleeps until t; false if ctx ended first.
func waitUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// RunSchedule runs steps (any order; validated by ValidateSteps, and start
// must be set) relative to start, in the caller's goroutine, and returns
// when every step was injected and healed. A step is injected at start+At
// (at once if that is past) and healed at start+At+For (at once if the
// inject ran past it). Overlapping steps are allowed: each runs in a
// goroutine of its own from its At, and all are joined before return.
// When ctx ends early, steps not yet injected are skipped and every fault
// that is still injected is healed (each Heal on a fresh context bounded by
// HealTimeout) before it returns ctx's error. A failed inject or heal is
// recorded in its Event (Err) and does not stop the others; a step whose
// inject failed is still healed, since a fault may be partly applied.
// Events are returned in time order.
func RunSchedule(ctx context.Context, start time.Time, steps []Step) ([]Event, error) {
	if start.IsZero() {
		return nil, fmt.Errorf("%w: schedule start time not set", ErrInvalid)
	}
	if err := ValidateSteps(steps); err != nil {
		return nil, err
	}
	order := make([]int, len(steps))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return steps[order[a]].At < steps[order[b]].At })

	rec := &recorder{start: start}
	var cut atomic.Bool // a step was skipped or healed early because ctx ended
	var wg sync.WaitGroup
	for _, i := range order {
		st := steps[i]
		if !waitUntil(ctx, start.Add(st.At)) {
			cut.Store(true)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !runStep(ctx, start, st, rec) {
				cut.Store(true)
			}
		}()
	}
	wg.Wait()

	sort.SliceStable(rec.events, func(a, b int) bool { return rec.events[a].At < rec.events[b].At })
	if cut.Load() {
		return rec.events, fmt.Errorf("chaos: schedule stopped early: %w", ctx.Err())
	}
	return rec.events, nil
}

// runStep injects, waits until the step's heal time and heals; false if
// ctx ended before the step ran its course.
func runStep(ctx context.Context, start time.Time, st Step, rec *recorder) bool {
	if ctx.Err() != nil {
		return false
	}
	rec.do(st.Fault, ActionInject, func() error { return st.Fault.Inject(ctx) })
	full := waitUntil(ctx, start.Add(st.At+st.For))
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), HealTimeout)
	defer cancel()
	rec.do(st.Fault, ActionHeal, func() error { return st.Fault.Heal(hctx) })
	return full
}
