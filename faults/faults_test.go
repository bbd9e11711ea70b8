package faults

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"imlab/scenario/yamltime"
)

// TestKindsTable: every kind once, found by its name, each parameter it
// names one a Spec has.
func TestKindsTable(t *testing.T) {
	seen := map[string]bool{}
	known := map[string]bool{"latency": true, "jitter": true, "timeout": true, "rate_kbps": true, "by": true, "toxicity": true, "stream": true}
	for _, k := range Kinds() {
		if seen[k.Name()] {
			t.Errorf("kind %s listed twice", k.Name())
		}
		seen[k.Name()] = true
		if got, ok := Lookup(k.Name()); !ok || got.Name() != k.Name() {
			t.Errorf("Lookup(%s) = %v, %v", k.Name(), got, ok)
		}
		for _, p := range k.Params() {
			if !known[p] {
				t.Errorf("kind %s names parameter %q, which no entry has", k.Name(), p)
			}
		}
	}
	if len(seen) != 11 {
		t.Errorf("%d kinds, want 11", len(seen))
	}
}

// TestUnit: the data faults that count say what they count (Kafka's
// record loss deletes consumed records too, so its count is not the
// messages lost); the others and unknown kinds say "affected".
func TestUnit(t *testing.T) {
	for kind, want := range map[string]string{
		"kafka_record_loss":    "records deleted, already consumed or not",
		"kafka_topic_recreate": "records dropped with the topic, already consumed or not",
		"redis_wipe":           "keys deleted",
		"allocator_rollback":   "seq counters set back",
		"down":                 "affected",
		"":                     "affected",
		"redis_flushall":       "affected",
	} {
		if got := Unit(kind); got != want {
			t.Errorf("%q: %q, want %q", kind, got, want)
		}
	}
}

// TestProxiedTargets: the toxic kinds and down need their target's proxy,
// each backend named once and sorted; the data and process kinds, and
// unknown kinds, need none.
func TestProxiedTargets(t *testing.T) {
	sched := []Spec{
		{Kind: "latency", Target: "redis"}, {Kind: "down", Target: "mysql"}, {Kind: "timeout", Target: "redis"},
		{Kind: "redis_wipe"}, {Kind: "kafka_record_loss"}, {Kind: "kill", Target: "consumer"},
		{Kind: "stop", Target: "api"}, {Kind: "allocator_rollback"}, {Kind: "kafka_topic_recreate"},
		{Kind: "bandwidth", Target: "kafka"}, {Kind: "reset_peer", Target: "mongo"}, {Kind: "nope", Target: "x"},
	}
	if got, want := ProxiedTargets(sched), []string{"kafka", "mongo", "mysql", "redis"}; !slices.Equal(got, want) {
		t.Errorf("ProxiedTargets: %v, want %v", got, want)
	}
	if got := ProxiedTargets(sched[3:9]); len(got) != 0 {
		t.Errorf("data and process kinds: %v, want none", got)
	}
	if got := ProxiedTargets(nil); len(got) != 0 {
		t.Errorf("no faults: %v, want none", got)
	}
}

// TestValidateOrder: the time checks first, then the target, then the
// parameters, then the values; each error names its key.
func TestValidateOrder(t *testing.T) {
	c := Context{LoadDuration: 10 * time.Second, Process: func(name string) (int, bool, bool) { return 0, name == "consumer", name != "nope" }}
	d := func(v time.Duration) yamltime.Duration { return yamltime.Duration(v) }
	for _, tc := range []struct {
		x    Spec
		want string
	}{
		{Spec{Kind: "latency", At: d(11 * time.Second)}, "f.at: "},
		{Spec{Kind: "nope", For: d(time.Second)}, `f.kind: "nope": want latency, timeout, reset_peer, bandwidth, down, redis_wipe, allocator_rollback, kafka_record_loss, kafka_topic_recreate, stop or kill`},
		{Spec{Kind: "latency", Target: "disk", RateKBps: 1, For: d(time.Second)}, "f.target: "},
		{Spec{Kind: "latency", Target: "mysql", RateKBps: 1, For: d(time.Second)}, "f.rate_kbps: not a parameter of kind latency"},
		{Spec{Kind: "latency", Target: "mysql", For: d(time.Second)}, "f.latency: "},
		{Spec{Kind: "kafka_record_loss"}, "f.kind: kafka_record_loss needs a policy that uses Kafka"},
		{Spec{Kind: "kill", Target: "api", For: d(time.Second)}, `f.target: "api" runs inside the runner`},
		{Spec{Kind: "stop", Target: "nope", For: d(time.Second)}, `f.target: "nope" is not a process`},
		{Spec{Kind: "stop", Target: "api"}, "f.for: a stop needs a positive duration"},
	} {
		err := Validate("f", tc.x, c)
		var inv *Invalid
		if !errors.As(err, &inv) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.x, err, tc.want)
		}
	}
	if err := Validate("f", Spec{Kind: "stop", Target: "api", For: d(time.Second)}, c); err != nil {
		t.Errorf("a good stop: %v", err)
	}
}
