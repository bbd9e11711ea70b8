package scenario

import (
	"time"

	"imlab/loadgen"
	"imlab/loadgen/schedule"
)

// LoadSpec is the load phase (loadgen).
type LoadSpec struct {
	// Rate is a loadgen rate shape: const:500, steps:..., burst:..., sine:....
	Rate     string   `yaml:"rate" json:"rate"`
	Duration Duration `yaml:"duration" json:"duration"`
	Users    int      `yaml:"users" json:"users"`
	// Devices per user (default 2).
	Devices int `yaml:"devices,omitempty" json:"devices,omitempty"`
	// Online and Crashy are fractions of the devices (the rest are
	// offline); defaults 0.6 and 0.1. Pointers: 0 is a valid value.
	Online *float64 `yaml:"online,omitempty" json:"online,omitempty"`
	Crashy *float64 `yaml:"crashy,omitempty" json:"crashy,omitempty"`
	// Groups, GroupShare and GroupSizes ("3:50,20:50") describe group
	// conversations (default none).
	Groups     int     `yaml:"groups,omitempty" json:"groups,omitempty"`
	GroupShare float64 `yaml:"group_share,omitempty" json:"group_share,omitempty"`
	GroupSizes string  `yaml:"group_sizes,omitempty" json:"group_sizes,omitempty"`
	// SendVia: http (default) or ws.
	SendVia string `yaml:"send_via,omitempty" json:"send_via,omitempty"`
	// ComeBackEvery: offline and crashy devices come back and pull this
	// often (default 2s). "0s" keeps them away for the whole run: they
	// pull everything only at the final drain (the month-long offline
	// case).
	ComeBackEvery *Duration `yaml:"come_back_every,omitempty" json:"come_back_every,omitempty"`
	// Settle (default 2s) and DrainTimeout (default 60s): loadgen's.
	Settle       *Duration `yaml:"settle,omitempty" json:"settle,omitempty"`
	DrainTimeout Duration  `yaml:"drain_timeout,omitempty" json:"drain_timeout,omitempty"`
	// PullLimit is the devices' page size (default 200).
	PullLimit int `yaml:"pull_limit,omitempty" json:"pull_limit,omitempty"`
	// The generator's transport and pool, for loads the defaults cannot
	// offer (a 50k/s burst): Conns is the HTTP pool (default 64);
	// Pipeline > 0 sends over PipelineConns connections (default 2) with
	// up to Pipeline requests in flight on each; MaxWorkers bounds the
	// pacer's send goroutines (default loadgen's 20000: a tick that finds
	// them all busy starts late); SendTimeout bounds one send exchange
	// (default 5s).
	Conns         int      `yaml:"conns,omitempty" json:"conns,omitempty"`
	Pipeline      int      `yaml:"pipeline,omitempty" json:"pipeline,omitempty"`
	PipelineConns int      `yaml:"pipeline_conns,omitempty" json:"pipeline_conns,omitempty"`
	MaxWorkers    int      `yaml:"max_workers,omitempty" json:"max_workers,omitempty"`
	SendTimeout   Duration `yaml:"send_timeout,omitempty" json:"send_timeout,omitempty"`
	// Senders > 0 is the pacer's queued mode (schedule.Config.Senders):
	// that many send goroutines, fed through a queue of at most MaxQueued
	// sends (default DefaultMaxQueued) that the pacer fills at each send's
	// intended time; a send's wait there counts in its ACK latency. It
	// keeps the generator's goroutines (and its cost per send) bounded
	// while a slow server holds a burst's sends in flight; max_workers is
	// then not used. 0: a goroutine per send in flight, up to max_workers.
	Senders   int `yaml:"senders,omitempty" json:"senders,omitempty"`
	MaxQueued int `yaml:"max_queued,omitempty" json:"max_queued,omitempty"`
	// SpinWindow: the pacer yields in a loop instead of sleeping for the
	// last SpinWindow before each send (schedule.Config.SpinWindow,
	// default 2ms: starts within tens of µs of their time, at the cost of
	// a busy pacer while the rate is low). "0s" sleeps only: starts up to
	// about a millisecond late, and no CPU taken from the server beside it.
	SpinWindow *Duration `yaml:"spin_window,omitempty" json:"spin_window,omitempty"`
	// Seed of the population and traffic (default 1).
	Seed uint64 `yaml:"seed,omitempty" json:"seed,omitempty"`
	// Segments > 1 splits the load over that many generator processes on
	// this machine (loadgen execution segments, each an OS process with its
	// own GOMAXPROCS), judged together as one run.
	Segments int `yaml:"segments,omitempty" json:"segments,omitempty"`
	// EmbeddedRateScale multiplies every rate of Rate when the run's MySQL
	// is the embedded engine (default DefaultEmbeddedRateScale; 1 runs the
	// file's rate). The run says so wherever it reports (Result.RateScale).
	EmbeddedRateScale *float64 `yaml:"embedded_rate_scale,omitempty" json:"embedded_rate_scale,omitempty"`
	// Retries is how often a send whose outcome is unknown (a timeout, a
	// 503) is sent again with the same client_msg_id, as a real client
	// does (default loadgen's, 2). Pointer: 0 is a valid value.
	Retries *int `yaml:"retries,omitempty" json:"retries,omitempty"`
	// Mix is the client mix (loadgen.Mix, its keys and defaults): what the
	// devices do besides sending and pulling their inbox (enter
	// conversations, page history, revoke, delete, clear, mark read).
	// Absent: none of it, as before the mix existed.
	Mix *loadgen.Mix `yaml:"mix,omitempty" json:"mix,omitempty"`
}

