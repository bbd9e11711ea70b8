// Package loadgen drives a target server through the lab's HTTP + WebSocket
// contract with open-loop load (loadgen/schedule), simulates a population of
// users with several devices each (online on WebSocket, offline devices that
// come back and pull to the end, crashy devices that lose what they pulled or
// crash before acknowledging), writes every attempt, ACK, delivery and cursor
// to the run's ledger (imlab/ledger), drains every device at the end, takes
// a witness pull of every inbox, reads every inbox from the store of record
// through the server's lab route (the store witness), probes the store
// right after a fraction of the ACKs (read-after-ACK), and writes a JSON run
// summary with per-second figures. The checker (imlab/checker) judges the
// ledger.
//
// It owns the goroutines it starts (pacer workers, one per device, the
// reporter) and stops them all before Run returns. It talks to the server
// only through the targets interface (a driver chosen by targets/drivers
// from Config.Target and Config.Driver) and must not import ref/... nor a
// driver's own packages.
package loadgen

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"imlab/loadgen/clientmix"
	"imlab/loadgen/schedule"
	"imlab/loadgen/summary"
	"imlab/targets"
	"imlab/targets/drivers"
)

// ErrInvalid marks a bad configuration.
var ErrInvalid = errors.New("loadgen: invalid")

// Named limits.
const (
	MaxUsers          = 1_000_000
	MaxDevicesPerUser = 16
	MaxGroupSize      = 500
	MaxGroups         = 100_000
	MaxContentSize    = 4096
	MaxUID            = 1<<31 - 1
	maxRetries        = 10
	// DefaultProbeFraction is the share of ACKed sends a load run probes
	// right after the ACK (Config.ProbeFraction).
	DefaultProbeFraction = 0.02
	// MaxProbeRecipients bounds the recipients a probe reads besides the
	// sender (a group's are chosen by the tick).
	MaxProbeRecipients = 16
	// MaxWSSenders bounds the sending WebSockets of a run with --send-via
	// ws (WSConnsPerUser per sending uid).
	MaxWSSenders = 50_000
	// MaxWSConnsPerUser bounds WSConnsPerUser.
	MaxWSConnsPerUser = 16
	// MaxPipelineConns bounds PipelineConns.
	MaxPipelineConns = 1024
	// MaxPipeline and MaxPipelineDelay bound Pipeline and PipelineDelay
	// (the reference driver's HTTP/1.1 pipelining).
	MaxPipeline      = 4096
	MaxPipelineDelay = 10 * time.Millisecond
	// MaxRunIDLen bounds Config.RunID: "<run id>-<tick>" must fit the
	// contract's 64-byte client_msg_id.
	MaxRunIDLen = 40
)

// DefaultProcs is the GOMAXPROCS imlab load runs the generator with: twice
// the CPUs. With as many Ps as cores, a P busy with a long piece of work
// (a batch of pipelined answers, the target's handler when it shares the
// process) holds up every runnable goroutine queued behind it, the pacer
// included, for as long as that work runs; with more Ps than cores the
// operating system time-slices their threads and the pacer's thread gets a
// core soon after its timer fires. It costs some maximum rate (more thread
// switches); RESULTS.md has both figures from one run.
func DefaultProcs() int { return 2 * runtime.NumCPU() }

// Send transports.
const (
	ViaHTTP = "http" // POST /v1/msg/send on the fasthttp pool
	ViaWS   = "ws"   // send frames on one WebSocket per sending uid
)

// SizeWeight is one bucket of the group size distribution.
type SizeWeight struct {
	Size   int
	Weight float64
}

// ParseSizes reads "3:50,20:30,100:15,500:5" (size:weight,...).
func ParseSizes(s string) ([]SizeWeight, error) {
	var out []SizeWeight
	for _, p := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(strings.TrimSpace(p), ":")
		n, err1 := strconv.Atoi(a)
		w, err2 := strconv.ParseFloat(b, 64)
		if !ok || err1 != nil || err2 != nil || n < 2 || n > MaxGroupSize || w <= 0 {
			return nil, fmt.Errorf("%w: group size %q: want size:weight with size in 2..%d", ErrInvalid, p, MaxGroupSize)
		}
		out = append(out, SizeWeight{n, w})
	}
	return out, nil
}

