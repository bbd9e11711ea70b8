package scenario

import (
	"strings"
	"testing"
	"time"

	"imlab/capacity"
)

// TestCapacityFileValidation: a capacity file says its search and nothing
// a search does not do.
func TestCapacityFileValidation(t *testing.T) {
	good := `name: c
kind: capacity
load: {users: 10}
capacity: {slo: 'ack_p99<=1s', from: 10, to: 100}
expect: {min_sustainable: 10}
`
	if _, err := Parse("c.yaml", []byte(good)); err != nil {
		t.Fatalf("good file: %v", err)
	}
	for name, bad := range map[string]string{
		"rate":         strings.Replace(good, "load: {users: 10}", "load: {users: 10, rate: 'const:10', duration: 5s}", 1),
		"no block":     strings.Replace(good, "capacity: {slo: 'ack_p99<=1s', from: 10, to: 100}\n", "", 1),
		"bad slo":      strings.Replace(good, "ack_p99<=1s", "p99<1s", 1),
		"from > to":    strings.Replace(good, "from: 10, to: 100", "from: 100, to: 10", 1),
		"no minimum":   strings.Replace(good, "expect: {min_sustainable: 10}", "expect: {}", 1),
		"other expect": strings.Replace(good, "{min_sustainable: 10}", "{min_sustainable: 10, max_lost: 0}", 1),
		"faults":       good + "faults: [{kind: redis_wipe, at: 1s}]\n",
		"spin window":  strings.Replace(good, "load: {users: 10}", "load: {users: 10, spin_window: 0s}", 1),
		"kind":         strings.Replace(good, "kind: capacity", "kind: search", 1),
		"run kind":     "name: r\nload: {rate: 'const:10', duration: 5s, users: 10}\nexpect: {min_sustainable: 10}\n",
	} {
		if _, err := Parse("c.yaml", []byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCapacitySearchPaces: a capacity file's search paces as imlab
// capacity does (the runtime's timers, late past 2 ms) whatever the load
// template's pacer, and keeps the template's other pacer settings.
func TestCapacitySearchPaces(t *testing.T) {
	f, err := Parse("c.yaml", []byte("name: c\nkind: capacity\nload: {users: 10, max_workers: 77}\ncapacity: {slo: 'ack_p99<=1s', from: 10, to: 100}\nexpect: {min_sustainable: 10}\n"))
	if err != nil {
		t.Fatal(err)
	}
	lc := f.Load.Config
	lc.Pacer.SpinWindow, lc.Pacer.LateAfter = 2*time.Millisecond, time.Millisecond
	cfg, err := f.Capacity.Search(lc, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Load.Pacer; p.SpinWindow != capacity.DefaultSpin || p.LateAfter != capacity.DefaultLateAfter || p.MaxWorkers != 77 {
		t.Fatalf("the search's pacer: %+v", p)
	}
}