func (l LoadSpec) validate() error {
	if _, err := schedule.Parse(l.Rate); err != nil {
		return Bad("load.rate", "%q: %v", l.Rate, err)
	}
	if e := l.EmbeddedRateScale; e != nil && !(*e > 0 && *e <= 1) {
		return Bad("load.embedded_rate_scale", "%g: want (0, 1]", *e)
	}
	if l.Duration <= 0 || l.Duration.D() > MaxLoadDuration {
		return Bad("load.duration", "%s: want (0, %s]", l.Duration.D(), MaxLoadDuration)
	}
	return l.validateTemplate()
}

// validateTemplate checks what a load section says besides its rate and
// duration: the population and the transport (a capacity file's load is
// only that: the search sets each step's rate and length).
func (l LoadSpec) validateTemplate() error {
	if l.Mix != nil {
		if err := l.Mix.Validate(); err != nil {
			return Bad("load", "%v", err)
		}
	}
	if l.EmbeddedRateScale != nil && l.Rate == "" {
		return Bad("load.embedded_rate_scale", "kind capacity: the search's from and to are the rates")
	}
	if l.Users < 2 || l.Users > MaxUsers {
		return Bad("load.users", "%d: want 2..%d", l.Users, MaxUsers)
	}
	if l.Devices < 0 || l.Devices > loadgen.MaxDevicesPerUser {
		return Bad("load.devices", "%d: want 1..%d", l.Devices, loadgen.MaxDevicesPerUser)
	}
	on, cr := l.OnlineOr(), l.CrashyOr()
	if on < 0 || on > 1 {
		return Bad("load.online", "%g: want 0..1", on)
	}
	if cr < 0 || cr > 1 || on+cr > 1 {
		return Bad("load.crashy", "%g: want 0..1 with online + crashy <= 1", cr)
	}
	if l.Groups < 0 || l.Groups > loadgen.MaxGroups {
		return Bad("load.groups", "%d: want 0..%d", l.Groups, loadgen.MaxGroups)
	}
	if l.GroupShare < 0 || l.GroupShare > 1 {
		return Bad("load.group_share", "%g: want 0..1", l.GroupShare)
	}
	if l.GroupShare > 0 && l.Groups == 0 {
		return Bad("load.group_share", "%g needs load.groups > 0", l.GroupShare)
	}
	if _, err := loadgen.ParseSizes(Or(l.GroupSizes, DefaultGroupSizes)); err != nil {
		return Bad("load.group_sizes", "%q: %v", l.GroupSizes, err)
	}
	switch l.SendVia {
	case "", loadgen.ViaHTTP, loadgen.ViaWS:
	default:
		return Bad("load.send_via", "%q: want http or ws", l.SendVia)
	}
	if l.ComeBackEvery != nil && (l.ComeBackEvery.D() < 0 || l.ComeBackEvery.D() > MaxLoadDuration) {
		return Bad("load.come_back_every", "%s: want 0..%s", l.ComeBackEvery.D(), MaxLoadDuration)
	}
	if l.Settle != nil && (l.Settle.D() < 0 || l.Settle.D() > MaxSettle) {
		return Bad("load.settle", "%s: want 0..%s", l.Settle.D(), MaxSettle)
	}
	if l.DrainTimeout < 0 || l.DrainTimeout.D() > MaxDrainTimeout {
		return Bad("load.drain_timeout", "%s: want (0, %s]", l.DrainTimeout.D(), MaxDrainTimeout)
	}
	if l.PullLimit < 0 || l.PullLimit > 500 {
		return Bad("load.pull_limit", "%d: want 1..500", l.PullLimit)
	}
	if l.Segments < 0 || l.Segments > MaxLoadSegments || l.Segments > l.Users {
		return Bad("load.segments", "%d: want 0..%d and at most load.users", l.Segments, MaxLoadSegments)
	}
	if l.Conns < 0 || l.Conns > MaxConns {
		return Bad("load.conns", "%d: want 1..%d", l.Conns, MaxConns)
	}
	if l.Pipeline < 0 || l.Pipeline > MaxPipeline || l.PipelineConns < 0 || l.PipelineConns > loadgen.MaxPipelineConns {
		return Bad("load.pipeline", "%d on %d connections: want 0..%d requests on 1..%d connections", l.Pipeline, l.PipelineConns, MaxPipeline, loadgen.MaxPipelineConns)
	}
	if l.PipelineConns > 0 && l.Pipeline == 0 {
		return Bad("load.pipeline_conns", "%d without load.pipeline", l.PipelineConns)
	}
	if l.MaxWorkers < 0 || l.MaxWorkers > MaxWorkers {
		return Bad("load.max_workers", "%d: want 1..%d", l.MaxWorkers, MaxWorkers)
	}
	if l.SpinWindow != nil && (l.SpinWindow.D() < 0 || l.SpinWindow.D() > MaxSpinWindow) {
		return Bad("load.spin_window", "%s: want 0..%s", l.SpinWindow.D(), MaxSpinWindow)
	}
	if l.Senders < 0 || l.Senders > MaxSenders {
		return Bad("load.senders", "%d: want 0..%d", l.Senders, MaxSenders)
	}
	if l.MaxQueued < 0 || l.MaxQueued > MaxQueuedSends || (l.MaxQueued > 0 && l.Senders == 0) {
		return Bad("load.max_queued", "%d: want 1..%d, and only with load.senders", l.MaxQueued, MaxQueuedSends)
	}
	if l.SendTimeout < 0 || l.SendTimeout.D() > MaxLatency {
		return Bad("load.send_timeout", "%s: want (0, %s]", l.SendTimeout.D(), MaxLatency)
	}
	if l.Retries != nil && (*l.Retries < 0 || *l.Retries > MaxRetries) {
		return Bad("load.retries", "%d: want 0..%d", *l.Retries, MaxRetries)
	}
	return nil
}

// OnlineOr is the online fraction, default 0.6.
func (l LoadSpec) OnlineOr() float64 {
	if l.Online == nil {
		return DefaultOnline
	}
	return *l.Online
}

// CrashyOr is the crashy fraction, default 0.1.
func (l LoadSpec) CrashyOr() float64 {
	if l.Crashy == nil {
		return DefaultCrashy
	}
	return *l.Crashy
}

// EmbeddedRateScaleOr is load.embedded_rate_scale or its default.
func (l LoadSpec) EmbeddedRateScaleOr() float64 {
	if l.EmbeddedRateScale != nil {
		return *l.EmbeddedRateScale
	}
	return DefaultEmbeddedRateScale
}

// SettleOr is the settle wait, default 2s.
func (l LoadSpec) SettleOr() time.Duration {
	if l.Settle == nil {
		return DefaultSettle
	}
	return l.Settle.D()
}

// DrainTimeoutOr is the drain bound, default 60s.
func (l LoadSpec) DrainTimeoutOr() time.Duration {
	if l.DrainTimeout == 0 {
		return DefaultDrainTimeout
	}
	return l.DrainTimeout.D()
}
