package device

import (
	"context"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"imlab/ledger"
	"imlab/loadgen/clientmix"
	"imlab/loadgen/summary"
	"imlab/targets"
)

// Env is what the devices of a run are given: the run's settings and the
// generator's hooks.
type Env struct {
	// PullLimit is the page size of an inbox pull.
	PullLimit int
	// ComeBackEvery: an offline device comes back this often (from its
	// own phase); CrashEvery: a crashy device crashes on every
	// CrashEvery-th non-empty page.
	ComeBackEvery time.Duration
	CrashEvery    int
	// AckEvery: an online device acknowledges its chain this long after
	// it first grew past the last acknowledgement.
	AckEvery time.Duration
	// Timeout bounds one request; one action of the mix (all its tries)
	// may take twice that.
	Timeout time.Duration
	Mix     clientmix.Mix
	Caps    targets.Capabilities
	// Parse reads a message's content: the send's tick and intended time,
	// ours false when another run (or no run) sent it.
	Parse func(content string) (tick uint64, intended time.Duration, ours bool)
	// Delivered is told of every message a device stored, late after its
	// send's intended time; e2e says whether it is the device's first
	// copy of one of this run's sends (the end-to-end latency).
	Delivered func(dev uint32, tick uint64, late time.Duration, e2e bool)
	// Pull reads one inbox page, waiting out refusals to retry.
	Pull func(ctx context.Context, s targets.Session, o targets.PullOpts) (targets.PullPage, error)
	// Fail records a run error.
	Fail func(format string, args ...any)
}

// Fleet is the devices of one run and what they share: the Env, the
// acker of the online devices, the client mix's counters and the
// senders' revokes.
type Fleet struct {
	env Env
	// led and start: the run's ledger and time zero (every time in the
	// ledger is from it), given by Start.
	led   *ledger.Ledger
	start time.Time
	mixN  mixCounters
	// finalMissed counts the devices of a target without an inbox whose
	// final catch-up failed (convVisit).
	finalMissed atomic.Int64
	// online are the online devices Start ran; the acker (acker.go),
	// started by the first of them, acknowledges their chains and ends
	// their reads at the drain.
	online  []*Device
	ackOnce sync.Once
	acks    *acker
	rev     *revoker // nil unless StartRevoker ran
}

// NewFleet is a fleet of no device yet.
func NewFleet(env Env) *Fleet { return &Fleet{env: env} }

// New makes device idx, (uid, did) of the given kind talking through
// sess; its random choices come from seed and idx, and an offline
// device's visits are phase apart from the run's start.
func (f *Fleet) New(idx uint32, uid uint64, did string, kind ledger.DeviceKind, sess targets.Session, seed uint64, phase time.Duration) *Device {
	return &Device{f: f, Idx: idx, UID: uid, DID: did, Kind: kind, Sess: sess, phase: phase,
		rng: mrand.New(mrand.NewPCG(seed, uint64(idx)^0x5eed)), convs: map[uint64]*devConv{}}
}

// Start runs each of devs on a goroutine of its own until it has drained
// (once drain closes) or ctx ends; wg counts them, and each calls done as
// it returns. It first writes the contacts Register made. When the mix revokes, it starts the revokers too
// (StopRevoker ends them). It records into led, from start, and is called
// once, before the first send.
func (f *Fleet) Start(ctx context.Context, drain <-chan struct{}, led *ledger.Ledger, start time.Time, devs []*Device, wg *sync.WaitGroup, done func()) {
	f.led, f.start = led, start
	f.writeContacts(devs)
	for _, d := range devs {
		if d.Kind == ledger.Online {
			f.online = append(f.online, d)
		}
	}
	if f.env.Mix.Revoke > 0 {
		f.startRevoker(ctx)
	}
	for _, d := range devs {
		wg.Add(1)
		go func() { defer wg.Done(); d.run(ctx, drain); done() }()
	}
}

// FinalMissed counts the devices of a target without an inbox that could
// not take what they missed at the drain.
func (f *Fleet) FinalMissed() int64 { return f.finalMissed.Load() }

// MixSummary counts the client mix's actions so far.
func (f *Fleet) MixSummary() *summary.MixSummary { return f.mixN.summary(f.env.Mix) }

// Chain is the highest inbox seq up to which the device holds every
// message; read it only once the device's goroutine has returned.
func (d *Device) Chain() uint64 { return d.chain }
