package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Limits of the proxies.
const (
	// MaxProxies is how many proxies one Proxies may hold.
	MaxProxies = 64
	// MaxToxicsPerProxy is how many toxics one proxy may carry at once (a
	// toxic on both directions counts twice).
	MaxToxicsPerProxy = 32
	// MaxToxicDelay bounds Latency, Jitter and Timeout.
	MaxToxicDelay = time.Hour
	// MaxRateKBps bounds a bandwidth toxic's rate.
	MaxRateKBps = 10_000_000
	// MaxLimitBytes bounds a limit_data toxic.
	MaxLimitBytes = 1 << 40
	// RestartAttempts and RestartBackoff bound how long bringing a proxy
	// back waits for its port (the listener re-binds the same port, which
	// another socket may hold for a moment).
	RestartAttempts = 20
	RestartBackoff  = 50 * time.Millisecond
)

// Toxic kinds.
const (
	KindLatency   = "latency"
	KindTimeout   = "timeout"
	KindResetPeer = "reset_peer"
	KindBandwidth = "bandwidth"
	KindSlowClose = "slow_close"
	KindLimitData = "limit_data"
)

// Streams.
const (
	StreamDownstream = "downstream" // server -> client
	StreamUpstream   = "upstream"   // client -> server
)

var proxyNameRE = regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)

// Proxies is one in-process toxiproxy server with a TCP proxy per backend,
// each listening on a free loopback port. It is safe for concurrent use.
// The proxies' goroutines belong to the toxiproxy server and stop on Close.
type Proxies struct {
	srv     *toxiproxy.ApiServer
	proxies map[string]*toxiproxy.Proxy // fixed after StartProxies
	addrs   map[string]string           // listen host:port, fixed after StartProxies
	seq     atomic.Uint64               // toxic name sequence

	mu     sync.Mutex // serialises every change (toxics, up/down, Close)
	closed bool
}

// StartProxies starts the toxiproxy server and one proxy per entry of
// upstreams (name -> upstream "host:port", e.g. "mysql" ->
// "127.0.0.1:3306"). Names: [a-z0-9_-]{1,32}. Listeners on 127.0.0.1:0. A
// non-loopback upstream is refused: the lab only ever proxies to this
// machine. On error nothing is left running.
func StartProxies(ctx context.Context, upstreams map[string]string) (*Proxies, error) {
	return StartProxiesOn(ctx, upstreams, nil)
}

// StartProxiesOn is StartProxies with fixed listen addresses: listens
// names, for some proxies, the loopback host:port each must listen on (a
// server the lab did not start from its own code is configured with the
// address of its database and is pointed at the proxy that way); the
// others listen on 127.0.0.1:0. A listen name with no upstream, or a
// non-loopback listen address, is refused.
func StartProxiesOn(ctx context.Context, upstreams, listens map[string]string) (*Proxies, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("chaos: start proxies: %w", err)
	}
	if len(upstreams) == 0 {
		return nil, fmt.Errorf("%w: no upstreams to proxy", ErrInvalid)
	}
	if len(upstreams) > MaxProxies {
		return nil, fmt.Errorf("%w: %d upstreams, at most %d", ErrInvalid, len(upstreams), MaxProxies)
	}
	names := make([]string, 0, len(upstreams))
	for name, up := range upstreams {
		if !proxyNameRE.MatchString(name) {
			return nil, fmt.Errorf("%w: proxy name %q must match %s", ErrInvalid, name, proxyNameRE)
		}
		if err := checkLoopbackAddr(up); err != nil {
			return nil, fmt.Errorf("chaos: proxy %q upstream: %w", name, err)
		}
		names = append(names, name)
	}
	for name, l := range listens {
		if _, ok := upstreams[name]; !ok {
			return nil, fmt.Errorf("%w: listen address for proxy %q, which has no upstream", ErrInvalid, name)
		}
		if err := checkLoopbackAddr(l); err != nil {
			return nil, fmt.Errorf("chaos: proxy %q listen: %w", name, err)
		}
	}
	sort.Strings(names)
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := &Proxies{
		srv:     srv,
		proxies: make(map[string]*toxiproxy.Proxy, len(names)),
		addrs:   make(map[string]string, len(names)),
	}
	for _, name := range names {
		listen := "127.0.0.1:0"
		if l, ok := listens[name]; ok {
			listen = l
		}
		px := toxiproxy.NewProxy(srv, name, listen, upstreams[name])
		if err := srv.Collection.Add(px, true); err != nil {
			_ = srv.Collection.Clear()
			return nil, fmt.Errorf("chaos: start proxy %q: %w", name, err)
		}
		px.Lock()
		addr := px.Listen // the port actually bound
		px.Unlock()
		p.proxies[name] = px
		p.addrs[name] = addr
	}
	return p, nil
}

