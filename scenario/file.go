package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"imlab/faults"
	"imlab/scenario/yamltime"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"imlab/loadgen"
	"imlab/loadgen/schedule"
	"imlab/ref/server"
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

// BackendsSpec says where MySQL and Redis come from (compose modes).
// Kafka always runs in-process (see the package doc); MongoDB only with
// server.history.
type BackendsSpec struct {
	// Mode: auto (default), external, local or embedded; the command line
	// overrides it.
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
	// KafkaPartitions of the fan-out topic (default 16).
	KafkaPartitions int `yaml:"kafka_partitions,omitempty" json:"kafka_partitions,omitempty"`
	// SkipEmbedded, when set, says why the file is not run where the run's
	// MySQL is the embedded engine (--backends embedded, or auto without a
	// mariadbd): the run then starts no server and no load, and its result
	// passes, marked skipped with this reason (Result.Skipped).
	SkipEmbedded string `yaml:"skip_embedded,omitempty" json:"skip_embedded,omitempty"`
}

// MaxSkipReason bounds backends.skip_embedded.
const MaxSkipReason = 500

// ServerSpec configures the reference server processes.
type ServerSpec struct {
	// Policy: strict (default), store, outbox or queue (unsafe: the
	// negative control).
	Policy string `yaml:"policy,omitempty" json:"policy,omitempty"`
	// Allocator: redis (default) or segment.
	Allocator string `yaml:"allocator,omitempty" json:"allocator,omitempty"`
	// Dedup: the consumers' strategy, uk_uid_msg (default), mq_dedup or redis.
	Dedup string `yaml:"dedup,omitempty" json:"dedup,omitempty"`
	// History turns on the MongoDB history (in-process FerretDB: slow).
	History bool `yaml:"history,omitempty" json:"history,omitempty"`
	// UnreadThreshold: past this many unread a pull is truncated (default
	// the server's, 100000).
	UnreadThreshold uint64 `yaml:"unread_threshold,omitempty" json:"unread_threshold,omitempty"`
	// TruncatedLatest: how many newest messages a truncated answer holds
	// (default the server's, 500).
	TruncatedLatest int `yaml:"truncated_latest,omitempty" json:"truncated_latest,omitempty"`
	// PullRateLimit: pulls per second per uid (default 10000: the lab's
	// devices pull far more often than real ones).
	PullRateLimit float64 `yaml:"pull_rate_limit,omitempty" json:"pull_rate_limit,omitempty"`
	// ReconcileInterval and ReconcileGrace: the reconciler role's forward
	// reconciliation timer and the age below which it leaves messages to
	// the consumers (defaults 1s and 30m). The default grace is late on
	// purpose: no message of a run is repaired before the checker judged
	// it, so reconciliation cannot hide a loss of the pipeline. A scenario
	// about repair sets a short grace (e.g. 1s) and asserts min_repairs;
	// its repairs are reported beside the verdict. (The server's own
	// defaults are 1m and 30s.)
	ReconcileInterval Duration `yaml:"reconcile_interval,omitempty" json:"reconcile_interval,omitempty"`
	ReconcileGrace    Duration `yaml:"reconcile_grace,omitempty" json:"reconcile_grace,omitempty"`
	// DeliveryTimeout bounds a Kafka publish (default 2s).
	DeliveryTimeout Duration `yaml:"delivery_timeout,omitempty" json:"delivery_timeout,omitempty"`
	// LabRetention (LAB ONLY) runs the reconciler's retention with ages
	// and a pass interval in seconds, so that early deletion and the
	// retention window both act during the run. Absent: the server's
	// defaults (30 days, 1 day, every 10m), under which retention deletes
	// nothing of a run.
	LabRetention *LabRetentionSpec `yaml:"lab_retention,omitempty" json:"lab_retention,omitempty"`
	// LabTransientWindow (LAB ONLY) lowers the consumers' transient window
	// (how long a delivery failing with a transient error is retried before
	// it is dead-lettered; the server's default 10s, its floor outside the
	// lab 5s) down to 500ms, so that a backend outage longer than it fits
	// in a scenario and records reach the dead-letter topic. 0: the
	// server's default.
	LabTransientWindow Duration `yaml:"lab_transient_window,omitempty" json:"lab_transient_window,omitempty"`
	// Processes run the roles as separate server processes that stop and
	// kill faults can take down and start again; default one in-process
	// process "all" with every role.
	Processes []ProcessSpec `yaml:"processes,omitempty" json:"processes,omitempty"`
}