// Population describes the simulated users.
type Population struct {
	Users          int
	DevicesPerUser int
	UIDBase        uint64 // uids are UIDBase .. UIDBase+Users-1; use a range fresh to the server
	GroupBase      uint64 // group ids are GroupBase .. GroupBase+Groups-1
	// Fractions of devices; the rest are Offline.
	Online, Crashy float64
	Groups         int
	GroupSizes     []SizeWeight
	GroupShare     float64 // fraction of sends that go to a group
	// ComeBackEvery: offline and crashy devices come back and pull to the
	// end this often (each with its own phase); they always do at the end.
	ComeBackEvery time.Duration
	// CrashEvery: a crashy device crashes on every Nth non-empty page,
	// alternately before storing and before acknowledging.
	CrashEvery int
}

// Config of a run.
type Config struct {
	// Target is the server's URL; its scheme names the driver
	// (targets.Config.Target: ref+http:// or http:// for the reference
	// server, tinode+ws:// for Tinode).
	Target string
	// Driver, when set, names the driver whatever the scheme.
	Driver string
	// TargetOptions are the driver's own settings (targets.Config.Options,
	// e.g. the tinode driver's apikey).
	TargetOptions map[string]string
	Secret        string
	Shape         schedule.Shape
	Duration      time.Duration
	Pop           Population
	Pacer         schedule.Config
	// Conns is the HTTP connection pool; in the pacer's queued mode
	// (Pacer.Senders > 0) the sends get a second pool of Conns of their
	// own, so that senders waiting on a slow server never hold the
	// devices' connections, nor the pulls theirs.
	Conns int
	// Pipeline: sends go over a pool of their own, PipelineConns
	// connections with up to Pipeline HTTP/1.1 requests in flight each (0:
	// sends share the Conns pool, one request at a time per connection);
	// see targets/ref/client.Config.Pipeline for what it costs a server. Pulls, acks,
	// group creation and the witness always use the Conns pool, so they
	// never queue behind sends.
	Pipeline      int
	PipelineConns int
	// PipelineDelay: targets/ref/client.Config.PipelineDelay.
	PipelineDelay time.Duration
	Timeout       time.Duration // one HTTP exchange
	// Retries: resends of a send whose outcome is unknown (a timeout, a
	// connection error, a 5xx), with the same client_msg_id, as a real
	// client does; a server must answer them with the first message.
	Retries int
	// ProbeFraction of the ACKed sends get a read-after-ACK probe: right
	// after the ACK the store of record is read (lab route GET
	// /v1/lab/stored) for the sender and up to ProbeRecipients recipients,
	// and the checker holds it to what the server's ack policy promises.
	// 0 turns the probes off (the verdict then names the check as not
	// made).
	ProbeFraction   float64
	ProbeRecipients int
	// SendVia is ViaHTTP or ViaWS. Over WebSocket, each sending uid has one
	// connection of its own, device id device.SenderDID (not a member of the
	// population, so it never takes a receiving device's connection); its
	// answers are matched to sends by the client_msg_id the send_ack and
	// error frames echo.
	SendVia string
	// WSConnsPerUser: sending WebSockets per uid with ViaWS (device ids
	// device.SenderDID-0..n-1); a tick uses connection tick mod n. A server answers
	// one connection's send frames one at a time, so this bounds the sends
	// in flight per user.
	WSConnsPerUser int
	// ContentSize pads message bodies to at least this many bytes.
	ContentSize  int
	PullLimit    int
	AckEvery     time.Duration // how often an online device acknowledges its chain
	Settle       time.Duration // wait after the last send before the final drain
	DrainTimeout time.Duration
	Shards       int // ledger shards
	RunDir       string
	Seed         uint64
	// Segment: this process drives one part of the run (see Segment); the
	// zero value is the whole run.
	Segment summary.Segment
	// RunID names the run in every client_msg_id and message body. Empty:
	// a random id for a whole run; for a segment, one derived from the
	// run's Fingerprint, so that segments started apart agree (give one
	// explicitly, unique to the run, when the same flags are run twice
	// against one server).
	RunID string
	// CeilingFor: measure the generator's own ceiling against an in-process
	// no-op endpoint for this long before the run (0 skips).
	CeilingFor time.Duration
	// Progress receives a line per second (nil: none).
	Progress io.Writer
	// InProcess names what else of the run runs inside this process beside
	// the generator (a scenario run's in-process server processes, embedded
	// backends, Kafka, fault proxies): the summary's LabCPU says its figure
	// is the whole process's. Empty: the generator is alone (imlab load). Not
	// part of the config a segment child is handed (json "-"): the child
	// runs alone.
	InProcess []string `json:"-"`
	// Mix is what devices do besides sending and pulling their inbox (the
	// zero Mix: nothing else, as before it existed).
	Mix clientmix.Mix
	// OnSecond, when set, is called by the reporter with each second's
	// timeline row as it is made (a capacity search watches a step with
	// it and cancels the run's context when the SLO is clearly broken). It
	// must return quickly: the next second waits for it. Not part of the
	// config a segment child is handed (json "-").
	OnSecond func(summary.Second) `json:"-"`
	// OnStart, when set, is called once with the schedule's start (the
	// ledger's time base) after the population is provisioned and the
	// target warmed, before the first send: a fault schedule that must
	// fall inside the load starts from it. It must return quickly. Not
	// part of the config a segment child is handed (json "-").
	OnStart func(time.Time) `json:"-"`
	// Unregistered: the devices make no contact with the target before
	// the load (device.Fleet.Register is skipped), so an offline device is
	// first heard of at its first visit, as with generators that did not
	// register devices. Tests reproduce with it what such a device does to
	// the judgement. Not part of the config a segment child is handed
	// (json "-"): every segment registers.
	Unregistered bool `json:"-"`
}

