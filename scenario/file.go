package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"imlab/faults"
	"imlab/loadgen"
	"imlab/loadgen/schedule"
	"imlab/scenario/yamltime"
)

// ErrInvalid is wrapped by every error about a scenario file or a runner
// configuration: nothing was started.
var ErrInvalid = errors.New("scenarios: invalid")

// Named limits of a scenario file.
const (
	// MaxFileSize bounds a scenario file.
	MaxFileSize = 1 << 20
	// MaxLoadDuration bounds load.duration.
	MaxLoadDuration = time.Hour
	// MaxSettle bounds load.settle.
	MaxSettle = 5 * time.Minute
	// MaxDrainTimeout bounds load.drain_timeout.
	MaxDrainTimeout = 30 * time.Minute
	// MaxScenarioDuration bounds a whole scenario: duration + settle +
	// drain timeout.
	MaxScenarioDuration = 90 * time.Minute
	// MaxFaults bounds the fault schedule.
	MaxFaults = 100
	// MaxProcesses bounds server.processes.
	MaxProcesses = 16
	// MaxUsers is loadgen's limit on the population.
	MaxUsers = loadgen.MaxUsers
	// MaxNameLen bounds names (scenario, process).
	MaxNameLen = 64
	// MaxDescriptionLen bounds the description.
	MaxDescriptionLen = 4096
	// MinKafkaPartitions and MaxKafkaPartitions bound
	// backends.kafka_partitions (the fan-out's own bounds: 16..256).
	MinKafkaPartitions = 16
	MaxKafkaPartitions = 256
	// MaxRollback bounds allocator_rollback.by.
	MaxRollback = faults.MaxRollback
	// MaxLatency bounds latency/jitter/timeout of a toxic (and
	// load.send_timeout).
	MaxLatency = faults.MaxLatency
	// MaxConns, MaxPipeline and MaxWorkers bound the generator's pool,
	// pipeline depth and send goroutines (load.conns, load.pipeline,
	// load.max_workers).
	MaxConns    = 4096
	MaxPipeline = 1024
	MaxWorkers  = 1_000_000
	// MaxSenders and MaxQueuedSends bound the queued mode's senders and
	// queue (load.senders, load.max_queued); DefaultMaxQueued is the
	// queue of a file that gives senders and no max_queued.
	MaxSenders       = schedule.MaxSenders
	MaxQueuedSends   = schedule.MaxQueued
	DefaultMaxQueued = 1_000_000
	// MaxSpinWindow bounds load.spin_window (the pacer's own bound).
	MaxSpinWindow = 50 * time.Millisecond
	// MaxRetries bounds load.retries.
	MaxRetries = 10
)

// Duration is a time.Duration written as a Go duration string in files
// and JSON ("10s").
type Duration = yamltime.Duration

