package loadgen

import (
	"fmt"

	"github.com/spf13/pflag"

	"imlab/internal/setting"
	"imlab/targets/ref/client"
)

// DefaultMaxQueued bounds the queued sends of the pacer's queued mode
// (--senders) when a command line does not say.
const DefaultMaxQueued = 1_000_000

// Settings are Config's settings, each once: its key in a scenario
// file's load block (none: files do not offer it), its flag on imlab load
// (and, a subset with their meaning for a search, on imlab capacity), what
// it means and the field it lands in. The target, its secret, the rate
// shape, the group sizes and the run directory are a command's or a
// file's own: each parses or derives them.
func Settings() setting.Table[Config] {
	return setting.Table[Config]{
		{Key: "duration", Flag: "duration", Field: func(c *Config) any { return &c.Duration },
			Doc: "how long to send"},
		{Key: "users", Flag: "users", Field: func(c *Config) any { return &c.Pop.Users },
			Doc: "users"},
		{Key: "devices", Flag: "devices", Field: func(c *Config) any { return &c.Pop.DevicesPerUser },
			Doc: "devices per user"},
		{Flag: "uid-base", Field: func(c *Config) any { return &c.Pop.UIDBase },
			Doc: "first uid (use a range fresh to the server)"},
		{Flag: "group-base", Field: func(c *Config) any { return &c.Pop.GroupBase },
			Doc: "first group id"},
		{Key: "online", Flag: "online", Field: func(c *Config) any { return &c.Pop.Online },
			Doc: "fraction of devices online on WebSocket"},
		{Key: "crashy", Flag: "crashy", Field: func(c *Config) any { return &c.Pop.Crashy },
			Doc: "fraction of devices that crash before storing or acknowledging"},
		{Key: "groups", Flag: "groups", Field: func(c *Config) any { return &c.Pop.Groups },
			Doc: "group conversations"},
		{Key: "group_share", Flag: "group-share", Field: func(c *Config) any { return &c.Pop.GroupShare },
			Doc: "fraction of sends to groups"},
		{Key: "come_back_every", Flag: "come-back-every", Field: func(c *Config) any { return &c.Pop.ComeBackEvery },
			Doc: "offline devices come back and pull this often (0: only at the end)"},
		{Flag: "crash-every", Field: func(c *Config) any { return &c.Pop.CrashEvery },
			Doc: "a crashy device crashes on every Nth non-empty page"},
		{Key: "conns", Flag: "conns", Field: func(c *Config) any { return &c.Conns },
			Doc: "HTTP connections"},
		{Key: "pipeline", Flag: "pipeline", Field: func(c *Config) any { return &c.Pipeline },
			Doc: "sends over a pool of their own with this many HTTP/1.1 requests in flight per connection (0: sends share --conns, one at a time); a server answers a connection's requests in order, one at a time"},
		{Key: "pipeline_conns", Flag: "pipeline-conns", Field: func(c *Config) any { return &c.PipelineConns },
			Doc: "with --pipeline: connections of the send pool (pulls and acks keep --conns)"},
		{Flag: "pipeline-delay", Field: func(c *Config) any { return &c.PipelineDelay },
			Doc: "with --pipeline: a connection waits up to this long to batch requests into one write"},
		{Flag: "workers", Field: func(c *Config) any { return &c.Pacer.Workers },
			Doc: "initial send workers"},
		{Key: "max_workers", Flag: "max-workers", Field: func(c *Config) any { return &c.Pacer.MaxWorkers },
			Doc: "send workers at most (then sends start late)"},
		{Key: "senders", Flag: "senders", Field: func(c *Config) any { return &c.Pacer.Senders },
			Doc: "queued mode: this many send goroutines fed through a queue the pacer fills at each send's intended time (the wait there counts in the ACK latency); --workers and --max-workers are then not used (0: a goroutine per send in flight)"},
		{Key: "max_queued", Flag: "max-queued", Field: func(c *Config) any { return &c.Pacer.MaxQueued },
			Doc: "with --senders: sends queued at most (then sends start late)"},
		{Flag: "late-after", Field: func(c *Config) any { return &c.Pacer.LateAfter },
			Doc: "a send starting this much after its intended time is late"},
		{Flag: "grace", Field: func(c *Config) any { return &c.Pacer.Grace },
			Doc: "sends not started by duration+grace are missed"},
		{Key: "spin_window", Flag: "spin", Field: func(c *Config) any { return &c.Pacer.SpinWindow },
			Doc: "pacer sleeps in the kernel (precise to about 10 µs) instead of on the runtime's timers (about 1 ms) for this long before each send (0: the runtime's timers only)"},
		{Key: "send_timeout", Flag: "timeout", Field: func(c *Config) any { return &c.Timeout },
			Doc: "timeout of one HTTP exchange or WebSocket send"},
		{Key: "send_via", Flag: "send-via", Field: func(c *Config) any { return &c.SendVia },
			Doc: "send transport: http (POST /v1/msg/send) or ws (send frames, WebSockets of their own per sending user)"},
		{Flag: "ws-conns-per-user", Field: func(c *Config) any { return &c.WSConnsPerUser },
			Doc: "with --send-via ws: sending WebSockets per user (a server answers one connection's sends in order)"},
		{Key: "retries", Flag: "retries", Field: func(c *Config) any { return &c.Retries },
			Doc: "resends of a send of unknown outcome (timeout, connection error, 5xx), with the same client_msg_id"},
		{Flag: "probe-fraction", Field: func(c *Config) any { return &c.ProbeFraction },
			Doc: "fraction of ACKed sends whose stored state is read right after the ACK (read-after-ACK, lab route " + client.LabStoredPath + "; 0: off)"},
		{Flag: "probe-recipients", Field: func(c *Config) any { return &c.ProbeRecipients },
			Doc: "recipients a read-after-ACK probe reads besides the sender"},
		{Flag: "content-size", Field: func(c *Config) any { return &c.ContentSize },
			Doc: "message body size in bytes"},
		{Key: "pull_limit", Flag: "pull-limit", Field: func(c *Config) any { return &c.PullLimit },
			Doc: "pull page size"},
		{Flag: "ack-every", Field: func(c *Config) any { return &c.AckEvery },
			Doc: "online devices acknowledge their chain this often"},
		{Key: "settle", Flag: "settle", Field: func(c *Config) any { return &c.Settle },
			Doc: "wait after the last send before the final drain"},
		{Key: "drain_timeout", Flag: "drain-timeout", Field: func(c *Config) any { return &c.DrainTimeout },
			Doc: "bound on the final drain"},
		{Flag: "shards", Field: func(c *Config) any { return &c.Shards },
			Doc: "ledger shard files"},
		{Key: "seed", Flag: "seed", Field: func(c *Config) any { return &c.Seed },
			Doc: "population and traffic seed"},
		{Flag: "ceiling", Field: func(c *Config) any { return &c.CeilingFor },
			Doc: "measure the generator's own ceiling on a no-op endpoint this long first (0: skip)"},
		{Flag: "run-id", Field: func(c *Config) any { return &c.RunID },
			Doc: "the run's id in every client_msg_id and message body (default: random; for a segment, derived from the seed, shape and population so segments agree: give one unique to the run when the same flags run twice against one server)"},
		{Key: "mix", Flag: "mix", Field: func(c *Config) any { return &c.Mix }},
	}
}

// FlagNames are the names of the flags RegisterFlags offers.
func (c *Config) FlagNames() []string { return Settings().Flags() }

// RegisterFlags registers c's settings (Settings) on fs as flags bound to
// c, each defaulting to c's current value (so register a DefaultConfig);
// names limits them to the named ones (all when none). A queued-mode bound
// of 0 becomes DefaultMaxQueued first. An unknown name is an error, and
// then nothing is registered.
func (c *Config) RegisterFlags(fs *pflag.FlagSet, names ...string) error {
	if c.Pacer.MaxQueued == 0 {
		c.Pacer.MaxQueued = DefaultMaxQueued
	}
	if err := Settings().Register(fs, c, names...); err != nil {
		return fmt.Errorf("%w: load flags: %w", ErrInvalid, err)
	}
	return nil
}