// LabRetentionSpec is server.lab_retention: the retention window
// (max_age: rows older go whatever the cursors say, 1s..), the grace after
// which a row every device of its uid pulled may go early (pulled_min_age,
// 0..max_age) and the pass interval (interval, 100ms..). The server refuses
// such ages without its lab-only switch, which this block turns on.
type LabRetentionSpec struct {
	MaxAge       Duration `yaml:"max_age" json:"max_age"`
	PulledMinAge Duration `yaml:"pulled_min_age" json:"pulled_min_age"`
	Interval     Duration `yaml:"interval" json:"interval"`
}

// ProcessSpec is one server process.
type ProcessSpec struct {
	Name  string   `yaml:"name" json:"name"`
	Roles []string `yaml:"roles" json:"roles"`
	// Exec runs the process as a separate OS process (the runner's child
	// command, see Config.ChildCommand and ChildMain) instead of inside
	// the runner: only such a process can be the target of a kill fault
	// (SIGKILL). Default false: in-process.
	Exec bool `yaml:"exec,omitempty" json:"exec,omitempty"`
	// Count runs that many identical processes, named NAME-1..NAME-N
	// (default 1: one process named NAME). A fault targets one of them by
	// its expanded name.
	Count int `yaml:"count,omitempty" json:"count,omitempty"`
}

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

// ExpectSpec are the pass/fail thresholds. A nil pointer is not checked.
type ExpectSpec struct {
	// Verdict: valid (default) or invalid (a negative control).
	Verdict string `yaml:"verdict,omitempty" json:"verdict,omitempty"`
	// Maxima of the checker's findings (distinct messages).
	MaxLost       *uint64 `yaml:"max_lost,omitempty" json:"max_lost,omitempty"`
	MaxSkipped    *uint64 `yaml:"max_skipped,omitempty" json:"max_skipped,omitempty"`
	MaxUnexpected *uint64 `yaml:"max_unexpected,omitempty" json:"max_unexpected,omitempty"`
	MaxReordered  *uint64 `yaml:"max_reordered,omitempty" json:"max_reordered,omitempty"`
	MaxDuplicated *uint64 `yaml:"max_duplicated,omitempty" json:"max_duplicated,omitempty"`
	// MinLost: a negative control must catch at least this many losses.
	MinLost *uint64 `yaml:"min_lost,omitempty" json:"min_lost,omitempty"`
	// MinSustainable (kind capacity only): the search must find at least
	// this sustainable rate (sends/s, held twice within the SLO).
	MinSustainable *float64 `yaml:"min_sustainable,omitempty" json:"min_sustainable,omitempty"`
	// MaxAckP99 bounds the p99 of the send response time (ACK latency
	// from the intended send time, coordinated-omission free).
	MaxAckP99 *Duration `yaml:"max_ack_p99,omitempty" json:"max_ack_p99,omitempty"`
	// MinRateRatio: achieved sends/s over the shape's mean rate.
	MinRateRatio *float64 `yaml:"min_rate_ratio,omitempty" json:"min_rate_ratio,omitempty"`
	// MaxLagAge bounds the consumer lag age (oldest unprocessed message,
	// any group and partition) seen by the lag poller.
	MaxLagAge *Duration `yaml:"max_lag_age,omitempty" json:"max_lag_age,omitempty"`
	// MaxSendFailRatio bounds (fail + unknown) / attempts.
	MaxSendFailRatio *float64 `yaml:"max_send_fail_ratio,omitempty" json:"max_send_fail_ratio,omitempty"`
	// MinTruncatedPulls: the truncated answer (past the unread threshold)
	// was served at least this often (from the servers' metrics).
	MinTruncatedPulls *uint64 `yaml:"min_truncated_pulls,omitempty" json:"min_truncated_pulls,omitempty"`
	// MaxRepairs and MinRepairs bound the inbox rows forward
	// reconciliation repaired during the run (rows the pipeline lost, read
	// from the servers' GET /v1/lab/repairs). A scenario about repair
	// asserts min_repairs; any other can assert max_repairs: 0.
	MaxRepairs *uint64 `yaml:"max_repairs,omitempty" json:"max_repairs,omitempty"`
	MinRepairs *uint64 `yaml:"min_repairs,omitempty" json:"min_repairs,omitempty"`
	// DeadLetters bounds and audits the dead-letter topic at the end of the
	// run (see DeadLettersSpec).
	DeadLetters *DeadLettersSpec `yaml:"dead_letters,omitempty" json:"dead_letters,omitempty"`
	// DrainComplete (default true): every device reached the end of its
	// inbox in the final drain.
	DrainComplete *bool `yaml:"drain_complete,omitempty" json:"drain_complete,omitempty"`
	// RecoveryBound (default 1s) is the lag age under which a consumer
	// group counts as caught up, RecoveryHold (default 2s) how long it must
	// stay there (see package recovery for the rule).
	RecoveryBound *Duration `yaml:"recovery_bound,omitempty" json:"recovery_bound,omitempty"`
	RecoveryHold  *Duration `yaml:"recovery_hold,omitempty" json:"recovery_hold,omitempty"`
	// LagRecovered (default true for a file that uses Kafka): every group's
	// lag age was back under the bound, and stayed there, within the drain
	// timeout after the end of the burst or the heal of the last fault.
	LagRecovered *bool `yaml:"lag_recovered,omitempty" json:"lag_recovered,omitempty"`
	// MaxRecovery bounds the recovery time (from the end of the burst or
	// the heal of the last fault until every group is back under the
	// bound for good).
	MaxRecovery *Duration `yaml:"max_recovery,omitempty" json:"max_recovery,omitempty"`
	// MinDrainRate: the slowest group's mean drain rate during recovery,
	// records/s.
	MinDrainRate *float64 `yaml:"min_drain_rate,omitempty" json:"min_drain_rate,omitempty"`
	// MinOfferedRatio (default 0.95) and MaxStartDelay (default 100ms):
	// for a burst shape, generator_kept_up checks that the generator
	// started that share of the sends it intended around the burst and
	// that their start delay p99 stayed under the bound (else the run
	// says the generator fell behind, and fails).
	MinOfferedRatio *float64  `yaml:"min_offered_ratio,omitempty" json:"min_offered_ratio,omitempty"`
	MaxStartDelay   *Duration `yaml:"max_start_delay,omitempty" json:"max_start_delay,omitempty"`
	// Findings the checker must make, each naming at least one message
	// or conversation (a negative control against a server with a known
	// defect; needs verdict: invalid).
	Findings []string `yaml:"findings,omitempty" json:"findings,omitempty"`
}

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

