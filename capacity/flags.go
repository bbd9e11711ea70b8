package capacity

import (
	"fmt"

	"github.com/spf13/pflag"

	"imlab/internal/setting"
)

// Settings are the search's settings, each once: its key in a scenario
// file's capacity block (none: files do not offer it), its flag on imlab
// capacity, what it means and the field it lands in. The SLO, the
// processes to watch and the output directory are a command's or a
// file's own: each parses or derives them.
func Settings() setting.Table[Config] {
	return setting.Table[Config]{
		{Key: "from", Flag: "from", Field: func(c *Config) any { return &c.From },
			Doc: "first rate (sends/s)"},
		{Key: "to", Flag: "to", Field: func(c *Config) any { return &c.To },
			Doc: "highest rate tried (sends/s)"},
		{Key: "growth", Flag: "growth", Field: func(c *Config) any { return &c.Growth },
			Doc: "rate factor between ramp steps"},
		{Key: "resolution", Flag: "resolution", Field: func(c *Config) any { return &c.Resolution },
			Doc: "bisect until the rate that broke is within this fraction of the rate that held"},
		{Key: "warm_up", Flag: "warm-up", Field: func(c *Config) any { return &c.WarmUp },
			Doc: "uncounted warm-up of each step (whole seconds)"},
		{Key: "step", Flag: "step", Field: func(c *Config) any { return &c.Step },
			Doc: "measured length of each step (whole seconds)"},
		{Key: "max_steps", Flag: "max-steps", Field: func(c *Config) any { return &c.MaxSteps },
			Doc: "steps at most, the repeat included"},
		{Key: "cool_down", Flag: "cool-down", Field: func(c *Config) any { return &c.CoolDown },
			Doc: "pause after a step that broke, for the target's backlog to drain"},
		{Flag: "settle-max", Field: func(c *Config) any { return &c.SettleMax },
			Doc: "before each step after the first, wait this long at most for every consumer group's lag (GET /v1/lab/lag) to fall to --settle-lag, so a step does not inherit the backlog of the ones before it (0: no wait; a backlog left is recorded on the step)"},
		{Flag: "settle-lag", Field: func(c *Config) any { return &c.SettleLag },
			Doc: "the lag a step may start with (see --settle-max)"},
		{Key: "ceiling", Flag: "ceiling", Field: func(c *Config) any { return &c.CeilingFor },
			Doc: "measure the generator's ceiling on a no-op endpoint this long first (0: skip)"},
		{Flag: "keep-ledgers", Field: func(c *Config) any { return &c.KeepLedgers },
			Doc: "keep every step's ledger"},
	}
}

// loadFlags are the generator's flags a search offers, with what each
// means for a search (each step is one load run).
var loadFlags = []struct{ name, usage string }{
	{"users", "users per step (each step a fresh uid range)"},
	{"devices", "devices per user"},
	{"uid-base", "first uid of the first step (use a range fresh to the server)"},
	{"online", "fraction of devices online on WebSocket"},
	{"conns", "HTTP connections"},
	{"timeout", "timeout of one HTTP exchange"},
	{"send-via", "send transport: http or ws"},
	{"max-workers", "send workers at most"},
	{"spin", "pacer: sleep in the kernel this long before each send (precise to about 10 µs, a thread wake-up per send); 0: wait on the runtime's timers only (about 1 ms), the search's default"},
	{"late-after", "pacer: a send that starts this long after its intended time counts late (the search's default is above the runtime timers' jitter)"},
	{"drain-timeout", "bound on each step's final drain"},
	{"mix", "client mix of every step: off (send-only) or default (clientmix.Default); --mix-* flags after it override one key each (the same keys as imlab load and a scenario's load.mix)"},
}

// RegisterFlags registers the search's settings (Settings) on fs as flags
// bound to c, each defaulting to c's current value (register a
// DefaultConfig), and the generator's settings a search offers (c.Load's).
// The SLO, the processes to watch and the output directory are the
// command's: it parses or derives them.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) error {
	if err := Settings().Register(fs, c); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	names := make([]string, len(loadFlags))
	for i, f := range loadFlags {
		names[i] = f.name
	}
	if err := c.Load.RegisterFlags(fs, names...); err != nil {
		return err
	}
	for _, f := range loadFlags {
		fs.Lookup(f.name).Usage = f.usage
	}
	return nil
}
