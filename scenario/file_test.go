package scenario

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// goodFile is twoProcs with two faults (a kill, a latency) and an expect
// section.
var goodFile = twoProcs(`  - at: 1s
    for: 1s
    kind: kill
    target: consumer
  - at: 1s
    for: 1s
    kind: latency
    target: redis
    latency: 10ms
expect:
  verdict: valid
  max_lost: 0
`)

func TestParseGood(t *testing.T) {
	f, err := Parse("good.yaml", []byte(goodFile))
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "t" || f.Load.Config.Duration != 4*time.Second || len(f.Faults) != 2 || f.Faults[1].Latency.D() != 10*time.Millisecond {
		t.Fatalf("parsed %+v", f)
	}
	if *f.Expect.MaxLost != 0 || f.Expect.VerdictOr() != VerdictValid || f.Server.PolicyOr() != "store" {
		t.Fatalf("expect %+v", f.Expect)
	}
	if f.Load.Config.Pop.Online != DefaultOnline || f.Load.Config.Settle != DefaultSettle {
		t.Fatal("defaults not applied")
	}
	if ps := f.Processes(); ps[0].Exec || !ps[1].Exec {
		t.Fatalf("exec not parsed: %+v", ps)
	}
}

// twoProcs is a file (store policy) with an in-process api and an exec
// consumer, and faults (YAML list entries, and any sections after them)
// in its schedule.
func twoProcs(faults string) string {
	return `
name: t
server:
  policy: store
  processes:
    - name: api
      roles: [api, relay, reconciler]
    - name: consumer
      roles: [consumer]
      exec: true
load:
  rate: const:100
  duration: 4s
  users: 10
faults:
` + faults
}

// TestParseStopKill: stop takes down either kind of process, kill only an
// exec one; a kill of an in-process process is refused naming the field
// to set.
func TestParseStopKill(t *testing.T) {
	for _, c := range []struct{ name, fault, want string }{
		{"stop in process", "  - {at: 1s, for: 1s, kind: stop, target: api}\n", ""},
		{"stop exec", "  - {at: 1s, for: 1s, kind: stop, target: consumer}\n", ""},
		{"kill exec", "  - {at: 1s, for: 1s, kind: kill, target: consumer}\n", ""},
		{"kill in process", "  - {at: 1s, for: 1s, kind: kill, target: api}\n", "faults[0].target: \"api\" runs inside the runner: a kill is a SIGKILL of a separate OS process, so it needs server.processes[0].exec: true"},
		{"kill unknown", "  - {at: 1s, for: 1s, kind: kill, target: ghost}\n", "faults[0].target: \"ghost\" is not a process"},
		{"stop unknown", "  - {at: 1s, for: 1s, kind: stop, target: ghost}\n", "faults[0].target: \"ghost\" is not a process"},
		{"stop no for", "  - {at: 1s, kind: stop, target: api}\n", "faults[0].for: a stop needs a positive duration"},
		{"kill no for", "  - {at: 1s, kind: kill, target: consumer}\n", "faults[0].for: a kill needs a positive duration"},
		{"kill param", "  - {at: 1s, for: 1s, kind: kill, target: consumer, latency: 1s}\n", "faults[0].latency: not a parameter"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse("procs.yaml", []byte(twoProcs(c.fault)))
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(f.Faults) != 1 {
					t.Fatalf("faults %+v", f.Faults)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v: want ErrInvalid with %q", err, c.want)
			}
		})
	}
	// The default process (no server.processes) runs in the runner: no kill.
	body := "name: t\nload:\n  rate: const:1\n  duration: 4s\n  users: 3\nfaults:\n  - {at: 1s, for: 1s, kind: kill, target: all}\n"
	if _, err := Parse("default.yaml", []byte(body)); err == nil || !strings.Contains(err.Error(), "exec: true") {
		t.Fatalf("kill of the default process: %v", err)
	}
	body = strings.Replace(body, "kind: kill", "kind: stop", 1)
	if _, err := Parse("default.yaml", []byte(body)); err != nil {
		t.Fatalf("stop of the default process: %v", err)
	}
}

