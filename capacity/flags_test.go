package capacity

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestRegisterFlags: the search's settings and the generator's a search
// offers, with their meaning for a search, parsed into the config.
func TestRegisterFlags(t *testing.T) {
	c := DefaultConfig("", "", "")
	fs := pflag.NewFlagSet("capacity", pflag.ContinueOnError)
	if err := c.RegisterFlags(fs); err != nil {
		t.Fatal(err)
	}
	for _, f := range loadFlags {
		if fl := fs.Lookup(f.name); fl == nil || fl.Usage != f.usage {
			t.Errorf("flag %s: %+v", f.name, fl)
		}
	}
	// The search's pacer: the runtime's timers, late past 2 ms (not
	// imlab load's kernel sleep and 1 ms), each a flag.
	if c.Load.Pacer.SpinWindow != 0 || c.Load.Pacer.LateAfter != 2*time.Millisecond {
		t.Errorf("default pacer: spin %s late after %s", c.Load.Pacer.SpinWindow, c.Load.Pacer.LateAfter)
	}
	if fs.Lookup("seed") != nil {
		t.Error("a generator flag the search does not offer is registered")
	}
	if err := fs.Parse([]string{"--from", "300", "--users", "40", "--ceiling", "0s", "--spin", "2ms", "--late-after", "1ms"}); err != nil {
		t.Fatal(err)
	}
	if c.From != 300 || c.Load.Pop.Users != 40 || c.CeilingFor != 0 || c.Load.Pacer.SpinWindow != 2*time.Millisecond || c.Load.Pacer.LateAfter != time.Millisecond {
		t.Errorf("parsed into from %g users %d ceiling %s spin %s late after %s", c.From, c.Load.Pop.Users, c.CeilingFor, c.Load.Pacer.SpinWindow, c.Load.Pacer.LateAfter)
	}
}