// File is one scenario.
type File struct {
	// Name identifies the scenario (letters, digits, '-', '_', '.').
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Kind: run (default: one load run with faults) or capacity (a
	// capacity search against the topology the file starts, see
	// CapacitySpec).
	Kind     string        `yaml:"kind,omitempty" json:"kind,omitempty"`
	Capacity *CapacitySpec `yaml:"capacity,omitempty" json:"capacity,omitempty"`
	Backends BackendsSpec  `yaml:"backends,omitempty" json:"backends"`
	Server   ServerSpec    `yaml:"server,omitempty" json:"server"`
	Load     LoadSpec      `yaml:"load" json:"load"`
	Faults   []FaultSpec   `yaml:"faults,omitempty" json:"faults,omitempty"`
	Expect   ExpectSpec    `yaml:"expect" json:"expect"`
	// Baseline gates the run on a previous result (see BaselineSpec).
	Baseline *BaselineSpec `yaml:"baseline,omitempty" json:"baseline,omitempty"`
	// Matrix runs the file once per value of a parameter (see Expand).
	Matrix *MatrixSpec `yaml:"matrix,omitempty" json:"matrix,omitempty"`
	// Target is the server under test when it is not the reference server
	// (see TargetSpec).
	Target *TargetSpec `yaml:"target,omitempty" json:"target,omitempty"`
	// Variant names the matrix value a file expanded from a matrix runs
	// with ("consumers=2"; not part of the format).
	Variant string `yaml:"-" json:"variant,omitempty"`

	// Path is where the file was read from (not part of the format).
	Path string `yaml:"-" json:"path,omitempty"`
}

// MaxSkipReason bounds backends.skip_embedded.
const MaxSkipReason = 500

// Fault kinds (package faults owns each).
const (
	KindLatency            = "latency"
	KindTimeout            = "timeout"
	KindResetPeer          = "reset_peer"
	KindBandwidth          = "bandwidth"
	KindDown               = "down"
	KindRedisWipe          = "redis_wipe"
	KindAllocatorRollback  = "allocator_rollback"
	KindKafkaRecordLoss    = "kafka_record_loss"
	KindKafkaTopicRecreate = "kafka_topic_recreate"
	// KindStop stops a process gracefully and starts it again after for
	// (faults.Stop).
	KindStop = "stop"
	// KindKill sends SIGKILL to an exec process and starts a new one after
	// for (faults.Kill).
	KindKill = "kill"
)

// Proxy targets of the proxy fault kinds.
const (
	TargetMySQL = faults.TargetMySQL
	TargetRedis = faults.TargetRedis
	TargetKafka = faults.TargetKafka
	TargetMongo = faults.TargetMongo
)

// FaultSpec is one entry of the fault schedule (package faults checks and
// builds it by its kind).
type FaultSpec = faults.Spec

// Verdicts an expectation may ask for.
const (
	VerdictValid   = "valid"
	VerdictInvalid = "invalid"
)

// Defaults of omitted fields.
const (
	DefaultMode              = "auto"
	DefaultKafkaPartitions   = 16
	DefaultPolicy            = "strict"
	DefaultAllocator         = "redis"
	DefaultDedup             = "uk_uid_msg"
	DefaultPullRateLimit     = 10000
	DefaultReconcileInterval = time.Second
	DefaultReconcileGrace    = 30 * time.Minute
	DefaultDeliveryTimeout   = 2 * time.Second
	DefaultDevices           = 2
	DefaultOnline            = 0.6
	DefaultCrashy            = 0.1
	DefaultComeBackEvery     = 2 * time.Second
	DefaultSettle            = 2 * time.Second
	DefaultDrainTimeout      = 60 * time.Second
	DefaultPullLimit         = 200
	DefaultSeed              = 1
	DefaultGroupSizes        = "3:60,10:40"
	// DefaultEmbeddedRateScale is load.embedded_rate_scale's default: the
	// embedded MySQL (go-mysql-server's memory engine, one transaction at
	// a time) carries about a tenth of the shipped rates (RESULTS.md).
	DefaultEmbeddedRateScale = 0.1
	// DefaultProcessName is the one process of a file without processes.
	DefaultProcessName = "all"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ReadFile reads and validates one scenario file.
func ReadFile(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, path, err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, path, err)
	}
	f, err := Parse(path, b)
	if err != nil {
		return nil, err
	}
	if abs, err := filepath.Abs(path); err == nil {
		f.Path = abs
	}
	return f, nil
}

// Parse decodes (strictly: unknown fields are errors) and validates one
// file's content; name is used in error messages.
func Parse(name string, b []byte) (*File, error) {
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%w: %s: larger than %d bytes", ErrInvalid, name, MaxFileSize)
	}
	// The keys and kinds first, in the file's own words (checkKeys); the
	// strict decoder stays as a second guard.
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if err := checkKeys(&doc, reflect.TypeFor[File](), ""); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s: empty file", ErrInvalid, name)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s: more than one YAML document", ErrInvalid, name)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &f, nil
}

func Bad(field, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, a...))
}

