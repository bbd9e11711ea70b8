package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"imlab/internal/testenv"
)

// callLog records the calls of Func faults.
type callLog struct {
	start time.Time
	mu    sync.Mutex
	calls []call
	live  map[string]bool
}

type call struct {
	fault, action string
	at            time.Duration
	live          int  // faults injected and not healed, at the time of the call
	ctxAlive      bool // the call's context had not ended
}

func newCallLog(start time.Time) *callLog { return &callLog{start: start, live: map[string]bool{}} }

func (l *callLog) record(name, action string, ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if action == ActionInject {
		l.live[name] = true
	} else {
		delete(l.live, name)
	}
	l.calls = append(l.calls, call{fault: name, action: action, at: time.Since(l.start), live: len(l.live), ctxAlive: ctx.Err() == nil})
}

func (l *callLog) fault(name string, injectErr error) Fault {
	return Func(name,
		func(ctx context.Context) error { l.record(name, ActionInject, ctx); return injectErr },
		func(ctx context.Context) error { l.record(name, ActionHeal, ctx); return nil })
}

func (l *callLog) get() []call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]call(nil), l.calls...)
}

func findEvent(t *testing.T, evs []Event, fault, action string) Event {
	t.Helper()
	var found []Event
	for _, e := range evs {
		if e.Fault == fault && e.Action == action {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s %s event, have %d in %+v", fault, action, len(found), evs)
	}
	return found[0]
}

func TestRunScheduleOrderAndOverlap(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	log := newCallLog(start)
	// a: [0, 900ms)   b: one-shot at 300ms   c: [600ms, 1000ms), overlapping a.
	// Given out of order on purpose; the schedule sorts by At.
	steps := []Step{
		{At: 600 * time.Millisecond, For: 400 * time.Millisecond, Fault: log.fault("c", nil)},
		{At: 0, For: 900 * time.Millisecond, Fault: log.fault("a", nil)},
		{At: 300 * time.Millisecond, Fault: log.fault("b", errors.New("boom"))},
	}
	evs, err := RunSchedule(ctx, start, steps)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 6 {
		t.Fatalf("want 6 events, have %+v", evs)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].At < evs[i-1].At {
			t.Fatalf("events not in time order: %+v", evs)
		}
	}
	for _, s := range steps {
		name := s.Fault.Name()
		inj, heal := findEvent(t, evs, name, ActionInject), findEvent(t, evs, name, ActionHeal)
		if inj.At < s.At {
			t.Errorf("%s injected at %v, before its offset %v", name, inj.At, s.At)
		}
		if heal.At < s.At+s.For || heal.At < inj.At {
			t.Errorf("%s healed at %v, before %v", name, heal.At, s.At+s.For)
		}
		if inj.Took < 0 || heal.Took < 0 {
			t.Errorf("negative durations: %+v %+v", inj, heal)
		}
	}
	// b's inject failed: recorded, healed anyway, and the others ran on.
	if e := findEvent(t, evs, "b", ActionInject); !strings.Contains(e.Err, "boom") {
		t.Fatalf("failed inject not recorded: %+v", e)
	}
	if e := findEvent(t, evs, "b", ActionHeal); e.Err != "" {
		t.Fatalf("heal of b: %+v", e)
	}
	// Wide margins (300 ms) between these, so a loaded machine cannot swap them.
	if findEvent(t, evs, "b", ActionInject).At >= findEvent(t, evs, "c", ActionInject).At ||
		findEvent(t, evs, "c", ActionInject).At >= findEvent(t, evs, "a", ActionHeal).At {
		t.Fatalf("steps out of order: %+v", evs)
	}
	calls := log.get()
	if len(calls) != 6 {
		t.Fatalf("want 6 calls, have %+v", calls)
	}
	for _, c := range calls {
		if c.fault == "c" && c.action == ActionInject && c.live != 2 {
			t.Fatalf("c was injected while %d faults were live, want 2 (a and c overlap)", c.live)
		}
		if !c.ctxAlive {
			t.Fatalf("%s %s ran on an ended context", c.fault, c.action)
		}
	}
	if last := calls[len(calls)-1]; last.live != 0 {
		t.Fatalf("%d faults still injected at the end", last.live)
	}

	b, err := json.Marshal(evs[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"at_ns", "fault", "action", "took_ns"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("event JSON %s lacks %q", b, k)
		}
	}
}