// knownRole tells whether r names a role of ref/server's registry
// (server.DefaultRoles) or "all", so that a bad file fails before anything
// starts.
func knownRole(r string) bool {
	return r == server.RoleAll || slices.Contains(server.DefaultRoles().Names(), r)
}

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
	if total := f.Load.Duration.D() + f.Load.SettleOr() + f.Load.DrainTimeoutOr(); f.Kind != KindCapacity && total > MaxScenarioDuration {
		return Bad("load", "duration + settle + drain_timeout = %s: at most %s", total, MaxScenarioDuration)
	}
	return nil
}

func (b BackendsSpec) validate() error {
	switch b.Mode {
	case "", "auto", "external", "local", "embedded":
	default:
		return Bad("backends.mode", "%q: want auto, external, local or embedded", b.Mode)
	}
	if b.KafkaPartitions != 0 && (b.KafkaPartitions < MinKafkaPartitions || b.KafkaPartitions > MaxKafkaPartitions) {
		return Bad("backends.kafka_partitions", "%d: want %d..%d", b.KafkaPartitions, MinKafkaPartitions, MaxKafkaPartitions)
	}
	if len(b.SkipEmbedded) > MaxSkipReason {
		return Bad("backends.skip_embedded", "%d characters: at most %d", len(b.SkipEmbedded), MaxSkipReason)
	}
	if b.SkipEmbedded != "" && b.Mode == "embedded" {
		return Bad("backends.skip_embedded", "the file's own mode is embedded: it would never run")
	}
	return nil
}

// ModeOr is the mode, default auto.
func (b BackendsSpec) ModeOr() string { return Or(b.Mode, DefaultMode) }

// PartitionsOr is the partition count, default 16.
func (b BackendsSpec) PartitionsOr() int {
	if b.KafkaPartitions == 0 {
		return DefaultKafkaPartitions
	}
	return b.KafkaPartitions
}

