// Package device owns the devices a load run simulates: per device an
// inbox puller or a WebSocket connection that stores what it gets in its
// chain order (filling gaps by pulling), acknowledges, crashes and comes
// back; on a target without an inbox a push connection that takes what it
// missed first; the acker of the online devices; the client mix's actions
// (conversation pull, history page, revoke, delete, clear, mark read) and
// the senders' revokes; the WebSocket connections that carry sends; the
// registration that makes every device known to a target with an inbox
// before the load (Register). Every first contact, delivery, cursor and
// action goes into the run's ledger.
//
// It must not choose what is sent or when (the generator's schedule), read
// a witness, or judge; it must not import the generator (loadgen).
package device

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"time"

	"imlab/ledger"
	"imlab/targets"
)

// Device is one simulated (uid, did). Its goroutine (run) owns all its
// state but ws, which an online device shares with the fleet's acker
// (acker.go). Idx, UID, DID, Kind and Sess are set by Fleet.New and only
// read after.
type Device struct {
	f     *Fleet
	Idx   uint32
	UID   uint64
	DID   string
	Kind  ledger.DeviceKind
	Sess  targets.Session
	phase time.Duration

	chain    uint64 // every inbox seq <= chain is stored (as far as the device knows)
	hasChain bool
	acked    uint64
	pages    int
	crashes  int
	contact  time.Time // when Register's pull was answered (zero: not registered)

	// The client mix: the device's own random choices and what it knows
	// of its conversations.
	rng   *mrand.Rand
	convs map[uint64]*devConv

	ws wsState
}

// frameQueue bounds the frames read ahead of the device.
const frameQueue = 1024

func (d *Device) shard() *ledger.Shard { return d.f.led.Shard(int(d.Idx)) }

func (d *Device) now() time.Duration { return time.Since(d.f.start) }

func (d *Device) run(ctx context.Context, drain <-chan struct{}) {
	if !d.f.env.Caps.Inbox {
		d.convRun(ctx, drain)
		return
	}
	if d.Kind == ledger.Online {
		d.online(ctx, drain)
		return
	}
	d.puller(ctx, drain)
}

// store records a message the device keeps.
func (d *Device) store(m *targets.Msg, via ledger.Via) {
	tick, intended, ours := d.f.env.Parse(m.Content)
	at := d.now()
	d.saw(m)
	d.shard().Delivery(ledger.Delivery{Dev: d.Idx, Via: via, Seq: m.Seq, MsgID: m.MsgID, ConvID: m.ConvID, ConvSeq: m.ConvSeq, Tick: tick, At: at})
	d.f.env.Delivered(d.Idx, tick, at-intended, ours && m.Seq > d.chain)
}

// page pulls one page (re-pulling with full=1 if the server truncated it).
func (d *Device) page(ctx context.Context, explicit bool) (targets.PullPage, error) {
	o := targets.PullOpts{Limit: d.f.env.PullLimit, Cursor: d.chain, UseCursor: explicit}
	pr, err := d.f.env.Pull(ctx, d.Sess, o)
	if err == nil && pr.Truncated {
		o.Full = true
		pr, err = d.f.env.Pull(ctx, d.Sess, o)
	}
	return pr, err
}

// catchUp pulls from the chain's end (or, with no chain yet, from the
// stored cursor) until the server has no more, storing in seq order.
// With until > 0 it stops once the chain reaches until.
func (d *Device) catchUp(ctx context.Context, until uint64) error {
	for {
		pr, err := d.page(ctx, d.hasChain)
		if err != nil {
			return err
		}
		for i := range pr.Msgs {
			m := &pr.Msgs[i]
			if d.hasChain && m.Seq <= d.chain {
				continue
			}
			d.store(m, ledger.Pull)
			d.chain = max(d.chain, m.Seq)
		}
		if !d.hasChain {
			d.hasChain = true
			d.chain = max(d.chain, pr.NextCursor)
		}
		if !pr.HasMore || (until > 0 && d.chain >= until) {
			return nil
		}
	}
}

// ackHTTP acknowledges the chain over HTTP and records the answer.
func (d *Device) ackHTTP(seq uint64) {
	if seq == 0 || seq <= d.acked {
		return
	}
	_, err := d.Sess.Ack(context.Background(), seq)
	st := ledger.Accepted
	if err != nil {
		st = ledger.Refused
		if targets.StatusOf(err) != 409 {
			d.f.env.Fail("device %d ack %d: %v", d.Idx, seq, err)
		}
	} else {
		d.acked = seq
	}
	d.shard().Cursor(ledger.Cursor{Dev: d.Idx, Seq: seq, Status: st, At: d.now()})
}

