package faults

import (
	"strings"
	"time"

	"imlab/scenario/yamltime"
)

// Spec is one entry of a scenario's fault schedule (its YAML and JSON
// keys are the file's).
type Spec struct {
	// At is the offset from the load's start; For how long the fault
	// lasts before it is healed (stop, kill: how long the process stays
	// down).
	At  yamltime.Duration `yaml:"at" json:"at"`
	For yamltime.Duration `yaml:"for,omitempty" json:"for,omitempty"`
	// Kind: latency, timeout, reset_peer, bandwidth, down (Target: mysql,
	// redis, kafka or mongo), redis_wipe, allocator_rollback,
	// kafka_record_loss, kafka_topic_recreate, stop (Target: a process
	// name), kill (Target: the name of a process with exec: true).
	Kind   string `yaml:"kind" json:"kind"`
	Target string `yaml:"target,omitempty" json:"target,omitempty"`
	// Stream: downstream, upstream or "" (both) for the toxics.
	Stream string `yaml:"stream,omitempty" json:"stream,omitempty"`
	// Latency and Jitter (latency), Timeout (timeout: 0 holds the data
	// until healed; reset_peer: wait before the reset).
	Latency yamltime.Duration `yaml:"latency,omitempty" json:"latency,omitempty"`
	Jitter  yamltime.Duration `yaml:"jitter,omitempty" json:"jitter,omitempty"`
	Timeout yamltime.Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// RateKBps (bandwidth).
	RateKBps int64 `yaml:"rate_kbps,omitempty" json:"rate_kbps,omitempty"`
	// Toxicity is the share of connections affected (default 1).
	Toxicity *float64 `yaml:"toxicity,omitempty" json:"toxicity,omitempty"`
	// By (allocator_rollback): how far every seq counter is set back
	// (0 or less: the counters are deleted).
	By int64 `yaml:"by,omitempty" json:"by,omitempty"`
	// MayMiss lets the fault fail to inject or affect nothing (0 keys,
	// counters or records changed, for the data faults that count) without
	// failing the scenario. Default false: a fault that did not reach its
	// target proves nothing, so the faults_reached check fails.
	MayMiss bool `yaml:"may_miss,omitempty" json:"may_miss,omitempty"`
}

// Label names the fault in events and markers: "kind target".
func (x Spec) Label() string {
	return strings.TrimSpace(x.Kind + " " + x.Target)
}

// Limits of a fault's parameters.
const (
	// MaxRollback bounds allocator_rollback.by.
	MaxRollback = 1 << 40
	// MaxLatency bounds latency/jitter/timeout of a toxic.
	MaxLatency = time.Minute
)

// setParams are the optional parameters x sets, in the file's order.
func setParams(x Spec) []string {
	var out []string
	for _, p := range []struct {
		name string
		set  bool
	}{{"latency", x.Latency != 0}, {"jitter", x.Jitter != 0}, {"timeout", x.Timeout != 0}, {"rate_kbps", x.RateKBps != 0},
		{"by", x.By != 0}, {"toxicity", x.Toxicity != nil}, {"stream", x.Stream != ""}} {
		if p.set {
			out = append(out, p.name)
		}
	}
	return out
}