// DefaultConfig returns a small, valid run against target.
func DefaultConfig(target, secret, runDir string) Config {
	return Config{
		Target: target, Secret: secret, RunDir: runDir,
		Shape:    schedule.Constant{PerSec: 1000},
		Duration: 10 * time.Second,
		Pop: Population{
			Users: 100, DevicesPerUser: 2, UIDBase: 1, GroupBase: 1,
			Online: 0.6, Crashy: 0.1, Groups: 10,
			GroupSizes: []SizeWeight{{3, 50}, {20, 30}, {100, 15}, {500, 5}},
			GroupShare: 0.2, ComeBackEvery: 5 * time.Second, CrashEvery: 2,
		},
		Pacer:           schedule.DefaultConfig(),
		Conns:           256,
		PipelineConns:   2,
		Timeout:         5 * time.Second,
		Retries:         2,
		ProbeFraction:   DefaultProbeFraction,
		ProbeRecipients: 3,
		SendVia:         ViaHTTP,
		WSConnsPerUser:  4,
		ContentSize:     64,
		PullLimit:       200,
		AckEvery:        100 * time.Millisecond,
		Settle:          2 * time.Second,
		DrainTimeout:    60 * time.Second,
		Shards:          8,
		Seed:            1,
		CeilingFor:      2 * time.Second,
	}
}

