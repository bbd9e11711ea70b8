package capacity

import (
	"testing"

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
	if fs.Lookup("seed") != nil {
		t.Error("a generator flag the search does not offer is registered")
	}
	if err := fs.Parse([]string{"--from", "300", "--users", "40", "--ceiling", "0s"}); err != nil {
		t.Fatal(err)
	}
	if c.From != 300 || c.Load.Pop.Users != 40 || c.CeilingFor != 0 {
		t.Errorf("parsed into from %g users %d ceiling %s", c.From, c.Load.Pop.Users, c.CeilingFor)
	}
}