// Validate checks every field of the file (defaults applied by the
// accessors are not required to be present).
func (f *File) Validate() error {
	if !nameRE.MatchString(f.Name) || len(f.Name) > MaxNameLen {
		return Bad("name", "%q: want 1..%d letters, digits, '.', '_' or '-'", f.Name, MaxNameLen)
	}
	if len(f.Description) > MaxDescriptionLen {
		return Bad("description", "longer than %d bytes", MaxDescriptionLen)
	}
	if err := f.Backends.validate(); err != nil {
		return err
	}
	if err := f.Server.Validate(); err != nil {
		return err
	}
	switch f.Kind {
	case "", KindRun:
		if f.Capacity != nil {
			return Bad("capacity", "a capacity block needs kind: capacity")
		}
		if f.Expect.MinSustainable != nil {
			return Bad("expect.min_sustainable", "a capacity expectation needs kind: capacity")
		}
		if err := f.Load.validate(); err != nil {
			return err
		}
	case KindCapacity:
		if err := f.Capacity.validate(f); err != nil {
			return err
		}
		if err := f.Load.validateTemplate(); err != nil {
			return err
		}
		if f.Matrix != nil {
			return Bad("matrix", "kind capacity runs one search: no matrix")
		}
	default:
		return Bad("kind", "%q: want run (default) or capacity", f.Kind)
	}
	if len(f.Faults) > MaxFaults {
		return Bad("faults", "%d faults: at most %d", len(f.Faults), MaxFaults)
	}
	procs := map[string]int{}
	for i, p := range f.Processes() {
		if _, dup := procs[p.Name]; dup {
			return Bad("server.processes", "%q used twice once the counts are expanded", p.Name)
		}
		procs[p.Name] = i
	}
	if err := f.Matrix.validate(f); err != nil {
		return err
	}
	for i := range f.Faults {
		if err := f.validateFault(fmt.Sprintf("faults[%d]", i), f.Faults[i], procs); err != nil {
			return err
		}
	}
	if err := f.Expect.validate(); err != nil {
		return err
	}
	if err := f.Expect.DeadLetters.validate(f); err != nil {
		return err
	}
	if err := f.Target.validate(f); err != nil {
		return err
	}
	if err := f.Expect.validateFindings(); err != nil {
		return err
	}
	if err := f.Baseline.validate(); err != nil {
		return err
	}
	if !f.UsesKafka() {
		for name, set := range map[string]bool{"max_lag_age": f.Expect.MaxLagAge != nil, "max_recovery": f.Expect.MaxRecovery != nil,
			"min_drain_rate": f.Expect.MinDrainRate != nil, "lag_recovered": f.Expect.LagRecovered != nil && *f.Expect.LagRecovered} {
			if set {
				return Bad("expect."+name, "there is no consumer lag without Kafka: the strict policy without history does not use it")
			}
		}
	}
	if total := f.Load.Config.Duration + f.Load.Config.Settle + f.Load.Config.DrainTimeout; f.Kind != KindCapacity && total > MaxScenarioDuration {
		return Bad("load", "duration + settle + drain_timeout = %s: at most %s", total, MaxScenarioDuration)
	}
	return nil
}

func Or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// UsesKafka tells whether the server uses Kafka (a fan-out policy, or the
// history tier).
func (f *File) UsesKafka() bool { return f.Server.PolicyOr() != "strict" || f.Server.History }

// Processes are the file's processes, each count expanded (NAME-1 ..
// NAME-N), or the default one.
func (f *File) Processes() []ProcessSpec {
	if len(f.Server.Processes) == 0 {
		return []ProcessSpec{{Name: DefaultProcessName, Roles: []string{"all"}}}
	}
	var out []ProcessSpec
	for _, p := range f.Server.Processes {
		if p.Count <= 1 {
			p.Count = 0
			out = append(out, p)
			continue
		}
		n := p.Count
		for i := 1; i <= n; i++ {
			q := p
			q.Count = 0
			q.Name = fmt.Sprintf("%s-%d", p.Name, i)
			out = append(out, q)
		}
	}
	return out
}

// validateFault checks one fault entry with its kind's checks; procs
// maps each process name to its index in server.processes.
func (f *File) validateFault(field string, x FaultSpec, procs map[string]int) error {
	if f.Target.External() {
		return f.validateExternalFault(field, x)
	}
	c := faults.Context{LoadDuration: f.Load.Config.Duration, History: f.Server.History, UsesKafka: f.UsesKafka(),
		SegmentAllocator: f.Server.Allocator == "segment",
		Process: func(name string) (int, bool, bool) {
			i, ok := procs[name]
			if !ok {
				return 0, false, false
			}
			return i, f.Processes()[i].Exec, true
		}}
	var inv *faults.Invalid
	if err := faults.Validate(field, x, c); errors.As(err, &inv) {
		return Bad(inv.Field, "%s", inv.Msg)
	} else if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}