// Validate checks every limit.
func (c Config) Validate() error {
	p := c.Pop
	if err := c.Mix.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := c.Pacer.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	switch {
	case c.Shape == nil:
		return fmt.Errorf("%w: no rate shape", ErrInvalid)
	case c.Duration <= 0 || c.Duration > 24*time.Hour:
		return fmt.Errorf("%w: duration must be in (0, 24h]", ErrInvalid)
	case p.Users < 2 || p.Users > MaxUsers:
		return fmt.Errorf("%w: users %d must be in 2..%d", ErrInvalid, p.Users, MaxUsers)
	case p.DevicesPerUser < 1 || p.DevicesPerUser > MaxDevicesPerUser:
		return fmt.Errorf("%w: devices per user %d must be in 1..%d", ErrInvalid, p.DevicesPerUser, MaxDevicesPerUser)
	case p.UIDBase < 1 || p.UIDBase+uint64(p.Users)-1 > MaxUID:
		return fmt.Errorf("%w: uids %d..%d must be in 1..%d", ErrInvalid, p.UIDBase, p.UIDBase+uint64(p.Users)-1, MaxUID)
	case p.Online < 0 || p.Crashy < 0 || p.Online+p.Crashy > 1:
		return fmt.Errorf("%w: online and crashy fractions must be >= 0 and sum to <= 1", ErrInvalid)
	case p.Groups < 0 || p.Groups > MaxGroups:
		return fmt.Errorf("%w: groups %d must be in 0..%d", ErrInvalid, p.Groups, MaxGroups)
	case p.Groups > 0 && (p.GroupBase < 1 || len(p.GroupSizes) == 0):
		return fmt.Errorf("%w: groups need a group base >= 1 and a size distribution", ErrInvalid)
	case p.GroupShare < 0 || p.GroupShare > 1 || (p.GroupShare > 0 && p.Groups == 0):
		return fmt.Errorf("%w: group share must be in 0..1 and needs groups", ErrInvalid)
	case p.ComeBackEvery < 0:
		return fmt.Errorf("%w: come-back period must be >= 0", ErrInvalid)
	case p.CrashEvery < 1:
		return fmt.Errorf("%w: crash-every must be >= 1", ErrInvalid)
	case c.SendVia != ViaHTTP && c.SendVia != ViaWS:
		return fmt.Errorf("%w: send-via %q must be %s or %s", ErrInvalid, c.SendVia, ViaHTTP, ViaWS)
	case c.WSConnsPerUser < 1 || c.WSConnsPerUser > MaxWSConnsPerUser:
		return fmt.Errorf("%w: ws conns per user %d must be in 1..%d", ErrInvalid, c.WSConnsPerUser, MaxWSConnsPerUser)
	case c.SendVia == ViaWS && p.Users*c.WSConnsPerUser > MaxWSSenders:
		return fmt.Errorf("%w: sending over WebSocket opens %d connections per user: at most %d connections", ErrInvalid, c.WSConnsPerUser, MaxWSSenders)
	case c.Pipeline < 0 || c.Pipeline > MaxPipeline:
		return fmt.Errorf("%w: pipeline %d must be in 0..%d", ErrInvalid, c.Pipeline, MaxPipeline)
	case c.PipelineDelay < 0 || c.PipelineDelay > MaxPipelineDelay:
		return fmt.Errorf("%w: pipeline delay %s must be in 0..%s", ErrInvalid, c.PipelineDelay, MaxPipelineDelay)
	case c.Pipeline > 0 && (c.PipelineConns < 1 || c.PipelineConns > MaxPipelineConns):
		return fmt.Errorf("%w: pipeline conns %d must be in 1..%d", ErrInvalid, c.PipelineConns, MaxPipelineConns)
	case c.ProbeFraction < 0 || c.ProbeFraction > 1:
		return fmt.Errorf("%w: probe fraction %g must be in 0..1", ErrInvalid, c.ProbeFraction)
	case c.ProbeRecipients < 0 || c.ProbeRecipients > MaxProbeRecipients:
		return fmt.Errorf("%w: probe recipients %d must be in 0..%d", ErrInvalid, c.ProbeRecipients, MaxProbeRecipients)
	case c.Retries < 0 || c.Retries > maxRetries:
		return fmt.Errorf("%w: retries must be in 0..%d", ErrInvalid, maxRetries)
	case c.ContentSize < 0 || c.ContentSize > MaxContentSize:
		return fmt.Errorf("%w: content size must be in 0..%d", ErrInvalid, MaxContentSize)
	case c.PullLimit < 1 || c.PullLimit > targets.MaxPullLimit:
		return fmt.Errorf("%w: pull limit must be in 1..%d", ErrInvalid, targets.MaxPullLimit)
	case c.AckEvery <= 0 || c.Settle < 0 || c.DrainTimeout <= 0 || c.CeilingFor < 0:
		return fmt.Errorf("%w: ack-every and drain timeout must be > 0, settle and ceiling >= 0", ErrInvalid)
	case c.RunDir == "":
		return fmt.Errorf("%w: no run directory", ErrInvalid)
	case len(c.RunID) > MaxRunIDLen || strings.ContainsAny(c.RunID, ": \t\n\"\\"):
		return fmt.Errorf("%w: run id %q: at most %d characters, no ':', blanks or quotes", ErrInvalid, c.RunID, MaxRunIDLen)
	}
	if err := c.Segment.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if !c.Segment.Whole() && c.Segment.Count > p.Users {
		return fmt.Errorf("%w: %d segments of %d users: every segment needs a user", ErrInvalid, c.Segment.Count, p.Users)
	}
	for _, sw := range p.GroupSizes {
		if sw.Size < 2 || sw.Size > MaxGroupSize || sw.Weight <= 0 {
			return fmt.Errorf("%w: group size %d weight %g", ErrInvalid, sw.Size, sw.Weight)
		}
	}
	if err := drivers.Check(c.targetConfig()); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// targetConfig is the driver's configuration: the sends get a pool of
// their own when pipelined, or in the pacer's queued mode (its senders
// would otherwise hold every connection of a shared pool while the server
// queues their sends, and the devices' pulls would take the rest in turn
// with them).
func (c Config) targetConfig() targets.Config {
	tc := targets.Config{Target: c.Target, Driver: c.Driver, Secret: c.Secret, Conns: c.Conns, Timeout: c.Timeout, Options: c.TargetOptions}
	switch {
	case c.SendVia != ViaHTTP:
	case c.Pipeline > 0:
		tc.SendPool = targets.SendPool{Own: true, Conns: c.PipelineConns, Pipeline: c.Pipeline, PipelineDelay: c.PipelineDelay}
	case c.Pacer.Senders > 0:
		tc.SendPool = targets.SendPool{Own: true, Conns: c.Conns}
	}
	return tc
}
