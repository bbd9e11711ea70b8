package runner

import (
	"errors"
	"os"
	"testing"
	"time"

	"imlab/loadgen/schedule"
	"imlab/scenario"
)

func TestChildCommandDefault(t *testing.T) {
	c := DefaultConfig(t.TempDir())
	cmd, err := c.childCommand()
	if err != nil {
		t.Fatal(err)
	}
	if exe, _ := os.Executable(); len(cmd) != 3 || cmd[0] != exe || cmd[1] != "scenario" || cmd[2] != "child" {
		t.Fatalf("default child command %q", cmd)
	}
	c.ChildCommand = []string{"/bin/imlab-other", "child"}
	if cmd, _ := c.childCommand(); cmd[0] != "/bin/imlab-other" {
		t.Fatalf("configured child command %q", cmd)
	}
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig(t.TempDir())
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"no out":      func(c *Config) { c.OutDir = "" },
		"mode":        func(c *Config) { c.Mode = "cloud" },
		"secret":      func(c *Config) { c.Secret = "short" },
		"duration":    func(c *Config) { c.Duration = -time.Second },
		"glob prefix": func(c *Config) { c.RedisPrefix = "a*" },
		"child":       func(c *Config) { c.ChildCommand = []string{""} },
		"rate scale":  func(c *Config) { c.RateScale = 1.5 },
		"neg scale":   func(c *Config) { c.RateScale = -0.1 },
	} {
		c := good
		mut(&c)
		if err := c.Validate(); !errors.Is(err, scenario.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// pacerFile is a file whose load section ends last, for a test to add keys.
const pacerFile = "name: p\nexpect:\n  verdict: valid\nload:\n  rate: const:10\n  duration: 1s\n  users: 4\n"

// TestPacerConfig: the burst files run the pacer's queued mode with the
// senders, queue and spin they state; a file without them keeps loadgen's
// goroutine-per-send pool, max_workers bounding it.
func TestPacerConfig(t *testing.T) {
	f, err := scenario.ReadFile("../scenarios/full/burst-50k.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Load.Config.Pacer; c.Senders != 512 || c.MaxQueued != scenario.DefaultMaxQueued || c.SpinWindow != 0 {
		t.Fatalf("burst-50k pacer %+v: want 512 senders, the default queue, no spin", c)
	}
	f, err = scenario.Parse("q.yaml", []byte(pacerFile+"  senders: 3\n  max_queued: 7\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Load.Config.Pacer; c.Senders != 3 || c.MaxQueued != 7 || c.SpinWindow != schedule.DefaultConfig().SpinWindow {
		t.Fatalf("pacer %+v: want 3 senders, a queue of 7, the default spin", c)
	}
	f, err = scenario.Parse("w.yaml", []byte(pacerFile+"  max_workers: 10\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Load.Config.Pacer; c.Senders != 0 || c.MaxWorkers != 10 || c.Workers != 10 {
		t.Fatalf("pacer %+v: want the pool mode bounded at 10 workers", c)
	}
}
