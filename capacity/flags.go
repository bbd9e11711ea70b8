package capacity

import (
	"github.com/spf13/pflag"
)

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
	{"drain-timeout", "bound on each step's final drain"},
	{"mix", "client mix of every step: off (send-only) or default (loadgen.DefaultMix); --mix-* flags after it override one key each (the same keys as imlab load and a scenario's load.mix)"},
}

// RegisterFlags registers the search's settings on fs as flags bound to
// c, each defaulting to c's current value (register a DefaultConfig), and
// the generator's settings a search offers (c.Load's). The SLO, the
// processes to watch and the output directory are the command's: it
// parses or derives them.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) error {
	fs.Float64Var(&c.From, "from", c.From, "first rate (sends/s)")
	fs.Float64Var(&c.To, "to", c.To, "highest rate tried (sends/s)")
	fs.Float64Var(&c.Growth, "growth", c.Growth, "rate factor between ramp steps")
	fs.Float64Var(&c.Resolution, "resolution", c.Resolution, "bisect until the rate that broke is within this fraction of the rate that held")
	fs.DurationVar(&c.WarmUp, "warm-up", c.WarmUp, "uncounted warm-up of each step (whole seconds)")
	fs.DurationVar(&c.Step, "step", c.Step, "measured length of each step (whole seconds)")
	fs.IntVar(&c.MaxSteps, "max-steps", c.MaxSteps, "steps at most, the repeat included")
	fs.DurationVar(&c.CoolDown, "cool-down", c.CoolDown, "pause after a step that broke, for the target's backlog to drain")
	fs.DurationVar(&c.SettleMax, "settle-max", c.SettleMax, "before each step after the first, wait this long at most for every consumer group's lag (GET /v1/lab/lag) to fall to --settle-lag, so a step does not inherit the backlog of the ones before it (0: no wait; a backlog left is recorded on the step)")
	fs.DurationVar(&c.SettleLag, "settle-lag", c.SettleLag, "the lag a step may start with (see --settle-max)")
	fs.DurationVar(&c.CeilingFor, "ceiling", c.CeilingFor, "measure the generator's ceiling on a no-op endpoint this long first (0: skip)")
	fs.BoolVar(&c.KeepLedgers, "keep-ledgers", c.KeepLedgers, "keep every step's ledger")
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
