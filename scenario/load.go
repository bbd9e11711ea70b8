package scenario

import (
	"reflect"

	"gopkg.in/yaml.v3"

	"imlab/loadgen"
	"imlab/loadgen/schedule"
)

// LoadSpec is the load phase (loadgen). Its keys are of two sorts: the
// file's own (rate, group_sizes, segments, embedded_rate_scale), below,
// and the generator's settings that have a file key in loadgen.Settings
// (the one definition each shares with imlab load's flags: duration,
// users, send_timeout, mix, ...), which decode straight into Config. A key
// the file leaves out keeps its value in LoadDefaults (mix: none, the
// devices only send, pull and receive pushes).
type LoadSpec struct {
	// Rate is a loadgen rate shape: const:500, steps:..., burst:..., sine:....
	Rate string `yaml:"rate" json:"rate"`
	// GroupSizes ("3:50,20:50") is the size distribution of the groups
	// (default DefaultGroupSizes).
	GroupSizes string `yaml:"group_sizes,omitempty" json:"group_sizes,omitempty"`
	// Segments > 1 splits the load over that many generator processes on
	// this machine (loadgen execution segments, each an OS process with its
	// own GOMAXPROCS), judged together as one run.
	Segments int `yaml:"segments,omitempty" json:"segments,omitempty"`
	// EmbeddedRateScale multiplies every rate of Rate when the run's MySQL
	// is the embedded engine (default DefaultEmbeddedRateScale; 1 runs the
	// file's rate). The run says so wherever it reports (Result.RateScale).
	EmbeddedRateScale *float64 `yaml:"embedded_rate_scale,omitempty" json:"embedded_rate_scale,omitempty"`
	// Config holds the generator's settings: LoadDefaults with what the
	// file set. The run adds the target, the rate shape, the group sizes,
	// the directory and the probe fraction.
	Config loadgen.Config `yaml:"-" json:"-"`
}

// DefaultConns is the generator's HTTP pool in a scenario.
const DefaultConns = 64

// LoadDefaults is the generator's config a file's load section starts
// from: loadgen's defaults with a scenario's (no users, no groups, no
// mix, devices that come back every DefaultComeBackEvery, a pool of
// DefaultConns, no ceiling measured, a queue of DefaultMaxQueued for the
// queued mode).
func LoadDefaults() loadgen.Config {
	c := loadgen.DefaultConfig("", "", "")
	c.Duration, c.Pop.Users = 0, 0
	c.Pop.DevicesPerUser, c.Pop.Online, c.Pop.Crashy = DefaultDevices, DefaultOnline, DefaultCrashy
	c.Pop.Groups, c.Pop.GroupShare, c.Pop.GroupSizes = 0, 0, nil
	c.Pop.ComeBackEvery = DefaultComeBackEvery
	c.Settle, c.DrainTimeout = DefaultSettle, DefaultDrainTimeout
	c.PullLimit, c.Seed, c.Conns, c.CeilingFor = DefaultPullLimit, DefaultSeed, DefaultConns, 0
	c.Pacer.MaxQueued = DefaultMaxQueued
	return c
}

// loadOwn is LoadSpec's own keys, decoded and encoded as yaml and json do.
type loadOwn LoadSpec

// UnmarshalYAML decodes the generator's settings into Config over
// LoadDefaults, the rest into the file's own keys.
func (l *LoadSpec) UnmarshalYAML(n *yaml.Node) error {
	o := loadOwn{}
	c := LoadDefaults()
	if err := loadgen.Settings().DecodeYAML(n, &c, &o); err != nil {
		return err
	}
	o.Config = c
	*l = LoadSpec(o)
	l.clampWorkers()
	return nil
}

// clampWorkers starts the pacer with no more send goroutines than
// max_workers allows.
func (l *LoadSpec) clampWorkers() {
	l.Config.Pacer.Workers = min(l.Config.Pacer.Workers, l.Config.Pacer.MaxWorkers)
}

