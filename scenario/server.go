package scenario

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"imlab/ref/server"
)

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

// knownRole tells whether r names a role of ref/server's registry
// (server.DefaultRoles) or "all", so that a bad file fails before anything
// starts.
func knownRole(r string) bool {
	return r == server.RoleAll || slices.Contains(server.DefaultRoles().Names(), r)
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