// TestParseBad: each bad file is refused with an error naming the file
// and the field.
func TestParseBad(t *testing.T) {
	base := func(load, rest string) string {
		if load == "" {
			load = "  rate: const:100\n  duration: 4s\n  users: 10\n"
		}
		return "name: t\nload:\n" + load + rest
	}
	cases := []struct {
		name, body, want string
	}{
		{"empty", "", "empty file"},
		{"unknown top field", base("", "colour: blue\n"), `line 6: unknown key "colour" in the file's top level (valid keys: backends, baseline,`},
		{"unknown load field", base("  rate: const:1\n  duration: 1s\n  users: 3\n  speed: 4\n", ""), `line 6: unknown key "speed" in load; did you mean "seed"?`},
		{"load key typo", base("  rate: const:1\n  duraton: 1s\n  users: 3\n", ""), `line 4: unknown key "duraton" in load; did you mean "duration"?`},
		{"expect key typo", base("", "expect:\n  max_lsot: 0\n"), `line 7: unknown key "max_lsot" in expect; did you mean "max_lost"?`},
		{"fault key typo", base("", "faults:\n  - at: 1s\n    for: 1s\n    kind: down\n    taget: mysql\n"), `line 10: unknown key "taget" in faults[0]; did you mean "target"?`},
		{"wrong kind", base("  rate: const:1\n  duration: 1s\n  users: many\n", ""), `line 5: load.users: want a whole number, got "many"`},
		{"bad duration", base("  rate: const:1\n  duration: soon\n  users: 3\n", ""), `line 4: load.duration: want a duration such as "10s"`},
		{"two documents", base("", "---\nname: u\n"), "more than one YAML document"},
		{"bad name", "name: 'a b'\nload:\n  rate: const:1\n  duration: 1s\n  users: 3\n", "name:"},
		{"bad rate", base("  rate: fast\n  duration: 4s\n  users: 10\n", ""), "load.rate"},
		{"integer duration", base("  rate: const:1\n  duration: 10\n  users: 10\n", ""), "want a duration"},
		{"zero duration", base("  rate: const:1\n  duration: 0s\n  users: 10\n", ""), "load.duration"},
		{"long duration", base("  rate: const:1\n  duration: 2h\n  users: 10\n", ""), "load.duration"},
		{"one user", base("  rate: const:1\n  duration: 1s\n  users: 1\n", ""), "load.users"},
		{"too many users", base("  rate: const:1\n  duration: 1s\n  users: 2000000\n", ""), "load.users"},
		{"online+crashy", base("  rate: const:1\n  duration: 1s\n  users: 3\n  online: 0.8\n  crashy: 0.5\n", ""), "load.crashy"},
		{"share without groups", base("  rate: const:1\n  duration: 1s\n  users: 3\n  group_share: 0.5\n", ""), "load.group_share"},
		{"bad sizes", base("  rate: const:1\n  duration: 1s\n  users: 3\n  group_sizes: '1:5'\n", ""), "load.group_sizes"},
		{"embedded scale 0", base("  rate: const:1\n  duration: 1s\n  users: 3\n  embedded_rate_scale: 0\n", ""), "load.embedded_rate_scale"},
		{"embedded scale up", base("  rate: const:1\n  duration: 1s\n  users: 3\n  embedded_rate_scale: 2\n", ""), "load.embedded_rate_scale"},
		{"send via", base("  rate: const:1\n  duration: 1s\n  users: 3\n  send_via: smoke\n", ""), "load.send_via"},
		{"policy", base("", "server:\n  policy: yolo\n"), "server.policy"},
		{"allocator", base("", "server:\n  allocator: dice\n"), "server.allocator"},
		{"dedup", base("", "server:\n  dedup: none\n"), "server.dedup"},
		{"mode", base("", "backends:\n  mode: cloud\n"), "backends.mode"},
		{"partitions", base("", "backends:\n  kafka_partitions: 3\n"), "backends.kafka_partitions"},
		{"role", base("", "server:\n  processes:\n    - name: a\n      roles: [chef]\n"), "unknown role"},
		{"dup process", base("", "server:\n  processes:\n    - name: a\n      roles: [api]\n    - name: a\n      roles: [consumer]\n"), "used twice"},
		{"no api", base("", "server:\n  processes:\n    - name: a\n      roles: [consumer]\n"), "no process runs the api"},
		{"history role", base("", "server:\n  processes:\n    - name: a\n      roles: [api, history]\n"), "server.history"},
		{"unknown kind", base("", "faults:\n  - at: 1s\n    kind: meteor\n"), "faults[0].kind"},
		{"fault after load", base("", "faults:\n  - at: 5s\n    kind: redis_wipe\n"), "faults[0].at"},
		{"fault not healed", base("", "faults:\n  - at: 3s\n    for: 2s\n    kind: latency\n    target: redis\n    latency: 1ms\n"), "faults[0].for"},
		{"bad target", base("", "faults:\n  - at: 1s\n    for: 1s\n    kind: down\n    target: dns\n"), "faults[0].target"},
		{"kafka unused", base("", "faults:\n  - at: 1s\n    for: 1s\n    kind: down\n    target: kafka\n"), "kafka is not used"},
		{"mongo unused", base("", "faults:\n  - at: 1s\n    for: 1s\n    kind: down\n    target: mongo\n"), "server.history"},
		{"latency missing", base("", "faults:\n  - at: 1s\n    for: 1s\n    kind: latency\n    target: redis\n"), "faults[0].latency"},
		{"foreign param", base("", "faults:\n  - at: 1s\n    kind: redis_wipe\n    latency: 1s\n"), "faults[0].latency: not a parameter"},
		{"wipe target", base("", "faults:\n  - at: 1s\n    kind: redis_wipe\n    target: redis\n"), "takes no target"},
		{"down no for", base("", "faults:\n  - at: 1s\n    kind: down\n    target: redis\n"), "positive duration"},
		{"bandwidth rate", base("", "faults:\n  - at: 1s\n    for: 1s\n    kind: bandwidth\n    target: mysql\n"), "faults[0].rate_kbps"},
		{"toxicity", base("", "faults:\n  - at: 1s\n    for: 1s\n    kind: reset_peer\n    target: mysql\n    toxicity: 2\n"), "faults[0].toxicity"},
		{"stream", base("", "faults:\n  - at: 1s\n    for: 1s\n    kind: reset_peer\n    target: mysql\n    stream: sideways\n"), "faults[0].stream"},
		{"kill unknown", base("", "faults:\n  - at: 1s\n    for: 1s\n    kind: kill\n    target: ghost\n"), "not a process"},
		{"record loss strict", base("", "faults:\n  - at: 1s\n    kind: kafka_record_loss\n"), "needs a policy that uses Kafka"},
		{"rollback segment", base("", "server:\n  allocator: segment\nfaults:\n  - at: 1s\n    kind: allocator_rollback\n    by: 5\n"), "needs server.allocator redis"},
		{"verdict", base("", "expect:\n  verdict: maybe\n"), "expect.verdict"},
		{"min lost with valid", base("", "expect:\n  min_lost: 1\n"), "expect.min_lost"},
		{"min above max", base("", "expect:\n  verdict: invalid\n  min_lost: 3\n  max_lost: 1\n"), "expect.min_lost"},
		{"rate ratio", base("", "expect:\n  min_rate_ratio: 1.5\n"), "expect.min_rate_ratio"},
		{"lag without kafka", base("", "expect:\n  max_lag_age: 5s\n"), "expect.max_lag_age"},
		{"recovery without kafka", base("", "expect:\n  max_recovery: 5s\n"), "expect.max_recovery"},
		{"drain rate without kafka", base("", "expect:\n  min_drain_rate: 100\n"), "expect.min_drain_rate"},
		{"zero recovery", base("", "server:\n  policy: store\nexpect:\n  max_recovery: 0s\n"), "expect.max_recovery"},
		{"zero drain rate", base("", "server:\n  policy: store\nexpect:\n  min_drain_rate: 0\n"), "expect.min_drain_rate"},
		{"zero bound", base("", "server:\n  policy: store\nexpect:\n  recovery_bound: 0s\n"), "expect.recovery_bound"},
		{"recovery switched off", base("", "server:\n  policy: store\nexpect:\n  lag_recovered: false\n  max_recovery: 5s\n"), "expect.lag_recovered"},
		{"conns", base("  rate: const:1\n  duration: 1s\n  users: 3\n  conns: 5000\n", ""), "load.conns"},
		{"pipeline conns alone", base("  rate: const:1\n  duration: 1s\n  users: 3\n  pipeline_conns: 4\n", ""), "load.pipeline_conns"},
		{"max workers", base("  rate: const:1\n  duration: 1s\n  users: 3\n  max_workers: -1\n", ""), "load.max_workers"},
		{"senders", base("  rate: const:1\n  duration: 1s\n  users: 3\n  senders: -1\n", ""), "load.senders"},
		{"max queued alone", base("  rate: const:1\n  duration: 1s\n  users: 3\n  max_queued: 10\n", ""), "load.max_queued"},
		{"spin window", base("  rate: const:1\n  duration: 1s\n  users: 3\n  spin_window: 1s\n", ""), "load.spin_window"},
		{"send timeout", base("  rate: const:1\n  duration: 1s\n  users: 3\n  send_timeout: 2m\n", ""), "load.send_timeout"},
		{"negative count", base("", "expect:\n  max_lost: -1\n"), `line 7: expect.max_lost: want a whole number, 0 or more, got "-1"`},
		{"too many faults", base("", "faults:\n"+strings.Repeat("  - at: 1s\n    kind: redis_wipe\n", MaxFaults+1)), "faults: 101 faults"},
		{"too long", base("  rate: const:1\n  duration: 1h\n  users: 3\n  settle: 5m\n  drain_timeout: 30m\n", ""), "at most 1h30m"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse("bad.yaml", []byte(c.body))
			if err == nil {
				t.Fatalf("accepted: %+v", f)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q: want ErrInvalid naming bad.yaml and %q", err, c.want)
			}
			// The file's words, never the Go types it decodes into.
			if m := err.Error(); strings.Contains(m, "scenarios.") || strings.Contains(m, "in type") || strings.Contains(m, "!!") {
				t.Errorf("error %q names Go types", m)
			}
		})
	}
}

