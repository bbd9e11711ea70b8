package chaos

import (
	"context"
	"fmt"
	"sync"
)

// Fault is one injectable fault.
type Fault interface {
	Name() string // short, for logs and reports, e.g. "latency(redis,50ms)", "redis_wipe"
	Inject(ctx context.Context) error
	Heal(ctx context.Context) error // idempotent; a no-op for one-shot faults (a wipe cannot be undone)
}

// Validator is implemented by faults that can check their arguments
// before anything is injected; RunSchedule calls it on every step first.
// Every fault of this package implements it.
type Validator interface {
	Validate() error
}

// Impact is implemented by the direct data faults: Affected is how many
// keys, counters or records the last Inject deleted or changed. RunSchedule
// records it in the inject Event.
type Impact interface {
	Affected() int64
}

// proxyToxicFault adds a toxic on Inject and removes exactly the toxics it
// added on Heal, so overlapping faults on the same proxy heal separately.
type proxyToxicFault struct {
	p     *Proxies
	proxy string
	t     Toxic

	mu    sync.Mutex
	added []string // toxics this fault added and has not removed yet
}

// ProxyToxic is the fault "toxic t on proxy name". Inject adds the
// toxic(s); Heal removes them (only the toxics this fault added: a toxic
// of another fault on the same proxy, or a proxy taken down, stays; use
// Proxies.Heal to clear a proxy entirely). Injecting twice adds twice; one
// Heal removes all.
func ProxyToxic(p *Proxies, name string, t Toxic) Fault {
	return &proxyToxicFault{p: p, proxy: name, t: t}
}

func (f *proxyToxicFault) Name() string { return f.t.describe(f.proxy) }

func (f *proxyToxicFault) Validate() error {
	if f.p == nil {
		return fmt.Errorf("%w: %s: nil proxies", ErrInvalid, f.Name())
	}
	if _, err := f.p.get(f.proxy); err != nil {
		return err
	}
	return f.t.Validate()
}

func (f *proxyToxicFault) Inject(ctx context.Context) error {
	if err := f.Validate(); err != nil {
		return err
	}
	names, err := f.p.addToxic(ctx, f.proxy, f.t)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.added = append(f.added, names...)
	f.mu.Unlock()
	return nil
}

func (f *proxyToxicFault) Heal(ctx context.Context) error {
	if f.p == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.added) == 0 {
		return nil
	}
	if err := f.p.removeToxics(ctx, f.proxy, f.added); err != nil {
		return err
	}
	f.added = nil
	return nil
}

type proxyDownFault struct {
	p     *Proxies
	proxy string
}

// ProxyDown is the fault "backend unreachable": Inject disables the proxy
// (connections refused, existing ones cut), Heal enables it again.
func ProxyDown(p *Proxies, name string) Fault { return &proxyDownFault{p: p, proxy: name} }

func (f *proxyDownFault) Name() string { return "down(" + f.proxy + ")" }

func (f *proxyDownFault) Validate() error {
	if f.p == nil {
		return fmt.Errorf("%w: %s: nil proxies", ErrInvalid, f.Name())
	}
	_, err := f.p.get(f.proxy)
	return err
}

func (f *proxyDownFault) Inject(ctx context.Context) error {
	if err := f.Validate(); err != nil {
		return err
	}
	return f.p.SetDown(ctx, f.proxy, true)
}

func (f *proxyDownFault) Heal(ctx context.Context) error {
	if err := f.Validate(); err != nil {
		return err
	}
	return f.p.SetDown(ctx, f.proxy, false)
}

type funcFault struct {
	name         string
	inject, heal func(ctx context.Context) error
}

// Func wraps caller-supplied actions (the scenario runner uses it to stop
// and restart server processes). heal may be nil (a one-shot fault); inject
// may not. heal must be idempotent, as Fault requires.
func Func(name string, inject, heal func(ctx context.Context) error) Fault {
	return &funcFault{name: name, inject: inject, heal: heal}
}

func (f *funcFault) Name() string { return f.name }

func (f *funcFault) Validate() error {
	if f.name == "" {
		return fmt.Errorf("%w: func fault without a name", ErrInvalid)
	}
	if f.inject == nil {
		return fmt.Errorf("%w: func fault %q has no inject action", ErrInvalid, f.name)
	}
	return nil
}

func (f *funcFault) Inject(ctx context.Context) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if err := f.inject(ctx); err != nil {
		return fmt.Errorf("chaos: %s: inject: %w", f.name, err)
	}
	return nil
}

func (f *funcFault) Heal(ctx context.Context) error {
	if f.heal == nil {
		return nil
	}
	if err := f.heal(ctx); err != nil {
		return fmt.Errorf("chaos: %s: heal: %w", f.name, err)
	}
	return nil
}