func Or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (s ServerSpec) Validate() error {
	switch s.Policy {
	case "", "strict", "store", "outbox", "queue":
	default:
		return Bad("server.policy", "%q: want strict, store, outbox or queue", s.Policy)
	}
	switch s.Allocator {
	case "", "redis", "segment":
	default:
		return Bad("server.allocator", "%q: want redis or segment", s.Allocator)
	}
	switch s.Dedup {
	case "", "uk_uid_msg", "mq_dedup", "redis":
	default:
		return Bad("server.dedup", "%q: want uk_uid_msg, mq_dedup or redis", s.Dedup)
	}
	if s.TruncatedLatest < 0 || s.TruncatedLatest > 10000 {
		return Bad("server.truncated_latest", "%d: want 1..10000", s.TruncatedLatest)
	}
	if s.PullRateLimit < 0 || s.PullRateLimit > 1e6 {
		return Bad("server.pull_rate_limit", "%g: want (0, 1e6]", s.PullRateLimit)
	}
	if s.ReconcileInterval != 0 && (s.ReconcileInterval.D() < time.Second || s.ReconcileInterval.D() > time.Hour) {
		return Bad("server.reconcile_interval", "%s: want 1s..1h", s.ReconcileInterval.D())
	}
	if s.ReconcileGrace.D() < 0 || s.ReconcileGrace.D() > time.Hour {
		return Bad("server.reconcile_grace", "%s: want 0..1h", s.ReconcileGrace.D())
	}
	if s.DeliveryTimeout.D() < 0 || s.DeliveryTimeout.D() > time.Minute {
		return Bad("server.delivery_timeout", "%s: want 0..1m", s.DeliveryTimeout.D())
	}
	if w := s.LabTransientWindow; w != 0 {
		cfg := server.DefaultConfig()
		if err := server.LabTransientWindow(&cfg, w.D()); err != nil {
			return Bad("server.lab_transient_window", "%v", err)
		}
	}
	if r := s.LabRetention; r != nil {
		cfg := server.DefaultConfig()
		if err := server.LabRetention(&cfg, r.MaxAge.D(), r.PulledMinAge.D(), r.Interval.D()); err != nil {
			return Bad("server.lab_retention", "%v", err)
		}
	}
	if len(s.Processes) > MaxProcesses {
		return Bad("server.processes", "%d processes: at most %d", len(s.Processes), MaxProcesses)
	}
	seen := map[string]bool{}
	api := false
	for i, p := range s.Processes {
		field := fmt.Sprintf("server.processes[%d]", i)
		if err := p.Validate(field, s.History); err != nil {
			return err
		}
		if seen[p.Name] {
			return Bad(field+".name", "%q used twice", p.Name)
		}
		seen[p.Name] = true
		api = api || p.RunsAPI()
	}
	if len(s.Processes) > 0 && !api {
		return Bad("server.processes", "no process runs the api role")
	}
	total := 0
	for i, p := range s.Processes {
		if p.Count < 0 || p.Count > MaxProcesses {
			return Bad(fmt.Sprintf("server.processes[%d].count", i), "%d: want 1..%d", p.Count, MaxProcesses)
		}
		if p.Count > 1 && p.RunsAPI() {
			return Bad(fmt.Sprintf("server.processes[%d].count", i), "%d copies of a process that runs the api: only the first would serve the load", p.Count)
		}
		total += max(1, p.Count)
	}
	if total > MaxProcesses {
		return Bad("server.processes", "%d processes with their counts: at most %d", total, MaxProcesses)
	}
	return nil
}

// validate checks one process's name and roles (history: server.history).
func (p ProcessSpec) Validate(field string, history bool) error {
	if !nameRE.MatchString(p.Name) || len(p.Name) > MaxNameLen {
		return Bad(field+".name", "%q: want 1..%d letters, digits, '.', '_' or '-'", p.Name, MaxNameLen)
	}
	if len(p.Roles) == 0 {
		return Bad(field+".roles", "at least one role")
	}
	for _, r := range p.Roles {
		if !knownRole(r) {
			return Bad(field+".roles", "unknown role %q: want one of %s or %s", r, strings.Join(server.DefaultRoles().Names(), ", "), server.RoleAll)
		}
		if r == "history" && !history {
			return Bad(field+".roles", "role history needs server.history: true")
		}
	}
	return nil
}

// runsAPI tells whether the process runs the api role.
func (p ProcessSpec) RunsAPI() bool {
	for _, r := range p.Roles {
		if r == "api" || r == "all" {
			return true
		}
	}
	return false
}

// PolicyOr is the policy, default strict.
func (s ServerSpec) PolicyOr() string { return Or(s.Policy, DefaultPolicy) }

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

