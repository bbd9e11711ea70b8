package loadgen

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestRegisterFlags: every setting once, defaulting to the config's
// value, parsed into the config; a subset by name; an unknown name
// refused with nothing registered.
func TestRegisterFlags(t *testing.T) {
	c := DefaultConfig("", "", "")
	fs := pflag.NewFlagSet("load", pflag.ContinueOnError)
	if err := c.RegisterFlags(fs); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.FlagNames() {
		if fs.Lookup(n) == nil {
			t.Errorf("flag %s not registered", n)
		}
	}
	if got := fs.Lookup("users").DefValue; got != "100" {
		t.Errorf("users default %s, want the config's 100", got)
	}
	if c.Pacer.MaxQueued != DefaultMaxQueued {
		t.Errorf("max-queued %d, want %d", c.Pacer.MaxQueued, DefaultMaxQueued)
	}
	if err := fs.Parse([]string{"--users", "7", "--settle", "3s", "--max-workers", "9"}); err != nil {
		t.Fatal(err)
	}
	if c.Pop.Users != 7 || c.Settle != 3*time.Second || c.Pacer.MaxWorkers != 9 {
		t.Errorf("parsed into %+v", c)
	}

	sub := pflag.NewFlagSet("sub", pflag.ContinueOnError)
	if err := c.RegisterFlags(sub, "users", "conns"); err != nil || sub.Lookup("users") == nil || sub.Lookup("seed") != nil {
		t.Errorf("subset: %v", err)
	}
	none := pflag.NewFlagSet("none", pflag.ContinueOnError)
	if err := c.RegisterFlags(none, "users", "nope"); !errors.Is(err, ErrInvalid) || none.Lookup("users") != nil {
		t.Errorf("unknown name: %v, users registered %v", err, none.Lookup("users") != nil)
	}
}

// TestConfigRefusesABadMix: a load config with a bad client mix is refused
// as invalid, naming the mix's key.
func TestConfigRefusesABadMix(t *testing.T) {
	c := DefaultConfig("http://127.0.0.1:1", "0123456789abcdef0123", t.TempDir())
	c.Mix.Revoke = -1
	if err := c.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "mix.revoke") {
		t.Fatalf("config with a negative revoke: %v", err)
	}
}