// TestShippedFiles: every scenario file in this directory validates, and
// the required ones are there.
// roundTrip: the copy of f a result carries (JSON) reads back to the same
// load and capacity sections, and says in the file's words what it set.
func roundTrip(t *testing.T, f *File) {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatalf("%s: %v", f.Path, err)
	}
	var back File
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%s: %v", f.Path, err)
	}
	if !reflect.DeepEqual(back.Load, f.Load) || !reflect.DeepEqual(back.Capacity, f.Capacity) {
		t.Errorf("%s: read back load %+v capacity %+v, want %+v %+v", f.Path, back.Load, back.Capacity, f.Load, f.Capacity)
	}
	var m struct {
		Load map[string]any `json:"load"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if f.Kind != KindCapacity && (m.Load["duration"] != f.Load.Config.Duration.String() || m.Load["users"] != float64(f.Load.Config.Pop.Users)) {
		t.Errorf("%s: the copy's load says %v", f.Path, m.Load)
	}
}

func TestShippedFiles(t *testing.T) {
	paths, err := filepath.Glob("../scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// full/ holds full-size runs that take minutes: validated here, run by hand.
	full, err := filepath.Glob("../scenarios/full/*.yaml")
	if err != nil || len(full) == 0 {
		t.Fatalf("full-size scenarios: %v %v", full, err)
	}
	targets, err := filepath.Glob("../scenarios/targets/*.yaml")
	if err != nil || len(targets) == 0 {
		t.Fatalf("target scenarios: %v %v", targets, err)
	}
	paths = append(append(paths, full...), targets...)
	have := map[string]bool{}
	for _, p := range paths {
		f, err := ReadFile(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		roundTrip(t, f)
		if f.Name+".yaml" != filepath.Base(p) {
			t.Errorf("%s: name %q does not match the file name", p, f.Name)
		}
		have[f.Name] = true
	}
	for _, n := range []string{"redis-wipe", "allocator-rollback", "queue-loss-store", "queue-loss-unsafe", "toxics", "consumer-kill", "relay-stop", "offline-month", "burst"} {
		if !have[n] {
			t.Errorf("scenario %s.yaml missing", n)
		}
	}
	// The process faults: a real kill of an exec consumer, a graceful stop
	// of an in-process relay.
	for file, want := range map[string]string{"consumer-kill.yaml": KindKill, "queue-loss-store.yaml": KindKill,
		"queue-loss-unsafe.yaml": KindKill, "relay-stop.yaml": KindStop} {
		f, err := ReadFile(filepath.Join("../scenarios", file))
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, x := range f.Faults {
			if x.Kind == KindKill || x.Kind == KindStop {
				kinds = append(kinds, x.Kind+" "+x.Target)
				for _, p := range f.Processes() {
					if p.Name == x.Target && p.Exec != (x.Kind == KindKill) {
						t.Errorf("%s: %s of %+v", file, x.Kind, p)
					}
				}
			}
		}
		if len(kinds) != 1 || !strings.HasPrefix(kinds[0], want+" ") {
			t.Errorf("%s: process faults %v, want one %s", file, kinds, want)
		}
	}
}

func TestScaled(t *testing.T) {
	f, err := Parse("good.yaml", []byte(goodFile))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Scaled(f, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if g.Load.Config.Duration != 2*time.Second || g.Faults[0].At.D() != 500*time.Millisecond || g.Faults[0].For.D() != 500*time.Millisecond {
		t.Fatalf("scaled: %+v %+v", g.Load, g.Faults[0])
	}
	if f.Load.Config.Duration != 4*time.Second || f.Faults[0].At.D() != time.Second {
		t.Fatal("Scaled changed its input")
	}
}

// TestShippedCompiledIn: the compiled-in files are this directory's, each
// parses, and the default set names shipped scenarios.
func TestShippedCompiledIn(t *testing.T) {
	paths, err := filepath.Glob("../scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range paths {
		want = append(want, strings.TrimSuffix(filepath.Base(p), ".yaml"))
	}
	if got := ShippedNames(); !slices.Equal(got, want) {
		t.Fatalf("compiled in %q, on disk %q", got, want)
	}
	for _, n := range append(slices.Clone(DefaultSet), want...) {
		f, err := Shipped(n)
		if err != nil || f.Name != n || f.Path != "scenarios/"+n+".yaml" {
			t.Fatalf("Shipped(%q): %+v %v", n, f, err)
		}
	}
	for _, bad := range []string{"nope", "../go", "full/offline-month-full", ""} {
		if _, err := Shipped(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Shipped(%q): %v, want ErrInvalid", bad, err)
		}
	}
}