// NoProxies is a Proxies without any proxy (a run whose faults act on no
// backend's proxy): Names is empty, Addr and every change of a proxy answer
// ErrUnknownProxy, HealAll and Close do nothing.
func NoProxies() *Proxies {
	return &Proxies{proxies: map[string]*toxiproxy.Proxy{}, addrs: map[string]string{}}
}

func (p *Proxies) get(name string) (*toxiproxy.Proxy, error) {
	px, ok := p.proxies[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q (have %v)", ErrUnknownProxy, name, p.Names())
	}
	return px, nil
}

// Addr returns the proxy's listen host:port.
func (p *Proxies) Addr(name string) (string, error) {
	if _, err := p.get(name); err != nil {
		return "", err
	}
	return p.addrs[name], nil
}

// Names returns the proxy names, sorted.
func (p *Proxies) Names() []string {
	names := make([]string, 0, len(p.proxies))
	for n := range p.proxies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Enabled reports whether the proxy accepts connections (false after
// SetDown(true) or Close).
func (p *Proxies) Enabled(name string) (bool, error) {
	px, err := p.get(name)
	if err != nil {
		return false, err
	}
	px.Lock()
	defer px.Unlock()
	return px.Enabled, nil
}

// ToxicNames returns the names of the toxics currently on the proxy,
// sorted.
func (p *Proxies) ToxicNames(name string) ([]string, error) {
	px, err := p.get(name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range px.Toxics.GetToxicArray() {
		if w, ok := t.(*toxics.ToxicWrapper); ok {
			out = append(out, w.Name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (p *Proxies) checkOpen() error {
	if p.closed {
		return ErrClosed
	}
	return nil
}

// change runs fn on the named proxy with p.mu held, after checking that
// the proxy exists and the set is not closed: every change of a proxy's
// toxics or state goes through it.
func (p *Proxies) change(name string, fn func(px *toxiproxy.Proxy) error) error {
	px, err := p.get(name)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkOpen(); err != nil {
		return err
	}
	return fn(px)
}

// AddToxic adds t to the proxy: one toxic for a given Stream, two (one
// per direction) for Stream "". On error nothing is added.
func (p *Proxies) AddToxic(ctx context.Context, name string, t Toxic) error {
	_, err := p.addToxic(ctx, name, t)
	return err
}

// addToxic returns the names of the toxics it added.
func (p *Proxies) addToxic(ctx context.Context, name string, t Toxic) ([]string, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("chaos: add toxic to %q: %w", name, err)
	}
	streams := []string{t.Stream}
	if t.Stream == "" {
		streams = []string{StreamUpstream, StreamDownstream}
	}
	var added []string
	err := p.change(name, func(px *toxiproxy.Proxy) error {
		if have := len(px.Toxics.GetToxicArray()); have+len(streams) > MaxToxicsPerProxy {
			return fmt.Errorf("%w: proxy %q has %d toxics, at most %d", ErrInvalid, name, have, MaxToxicsPerProxy)
		}
		for _, s := range streams {
			tname := fmt.Sprintf("%s_%s_%d", t.Kind, s, p.seq.Add(1))
			body, err := json.Marshal(t.wire(tname, s))
			if err != nil {
				p.removeLocked(ctx, px, added)
				return fmt.Errorf("chaos: encode toxic: %w", err)
			}
			if _, err := px.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
				p.removeLocked(ctx, px, added)
				return fmt.Errorf("chaos: add %s toxic to %q: %w", t.Kind, name, err)
			}
			added = append(added, tname)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

// removeLocked removes the named toxics (best effort; a toxic already gone
// is fine). p.mu is held.
func (p *Proxies) removeLocked(ctx context.Context, px *toxiproxy.Proxy, names []string) {
	for _, n := range names {
		_ = px.Toxics.RemoveToxic(ctx, n)
	}
}

// removeToxics removes the named toxics from the proxy; toxics already gone
// (healed by Heal or HealAll) are not an error.
func (p *Proxies) removeToxics(ctx context.Context, name string, toxicNames []string) error {
	return p.change(name, func(px *toxiproxy.Proxy) error {
		for _, n := range toxicNames {
			if err := px.Toxics.RemoveToxic(ctx, n); err != nil && !errors.Is(err, toxiproxy.ErrToxicNotFound) {
				return fmt.Errorf("chaos: remove toxic %s from %q: %w", n, name, err)
			}
		}
		return nil
	})
}

// SetDown disables (down=true: the listener is closed, so new connections
// are refused, and every existing connection is cut) or enables the proxy
// again on the same port. Either is a no-op when already in that state.
func (p *Proxies) SetDown(ctx context.Context, name string, down bool) error {
	return p.change(name, func(px *toxiproxy.Proxy) error {
		if down {
			px.Stop()
			return nil
		}
		return p.start(ctx, name, px)
	})
}

// start enables the proxy, retrying a bounded number of times while its
// port is briefly held by another socket. p.mu is held.
func (p *Proxies) start(ctx context.Context, name string, px *toxiproxy.Proxy) error {
	var err error
	for attempt := 0; attempt < RestartAttempts; attempt++ {
		err = px.Start()
		if err == nil || errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
			return nil
		}
		t := time.NewTimer(RestartBackoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("chaos: enable proxy %q: %w (last: %v)", name, ctx.Err(), err)
		case <-t.C:
		}
	}
	return fmt.Errorf("chaos: enable proxy %q on %s after %d attempts: %w", name, p.addrs[name], RestartAttempts, err)
}

// Heal removes every toxic from the proxy and enables it.
func (p *Proxies) Heal(ctx context.Context, name string) error {
	return p.change(name, func(px *toxiproxy.Proxy) error {
		px.Toxics.ResetToxics(ctx)
		return p.start(ctx, name, px)
	})
}

// HealAll heals every proxy; it tries all of them and returns their errors
// joined.
func (p *Proxies) HealAll(ctx context.Context) error {
	var errs []error
	for _, n := range p.Names() {
		if err := p.Heal(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close stops every proxy (listeners closed, connections cut). It is
// idempotent; afterwards every change returns ErrClosed.
func (p *Proxies) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.srv == nil {
		return nil // NoProxies
	}
	if err := p.srv.Collection.Clear(); err != nil {
		return fmt.Errorf("chaos: close proxies: %w", err)
	}
	return nil
}

// Toxic is one toxiproxy toxic. Only the fields of its Kind may be set.
type Toxic struct {
	Kind     string        // "latency", "timeout", "reset_peer", "bandwidth", "slow_close", "limit_data"
	Stream   string        // "downstream", "upstream", or "" for both directions (two toxics)
	Latency  time.Duration // latency
	Jitter   time.Duration // latency
	Timeout  time.Duration // timeout (0 = hold data forever), reset_peer (delay before the reset), slow_close
	RateKBps int64         // bandwidth
	Bytes    int64         // limit_data
	Toxicity float64       // 0 means 1.0 (every connection); else in (0,1]
}

func checkDelay(field string, d time.Duration) error {
	switch {
	case d < 0:
		return fmt.Errorf("%w: toxic %s %v is negative", ErrInvalid, field, d)
	case d > MaxToxicDelay:
		return fmt.Errorf("%w: toxic %s %v above %v", ErrInvalid, field, d, MaxToxicDelay)
	case d%time.Millisecond != 0:
		return fmt.Errorf("%w: toxic %s %v is not a whole number of milliseconds", ErrInvalid, field, d)
	}
	return nil
}

// Validate checks the toxic: a known kind and stream, durations whole
// milliseconds in [0, MaxToxicDelay], a rate in [1, MaxRateKBps], bytes in
// [0, MaxLimitBytes], toxicity 0 or in (0,1], and no field of another kind
// set.
func (t Toxic) Validate() error {
	switch t.Stream {
	case "", StreamDownstream, StreamUpstream:
	default:
		return fmt.Errorf("%w: toxic stream %q (want %q, %q or \"\" for both)", ErrInvalid, t.Stream, StreamDownstream, StreamUpstream)
	}
	if math.IsNaN(t.Toxicity) || t.Toxicity < 0 || t.Toxicity > 1 {
		return fmt.Errorf("%w: toxicity %v outside [0,1]", ErrInvalid, t.Toxicity)
	}
	for _, c := range []struct {
		f string
		d time.Duration
	}{{"latency", t.Latency}, {"jitter", t.Jitter}, {"timeout", t.Timeout}} {
		if err := checkDelay(c.f, c.d); err != nil {
			return err
		}
	}
	if t.RateKBps < 0 {
		return fmt.Errorf("%w: toxic rate %d KB/s is negative", ErrInvalid, t.RateKBps)
	}
	if t.Bytes < 0 {
		return fmt.Errorf("%w: toxic bytes %d is negative", ErrInvalid, t.Bytes)
	}
	// Which fields each kind uses; any other non-zero field is a mistake.
	var latency, timeout, rate, bytesOK bool
	switch t.Kind {
	case KindLatency:
		latency = true
		if t.Latency == 0 && t.Jitter == 0 {
			return fmt.Errorf("%w: latency toxic needs Latency or Jitter > 0", ErrInvalid)
		}
	case KindTimeout, KindResetPeer, KindSlowClose:
		timeout = true
	case KindBandwidth:
		rate = true
		if t.RateKBps < 1 || t.RateKBps > MaxRateKBps {
			return fmt.Errorf("%w: bandwidth toxic rate %d KB/s outside [1,%d]", ErrInvalid, t.RateKBps, MaxRateKBps)
		}
	case KindLimitData:
		bytesOK = true
		if t.Bytes > MaxLimitBytes {
			return fmt.Errorf("%w: limit_data toxic bytes %d above %d", ErrInvalid, t.Bytes, int64(MaxLimitBytes))
		}
	default:
		return fmt.Errorf("%w: unknown toxic kind %q (want one of %s, %s, %s, %s, %s, %s)", ErrInvalid, t.Kind,
			KindLatency, KindTimeout, KindResetPeer, KindBandwidth, KindSlowClose, KindLimitData)
	}
	switch {
	case !latency && (t.Latency != 0 || t.Jitter != 0):
		return fmt.Errorf("%w: %s toxic does not take Latency/Jitter", ErrInvalid, t.Kind)
	case !timeout && t.Timeout != 0:
		return fmt.Errorf("%w: %s toxic does not take Timeout", ErrInvalid, t.Kind)
	case !rate && t.RateKBps != 0:
		return fmt.Errorf("%w: %s toxic does not take RateKBps", ErrInvalid, t.Kind)
	case !bytesOK && t.Bytes != 0:
		return fmt.Errorf("%w: %s toxic does not take Bytes", ErrInvalid, t.Kind)
	}
	return nil
}

// wireToxic is toxiproxy's JSON form of a toxic.
type wireToxic struct {
	Name       string           `json:"name"`
	Type       string           `json:"type"`
	Stream     string           `json:"stream"`
	Toxicity   float32          `json:"toxicity"`
	Attributes map[string]int64 `json:"attributes"`
}

func (t Toxic) wire(name, stream string) wireToxic {
	tox := t.Toxicity
	if tox == 0 {
		tox = 1
	}
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	var attrs map[string]int64
	switch t.Kind {
	case KindLatency:
		attrs = map[string]int64{"latency": ms(t.Latency), "jitter": ms(t.Jitter)}
	case KindTimeout, KindResetPeer:
		attrs = map[string]int64{"timeout": ms(t.Timeout)}
	case KindSlowClose:
		attrs = map[string]int64{"delay": ms(t.Timeout)}
	case KindBandwidth:
		attrs = map[string]int64{"rate": t.RateKBps}
	case KindLimitData:
		attrs = map[string]int64{"bytes": t.Bytes}
	}
	return wireToxic{Name: name, Type: t.Kind, Stream: stream, Toxicity: float32(tox), Attributes: attrs}
}

// describe is the toxic's short form for fault names, e.g.
// "latency(redis,50ms)" or "bandwidth(mysql,100KB/s,downstream,p=0.5)".
func (t Toxic) describe(proxy string) string {
	args := []string{proxy}
	switch t.Kind {
	case KindLatency:
		args = append(args, t.Latency.String())
		if t.Jitter != 0 {
			args = append(args, "jitter="+t.Jitter.String())
		}
	case KindTimeout, KindSlowClose:
		args = append(args, t.Timeout.String())
	case KindResetPeer:
		if t.Timeout != 0 {
			args = append(args, "after="+t.Timeout.String())
		}
	case KindBandwidth:
		args = append(args, fmt.Sprintf("%dKB/s", t.RateKBps))
	case KindLimitData:
		args = append(args, fmt.Sprintf("%dB", t.Bytes))
	}
	if t.Stream != "" {
		args = append(args, t.Stream)
	}
	if t.Toxicity != 0 && t.Toxicity != 1 {
		args = append(args, fmt.Sprintf("p=%g", t.Toxicity))
	}
	s := t.Kind + "("
	for i, a := range args {
		if i > 0 {
			s += ","
		}
		s += a
	}
	return s + ")"
}