func TestRunScheduleCancelHeals(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	log := newCallLog(start)
	steps := []Step{
		{At: 0, For: 30 * time.Second, Fault: log.fault("long", nil)},
		{At: 50 * time.Millisecond, For: 30 * time.Second, Fault: log.fault("second", nil)},
		{At: 20 * time.Second, For: time.Second, Fault: log.fault("never", nil)},
	}
	time.AfterFunc(300*time.Millisecond, cancel)
	evs, err := RunSchedule(ctx, start, steps)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("RunSchedule took %v after cancellation", took)
	}
	for _, name := range []string{"long", "second"} {
		findEvent(t, evs, name, ActionInject)
		if e := findEvent(t, evs, name, ActionHeal); e.Err != "" || e.At < 300*time.Millisecond {
			t.Fatalf("%s: heal %+v", name, e)
		}
	}
	for _, e := range evs {
		if e.Fault == "never" {
			t.Fatalf("a step due after the cancellation ran: %+v", e)
		}
	}
	for _, c := range log.get() {
		if c.action == ActionHeal && !c.ctxAlive {
			t.Fatalf("%s healed on an ended context", c.fault)
		}
	}
	if calls := log.get(); calls[len(calls)-1].live != 0 {
		t.Fatal("a fault is still injected after a cancelled schedule")
	}

	// A context that is already over runs nothing.
	log2 := newCallLog(time.Now())
	evs, err = RunSchedule(ctx, time.Now(), []Step{{Fault: log2.fault("x", nil)}})
	if !errors.Is(err, context.Canceled) || len(evs) != 0 || len(log2.get()) != 0 {
		t.Fatalf("ended context: %v, %+v, %+v", err, evs, log2.get())
	}
}

func TestRunScheduleValidation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	log := newCallLog(time.Now())
	ok := log.fault("ok", nil)
	tooMany := make([]Step, MaxSteps+1)
	for i := range tooMany {
		tooMany[i] = Step{Fault: ok}
	}
	p := startProxies(t, map[string]string{"redis": testenv.RedisAddr()})
	for name, steps := range map[string][]Step{
		"nil fault":        {{Fault: ok}, {At: time.Second}},
		"negative At":      {{At: -time.Millisecond, Fault: ok}},
		"negative For":     {{For: -time.Millisecond, Fault: ok}},
		"beyond span":      {{At: 20 * time.Hour, For: 5 * time.Hour, Fault: ok}},
		"At beyond span":   {{At: MaxScheduleSpan + time.Second, Fault: ok}},
		"too many":         tooMany,
		"func w/o inject":  {{Fault: Func("x", nil, nil)}},
		"func w/o name":    {{Fault: Func("", func(context.Context) error { return nil }, nil)}},
		"bad toxic":        {{Fault: ProxyToxic(p, "redis", Toxic{Kind: KindLatency, Latency: -time.Second})}},
		"unknown proxy":    {{Fault: ProxyDown(p, "nope")}},
		"wipe w/o prefix":  {{Fault: RedisWipe(nil, RedisWipeConfig{})}},
		"kafka w/o client": {{Fault: KafkaRecordLoss(nil, "t")}},
	} {
		evs, err := RunSchedule(ctx, time.Now(), steps)
		if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnknownProxy) {
			t.Errorf("%s: want a validation error, got %v", name, err)
		}
		if len(evs) != 0 {
			t.Errorf("%s: events from a refused schedule: %+v", name, evs)
		}
	}
	if _, err := RunSchedule(ctx, time.Time{}, []Step{{Fault: ok}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero start: %v", err)
	}
	if calls := log.get(); len(calls) != 0 {
		t.Fatalf("a refused schedule injected: %+v", calls)
	}
	// Exactly at the limits is fine.
	evs, err := RunSchedule(ctx, time.Now(), nil)
	if err != nil || len(evs) != 0 {
		t.Fatalf("empty schedule: %v, %+v", err, evs)
	}
	if err := ValidateSteps([]Step{{At: MaxScheduleSpan, Fault: ok}, {At: time.Hour, For: MaxScheduleSpan - time.Hour, Fault: ok}}); err != nil {
		t.Fatalf("steps at the span limit: %v", err)
	}
}

// TestRunScheduleProxyFaults runs toxics and a downed proxy from a
// schedule: while a step is live the toxic is on the proxy, afterwards the
// proxy is clean and up.
func TestRunScheduleProxyFaults(t *testing.T) {
	t.Parallel()
	p := startProxies(t, map[string]string{"redis": testenv.RedisAddr()})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	var mu sync.Mutex
	var seen []int
	var seenDown bool
	probe := Func("probe", func(context.Context) error {
		n, err := p.ToxicNames("redis")
		on, _ := p.Enabled("redis")
		mu.Lock()
		seen = append(seen, len(n))
		seenDown = seenDown || !on
		mu.Unlock()
		return err
	}, nil)
	evs, err := RunSchedule(ctx, start, []Step{
		{At: 0, For: 600 * time.Millisecond, Fault: ProxyToxic(p, "redis", Toxic{Kind: KindLatency, Latency: 5 * time.Millisecond})},
		{At: 0, For: 600 * time.Millisecond, Fault: ProxyDown(p, "redis")},
		{At: 300 * time.Millisecond, Fault: probe},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Err != "" {
			t.Fatalf("%+v", e)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != 2 || !seenDown {
		t.Fatalf("while live: toxics %v, down %v; want 2 toxics and down", seen, seenDown)
	}
	if n, _ := p.ToxicNames("redis"); len(n) != 0 {
		t.Fatalf("toxics left after the schedule: %v", n)
	}
	if on, _ := p.Enabled("redis"); !on {
		t.Fatal("proxy left down after the schedule")
	}
}