// validateFault checks one fault entry with its kind's checks; procs
// maps each process name to its index in server.processes.
func (f *File) validateFault(field string, x FaultSpec, procs map[string]int) error {
	if f.Target.External() {
		return f.validateExternalFault(field, x)
	}
	c := faults.Context{LoadDuration: f.Load.Duration.D(), History: f.Server.History, UsesKafka: f.UsesKafka(),
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

func (e ExpectSpec) validate() error {
	switch e.Verdict {
	case "", VerdictValid, VerdictInvalid:
	default:
		return Bad("expect.verdict", "%q: want valid or invalid", e.Verdict)
	}
	if e.MaxAckP99 != nil && e.MaxAckP99.D() <= 0 {
		return Bad("expect.max_ack_p99", "%s: want > 0", e.MaxAckP99.D())
	}
	if e.MaxLagAge != nil && e.MaxLagAge.D() <= 0 {
		return Bad("expect.max_lag_age", "%s: want > 0", e.MaxLagAge.D())
	}
	if e.RecoveryBound != nil && (e.RecoveryBound.D() <= 0 || e.RecoveryBound.D() > MaxLatency) {
		return Bad("expect.recovery_bound", "%s: want (0, %s]", e.RecoveryBound.D(), MaxLatency)
	}
	if e.RecoveryHold != nil && (e.RecoveryHold.D() < 0 || e.RecoveryHold.D() > MaxLatency) {
		return Bad("expect.recovery_hold", "%s: want 0..%s", e.RecoveryHold.D(), MaxLatency)
	}
	if e.MaxRecovery != nil && e.MaxRecovery.D() <= 0 {
		return Bad("expect.max_recovery", "%s: want > 0", e.MaxRecovery.D())
	}
	if e.MinDrainRate != nil && !(*e.MinDrainRate > 0 && *e.MinDrainRate <= 1e9) {
		return Bad("expect.min_drain_rate", "%g: want (0, 1e9] records/s", *e.MinDrainRate)
	}
	if e.MinOfferedRatio != nil && (*e.MinOfferedRatio <= 0 || *e.MinOfferedRatio > 1) {
		return Bad("expect.min_offered_ratio", "%g: want (0, 1]", *e.MinOfferedRatio)
	}
	if e.MaxStartDelay != nil && (e.MaxStartDelay.D() <= 0 || e.MaxStartDelay.D() > MaxLatency) {
		return Bad("expect.max_start_delay", "%s: want (0, %s]", e.MaxStartDelay.D(), MaxLatency)
	}
	if e.LagRecovered != nil && !*e.LagRecovered && (e.MaxRecovery != nil || e.MinDrainRate != nil) {
		return Bad("expect.lag_recovered", "false, but max_recovery or min_drain_rate asks for a recovery")
	}
	if e.MinRateRatio != nil && (*e.MinRateRatio <= 0 || *e.MinRateRatio > 1) {
		return Bad("expect.min_rate_ratio", "%g: want (0, 1]", *e.MinRateRatio)
	}
	if e.MaxSendFailRatio != nil && (*e.MaxSendFailRatio < 0 || *e.MaxSendFailRatio > 1) {
		return Bad("expect.max_send_fail_ratio", "%g: want 0..1", *e.MaxSendFailRatio)
	}
	if e.MinLost != nil && *e.MinLost > 0 && e.MaxLost != nil && *e.MaxLost < *e.MinLost {
		return Bad("expect.min_lost", "%d is above expect.max_lost %d", *e.MinLost, *e.MaxLost)
	}
	if e.VerdictOr() == VerdictValid && e.MinLost != nil && *e.MinLost > 0 {
		return Bad("expect.min_lost", "a loss makes the verdict invalid: set expect.verdict: invalid")
	}
	return nil
}

// RecoveryBoundOr is the recovery bound, default 1s.
func (e ExpectSpec) RecoveryBoundOr() time.Duration {
	if e.RecoveryBound == nil {
		return DefaultRecoveryBound
	}
	return e.RecoveryBound.D()
}

// RecoveryHoldOr is the recovery hold, default 2s.
func (e ExpectSpec) RecoveryHoldOr() time.Duration {
	if e.RecoveryHold == nil {
		return DefaultRecoveryHold
	}
	return e.RecoveryHold.D()
}

// MinOfferedRatioOr is the generator's minimum started/intended ratio
// around a burst, default 0.95.
func (e ExpectSpec) MinOfferedRatioOr() float64 {
	if e.MinOfferedRatio == nil {
		return DefaultMinOfferedRatio
	}
	return *e.MinOfferedRatio
}

// MaxStartDelayOr bounds the burst's start delay p99, default 100ms.
func (e ExpectSpec) MaxStartDelayOr() time.Duration {
	if e.MaxStartDelay == nil {
		return DefaultMaxStartDelay
	}
	return e.MaxStartDelay.D()
}

// VerdictOr is the expected verdict, default valid.
func (e ExpectSpec) VerdictOr() string { return Or(e.Verdict, VerdictValid) }
