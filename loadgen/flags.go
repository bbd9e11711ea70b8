package loadgen

import (
	"fmt"
	"slices"

	"github.com/spf13/pflag"

	"imlab/targets/ref/client"
)

// DefaultMaxQueued bounds the queued sends of the pacer's queued mode
// (--senders) when a command line does not say.
const DefaultMaxQueued = 1_000_000

// flag is one setting of Config as a command-line flag.
type flag struct {
	name string
	add  func(fs *pflag.FlagSet)
}

// flags are the settings of c a command line offers, each bound to its
// field with the field's current value as the default. The target, its
// secret, the rate shape, the group sizes and the run directory are the
// command's: it parses or derives them.
func (c *Config) flags() []flag {
	p, pc := &c.Pop, &c.Pacer
	return []flag{
		{"duration", func(fs *pflag.FlagSet) { fs.DurationVar(&c.Duration, "duration", c.Duration, "how long to send") }},
		{"users", func(fs *pflag.FlagSet) { fs.IntVar(&p.Users, "users", p.Users, "users") }},
		{"devices", func(fs *pflag.FlagSet) { fs.IntVar(&p.DevicesPerUser, "devices", p.DevicesPerUser, "devices per user") }},
		{"uid-base", func(fs *pflag.FlagSet) {
			fs.Uint64Var(&p.UIDBase, "uid-base", p.UIDBase, "first uid (use a range fresh to the server)")
		}},
		{"group-base", func(fs *pflag.FlagSet) { fs.Uint64Var(&p.GroupBase, "group-base", p.GroupBase, "first group id") }},
		{"online", func(fs *pflag.FlagSet) {
			fs.Float64Var(&p.Online, "online", p.Online, "fraction of devices online on WebSocket")
		}},
		{"crashy", func(fs *pflag.FlagSet) {
			fs.Float64Var(&p.Crashy, "crashy", p.Crashy, "fraction of devices that crash before storing or acknowledging")
		}},
		{"groups", func(fs *pflag.FlagSet) { fs.IntVar(&p.Groups, "groups", p.Groups, "group conversations") }},
		{"group-share", func(fs *pflag.FlagSet) {
			fs.Float64Var(&p.GroupShare, "group-share", p.GroupShare, "fraction of sends to groups")
		}},
		{"come-back-every", func(fs *pflag.FlagSet) {
			fs.DurationVar(&p.ComeBackEvery, "come-back-every", p.ComeBackEvery, "offline devices come back and pull this often (0: only at the end)")
		}},
		{"crash-every", func(fs *pflag.FlagSet) {
			fs.IntVar(&p.CrashEvery, "crash-every", p.CrashEvery, "a crashy device crashes on every Nth non-empty page")
		}},
		{"conns", func(fs *pflag.FlagSet) { fs.IntVar(&c.Conns, "conns", c.Conns, "HTTP connections") }},
		{"pipeline", func(fs *pflag.FlagSet) {
			fs.IntVar(&c.Pipeline, "pipeline", c.Pipeline, "sends over a pool of their own with this many HTTP/1.1 requests in flight per connection (0: sends share --conns, one at a time); a server answers a connection's requests in order, one at a time")
		}},
		{"pipeline-conns", func(fs *pflag.FlagSet) {
			fs.IntVar(&c.PipelineConns, "pipeline-conns", c.PipelineConns, "with --pipeline: connections of the send pool (pulls and acks keep --conns)")
		}},
		{"pipeline-delay", func(fs *pflag.FlagSet) {
			fs.DurationVar(&c.PipelineDelay, "pipeline-delay", c.PipelineDelay, "with --pipeline: a connection waits up to this long to batch requests into one write")
		}},
		{"workers", func(fs *pflag.FlagSet) { fs.IntVar(&pc.Workers, "workers", pc.Workers, "initial send workers") }},
		{"max-workers", func(fs *pflag.FlagSet) {
			fs.IntVar(&pc.MaxWorkers, "max-workers", pc.MaxWorkers, "send workers at most (then sends start late)")
		}},
		{"senders", func(fs *pflag.FlagSet) {
			fs.IntVar(&pc.Senders, "senders", pc.Senders, "queued mode: this many send goroutines fed through a queue the pacer fills at each send's intended time (the wait there counts in the ACK latency); --workers and --max-workers are then not used (0: a goroutine per send in flight)")
		}},
		{"max-queued", func(fs *pflag.FlagSet) {
			fs.IntVar(&pc.MaxQueued, "max-queued", pc.MaxQueued, "with --senders: sends queued at most (then sends start late)")
		}},
		{"late-after", func(fs *pflag.FlagSet) {
			fs.DurationVar(&pc.LateAfter, "late-after", pc.LateAfter, "a send starting this much after its intended time is late")
		}},
		{"grace", func(fs *pflag.FlagSet) {
			fs.DurationVar(&pc.Grace, "grace", pc.Grace, "sends not started by duration+grace are missed")
		}},
		{"spin", func(fs *pflag.FlagSet) {
			fs.DurationVar(&pc.SpinWindow, "spin", pc.SpinWindow, "pacer yields instead of sleeping this long before each send (0: sleep only)")
		}},
		{"timeout", func(fs *pflag.FlagSet) {
			fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "timeout of one HTTP exchange or WebSocket send")
		}},
		{"send-via", func(fs *pflag.FlagSet) {
			fs.StringVar(&c.SendVia, "send-via", c.SendVia, "send transport: http (POST /v1/msg/send) or ws (send frames, WebSockets of their own per sending user)")
		}},
		{"ws-conns-per-user", func(fs *pflag.FlagSet) {
			fs.IntVar(&c.WSConnsPerUser, "ws-conns-per-user", c.WSConnsPerUser, "with --send-via ws: sending WebSockets per user (a server answers one connection's sends in order)")
		}},
		{"retries", func(fs *pflag.FlagSet) {
			fs.IntVar(&c.Retries, "retries", c.Retries, "resends of a send of unknown outcome (timeout, connection error, 5xx), with the same client_msg_id")
		}},
		{"probe-fraction", func(fs *pflag.FlagSet) {
			fs.Float64Var(&c.ProbeFraction, "probe-fraction", c.ProbeFraction, "fraction of ACKed sends whose stored state is read right after the ACK (read-after-ACK, lab route "+client.LabStoredPath+"; 0: off)")
		}},
		{"probe-recipients", func(fs *pflag.FlagSet) {
			fs.IntVar(&c.ProbeRecipients, "probe-recipients", c.ProbeRecipients, "recipients a read-after-ACK probe reads besides the sender")
		}},
		{"content-size", func(fs *pflag.FlagSet) {
			fs.IntVar(&c.ContentSize, "content-size", c.ContentSize, "message body size in bytes")
		}},
		{"pull-limit", func(fs *pflag.FlagSet) { fs.IntVar(&c.PullLimit, "pull-limit", c.PullLimit, "pull page size") }},
		{"ack-every", func(fs *pflag.FlagSet) {
			fs.DurationVar(&c.AckEvery, "ack-every", c.AckEvery, "online devices acknowledge their chain this often")
		}},
		{"settle", func(fs *pflag.FlagSet) {
			fs.DurationVar(&c.Settle, "settle", c.Settle, "wait after the last send before the final drain")
		}},
		{"drain-timeout", func(fs *pflag.FlagSet) {
			fs.DurationVar(&c.DrainTimeout, "drain-timeout", c.DrainTimeout, "bound on the final drain")
		}},
		{"shards", func(fs *pflag.FlagSet) { fs.IntVar(&c.Shards, "shards", c.Shards, "ledger shard files") }},
		{"seed", func(fs *pflag.FlagSet) { fs.Uint64Var(&c.Seed, "seed", c.Seed, "population and traffic seed") }},
		{"ceiling", func(fs *pflag.FlagSet) {
			fs.DurationVar(&c.CeilingFor, "ceiling", c.CeilingFor, "measure the generator's own ceiling on a no-op endpoint this long first (0: skip)")
		}},
		{"run-id", func(fs *pflag.FlagSet) {
			fs.StringVar(&c.RunID, "run-id", c.RunID, "the run's id in every client_msg_id and message body (default: random; for a segment, derived from the seed, shape and population so segments agree: give one unique to the run when the same flags run twice against one server)")
		}},
		{"mix", func(fs *pflag.FlagSet) { c.Mix.RegisterFlags(fs) }},
	}
}

// FlagNames are the names of the flags RegisterFlags offers.
func (c *Config) FlagNames() []string {
	var out []string
	for _, f := range c.flags() {
		out = append(out, f.name)
	}
	return out
}

// RegisterFlags registers c's settings on fs as flags bound to c, each
// defaulting to c's current value (so register a DefaultConfig); names
// limits them to the named ones (all when none). A queued-mode bound of 0
// becomes DefaultMaxQueued first. An unknown name is an error, and then
// nothing is registered.
func (c *Config) RegisterFlags(fs *pflag.FlagSet, names ...string) error {
	all := c.FlagNames()
	for _, n := range names {
		if !slices.Contains(all, n) {
			return fmt.Errorf("%w: no load flag %q (have %v)", ErrInvalid, n, all)
		}
	}
	if c.Pacer.MaxQueued == 0 {
		c.Pacer.MaxQueued = DefaultMaxQueued
	}
	for _, f := range c.flags() {
		if len(names) == 0 || slices.Contains(names, f.name) {
			f.add(fs)
		}
	}
	return nil
}