// MarshalJSON writes the file's own keys and every setting that differs
// from LoadDefaults, as the file writes them.
func (l LoadSpec) MarshalJSON() ([]byte, error) {
	def := LoadDefaults()
	o := loadOwn(l)
	return loadgen.Settings().EncodeJSON(&l.Config, &def, &o)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (l *LoadSpec) UnmarshalJSON(b []byte) error {
	o := loadOwn{}
	if err := loadgen.Settings().DecodeJSON(b, &o.Config, LoadDefaults(), &o); err != nil {
		return err
	}
	*l = LoadSpec(o)
	l.clampWorkers()
	return nil
}

// yamlKeys are the section's keys with the type each is written as.
func (LoadSpec) yamlKeys() map[string]reflect.Type {
	keys := yamlFields(reflect.TypeFor[loadOwn]())
	for k, t := range loadgen.Settings().KeyTypes() {
		keys[k] = t
	}
	return keys
}

func (l LoadSpec) validate() error {
	if _, err := schedule.Parse(l.Rate); err != nil {
		return Bad("load.rate", "%q: %v", l.Rate, err)
	}
	if e := l.EmbeddedRateScale; e != nil && !(*e > 0 && *e <= 1) {
		return Bad("load.embedded_rate_scale", "%g: want (0, 1]", *e)
	}
	if d := l.Config.Duration; d <= 0 || d > MaxLoadDuration {
		return Bad("load.duration", "%s: want (0, %s]", d, MaxLoadDuration)
	}
	return l.validateTemplate()
}

// validateTemplate checks what a load section says besides its rate and
// duration: the population and the transport (a capacity file's load is
// only that: the search sets each step's rate and length).
func (l LoadSpec) validateTemplate() error {
	c, def := l.Config, LoadDefaults()
	if err := c.Mix.Validate(); err != nil {
		return Bad("load", "%v", err)
	}
	if l.EmbeddedRateScale != nil && l.Rate == "" {
		return Bad("load.embedded_rate_scale", "kind capacity: the search's from and to are the rates")
	}
	if err := l.validatePopulation(); err != nil {
		return err
	}
	switch c.SendVia {
	case loadgen.ViaHTTP, loadgen.ViaWS:
	default:
		return Bad("load.send_via", "%q: want http or ws", c.SendVia)
	}
	if c.Settle < 0 || c.Settle > MaxSettle {
		return Bad("load.settle", "%s: want 0..%s", c.Settle, MaxSettle)
	}
	if c.DrainTimeout <= 0 || c.DrainTimeout > MaxDrainTimeout {
		return Bad("load.drain_timeout", "%s: want (0, %s]", c.DrainTimeout, MaxDrainTimeout)
	}
	if c.PullLimit < 1 || c.PullLimit > 500 {
		return Bad("load.pull_limit", "%d: want 1..500", c.PullLimit)
	}
	if l.Segments < 0 || l.Segments > MaxLoadSegments || l.Segments > c.Pop.Users {
		return Bad("load.segments", "%d: want 0..%d and at most load.users", l.Segments, MaxLoadSegments)
	}
	if c.Conns < 1 || c.Conns > MaxConns {
		return Bad("load.conns", "%d: want 1..%d", c.Conns, MaxConns)
	}
	if c.Pipeline < 0 || c.Pipeline > MaxPipeline || c.PipelineConns < 1 || c.PipelineConns > loadgen.MaxPipelineConns {
		return Bad("load.pipeline", "%d on %d connections: want 0..%d requests on 1..%d connections", c.Pipeline, c.PipelineConns, MaxPipeline, loadgen.MaxPipelineConns)
	}
	if c.PipelineConns != def.PipelineConns && c.Pipeline == 0 {
		return Bad("load.pipeline_conns", "%d without load.pipeline", c.PipelineConns)
	}
	return l.validatePacer()
}

// validatePopulation checks the users, their devices and the groups.
func (l LoadSpec) validatePopulation() error {
	p := l.Config.Pop
	if p.Users < 2 || p.Users > MaxUsers {
		return Bad("load.users", "%d: want 2..%d", p.Users, MaxUsers)
	}
	if p.DevicesPerUser < 1 || p.DevicesPerUser > loadgen.MaxDevicesPerUser {
		return Bad("load.devices", "%d: want 1..%d", p.DevicesPerUser, loadgen.MaxDevicesPerUser)
	}
	if p.Online < 0 || p.Online > 1 {
		return Bad("load.online", "%g: want 0..1", p.Online)
	}
	if p.Crashy < 0 || p.Crashy > 1 || p.Online+p.Crashy > 1 {
		return Bad("load.crashy", "%g: want 0..1 with online + crashy <= 1", p.Crashy)
	}
	if p.Groups < 0 || p.Groups > loadgen.MaxGroups {
		return Bad("load.groups", "%d: want 0..%d", p.Groups, loadgen.MaxGroups)
	}
	if p.GroupShare < 0 || p.GroupShare > 1 {
		return Bad("load.group_share", "%g: want 0..1", p.GroupShare)
	}
	if p.GroupShare > 0 && p.Groups == 0 {
		return Bad("load.group_share", "%g needs load.groups > 0", p.GroupShare)
	}
	if _, err := loadgen.ParseSizes(Or(l.GroupSizes, DefaultGroupSizes)); err != nil {
		return Bad("load.group_sizes", "%q: %v", l.GroupSizes, err)
	}
	if p.ComeBackEvery < 0 || p.ComeBackEvery > MaxLoadDuration {
		return Bad("load.come_back_every", "%s: want 0..%s", p.ComeBackEvery, MaxLoadDuration)
	}
	return nil
}

// validatePacer checks the pacer's settings, the send timeout and the
// retries.
func (l LoadSpec) validatePacer() error {
	c := l.Config
	pc := c.Pacer
	if pc.MaxWorkers < 1 || pc.MaxWorkers > MaxWorkers {
		return Bad("load.max_workers", "%d: want 1..%d", pc.MaxWorkers, MaxWorkers)
	}
	if pc.SpinWindow < 0 || pc.SpinWindow > MaxSpinWindow {
		return Bad("load.spin_window", "%s: want 0..%s", pc.SpinWindow, MaxSpinWindow)
	}
	if pc.Senders < 0 || pc.Senders > MaxSenders {
		return Bad("load.senders", "%d: want 0..%d", pc.Senders, MaxSenders)
	}
	if pc.MaxQueued < 1 || pc.MaxQueued > MaxQueuedSends || (pc.MaxQueued != DefaultMaxQueued && pc.Senders == 0) {
		return Bad("load.max_queued", "%d: want 1..%d, and only with load.senders", pc.MaxQueued, MaxQueuedSends)
	}
	if c.Timeout <= 0 || c.Timeout > MaxLatency {
		return Bad("load.send_timeout", "%s: want (0, %s]", c.Timeout, MaxLatency)
	}
	if c.Retries < 0 || c.Retries > MaxRetries {
		return Bad("load.retries", "%d: want 0..%d", c.Retries, MaxRetries)
	}
	return nil
}

// EmbeddedRateScaleOr is load.embedded_rate_scale or its default.
func (l LoadSpec) EmbeddedRateScaleOr() float64 {
	if l.EmbeddedRateScale != nil {
		return *l.EmbeddedRateScale
	}
	return DefaultEmbeddedRateScale
}