// online keeps a WebSocket open, stores frames in chain order (filling
// gaps by pulling), acknowledges its chain every AckEvery (through the
// run's acker), reconnects and pulls after a close, and on drain pulls to
// the end and acknowledges. The device's goroutine reads the connection
// itself; the acker ends the read at the drain or the end of the run.
func (d *Device) online(ctx context.Context, drain <-chan struct{}) {
	a := d.f.ackerOf(ctx, drain)
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		select {
		case <-drain:
			d.Final(ctx)
			return
		default:
		}
		ws, err := d.Sess.Connect(ctx)
		if err != nil {
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(backoff*2, time.Second)
			continue
		}
		backoff = 10 * time.Millisecond
		if d.attach(ws) {
			d.connected(ctx, ws, a)
			d.detach()
		}
	}
}

// errStopped is a connection closed by the acker at the drain or the end.
var errStopped = errors.New("device: stopped")

// connected catches up, then reads and handles frames until the
// connection ends (closed by the server, after a failed acknowledgement,
// or by the acker at the drain or the end of the run). The device is busy
// (attach) until the catch-up is done.
func (d *Device) connected(ctx context.Context, ws targets.Conn, a *acker) {
	if err := d.catchUp(ctx, 0); err != nil {
		if ctx.Err() == nil {
			d.f.env.Fail("device %d catch-up: %v", d.Idx, err)
		}
		return
	}
	d.cameOnline(ctx)
	if d.idle(a) != nil {
		return
	}
	for {
		f, err := ws.Recv(time.Time{})
		if err != nil {
			return // closed by the server (slow, restart): reconnect and pull; or stopped
		}
		if f.Type != targets.PushMsg || f.Msg.Seq <= d.chain {
			continue // not a message, or one already stored
		}
		d.busy()
		if !d.frame(ctx, &f) || d.idle(a) != nil {
			return
		}
	}
}

// frame stores a pushed message in chain order, filling a gap by pulling
// first; false when the gap fill failed.
func (d *Device) frame(ctx context.Context, f *targets.Push) bool {
	if f.PrevSeq > d.chain {
		if err := d.catchUp(ctx, f.Msg.Seq); err != nil {
			if ctx.Err() == nil {
				d.f.env.Fail("device %d gap fill: %v", d.Idx, err)
			}
			return false
		}
		if f.Msg.Seq <= d.chain {
			return true
		}
	}
	d.store(&f.Msg, ledger.Push)
	d.chain = f.Msg.Seq
	d.pushed(ctx, &f.Msg)
	return true
}

// Final pulls to the end from the chain and acknowledges it. The fleet's
// drain calls it, and so may the generator once every device's goroutine
// has returned (drain rounds).
func (d *Device) Final(ctx context.Context) {
	if err := d.catchUp(ctx, 0); err != nil {
		d.f.env.Fail("device %d final drain: %v", d.Idx, err)
		return
	}
	d.ackHTTP(d.chain)
}

// puller comes back every ComeBackEvery (from its own phase) and at the
// drain, and pulls to the end from its stored cursor.
func (d *Device) puller(ctx context.Context, drain <-chan struct{}) {
	d.comeBack(ctx, drain, d.visit)
}

// comeBack is an offline device's life: a visit every ComeBackEvery (from
// its own phase), each followed by what a device coming online does, and
// a last one at the drain.
func (d *Device) comeBack(ctx context.Context, drain <-chan struct{}, visit func(ctx context.Context, final bool)) {
	every := d.f.env.ComeBackEvery
	next := d.phase
	for {
		var wake <-chan time.Time
		if every > 0 {
			wake = time.After(time.Until(d.f.start.Add(next)))
		}
		select {
		case <-wake:
			visit(ctx, false)
			d.cameOnline(ctx)
			next += every
		case <-drain:
			visit(ctx, true)
			return
		case <-ctx.Done():
			return
		}
	}
}

// maxCrashesPerVisit bounds a crashy device's restarts within one visit.
const maxCrashesPerVisit = 2

// visit pulls pages from the stored cursor, storing then acknowledging
// each. A crashy device, on every CrashEvery-th non-empty page (not during
// the final drain), crashes: alternately before storing the page (it must
// get it again) and after storing but before acknowledging (duplicates
// follow). A crash restarts the device, which pulls from the stored cursor.
func (d *Device) visit(ctx context.Context, final bool) {
	crashes := 0
	for ctx.Err() == nil {
		pr, err := d.page(ctx, false)
		if err != nil {
			if ctx.Err() == nil {
				d.f.env.Fail("device %d pull: %v", d.Idx, err)
			}
			return
		}
		if len(pr.Msgs) > 0 && d.Kind == ledger.Crashy && !final && crashes < maxCrashesPerVisit {
			d.pages++
			if d.pages%d.f.env.CrashEvery == 0 {
				crashes++
				d.crashes++
				if d.crashes%2 == 0 {
					for i := range pr.Msgs {
						d.store(&pr.Msgs[i], ledger.Pull)
						d.chain = max(d.chain, pr.Msgs[i].Seq)
					}
				}
				continue
			}
		}
		for i := range pr.Msgs {
			d.store(&pr.Msgs[i], ledger.Pull)
			d.chain = max(d.chain, pr.Msgs[i].Seq)
		}
		if len(pr.Msgs) > 0 {
			d.ackHTTP(pr.NextCursor)
		}
		if !pr.HasMore {
			return
		}
	}
}
