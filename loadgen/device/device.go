package loadgen

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"time"

	"imlab/ledger"
	"imlab/targets"
)

// device is one simulated (uid, did). Its goroutine (run) owns all its
// state but ws, which an online device shares with the run's acker
// (acker.go).
type device struct {
	r     *runner
	idx   uint32
	uid   uint64
	did   string
	kind  ledger.DeviceKind
	sess  targets.Session
	phase time.Duration

	chain    uint64 // every inbox seq <= chain is stored (as far as the device knows)
	hasChain bool
	acked    uint64
	pages    int
	crashes  int

	// The client mix (Mix): the device's own random choices and what it
	// knows of its conversations.
	rng   *mrand.Rand
	convs map[uint64]*devConv

	ws wsState
}

// frameQueue bounds the frames read ahead of the device.
const frameQueue = 1024

func (d *device) shard() *ledger.Shard { return d.r.led.Shard(int(d.idx)) }

func (d *device) now() time.Duration { return time.Since(d.r.start) }

func (d *device) run(ctx context.Context, drain <-chan struct{}) {
	if !d.r.caps.Inbox {
		d.convRun(ctx, drain)
		return
	}
	if d.kind == ledger.Online {
		d.online(ctx, drain)
		return
	}
	d.puller(ctx, drain)
}

// store records a message the device keeps.
func (d *device) store(m *targets.Msg, via ledger.Via) {
	tick, intended, ours := d.r.parseContent(m.Content)
	at := d.now()
	if ours && m.Seq > d.chain {
		d.r.e2e.stored(d.r.m.lane(int(d.idx)), tick, at-intended)
	}
	d.saw(m)
	d.shard().Delivery(ledger.Delivery{Dev: d.idx, Via: via, Seq: m.Seq, MsgID: m.MsgID, ConvID: m.ConvID, ConvSeq: m.ConvSeq, Tick: tick, At: at})
	d.r.m.deliv.Add(1)
}

// page pulls one page (re-pulling with full=1 if the server truncated it).
func (d *device) page(ctx context.Context, explicit bool) (targets.PullPage, error) {
	o := targets.PullOpts{Limit: d.r.cfg.PullLimit, Cursor: d.chain, UseCursor: explicit}
	pr, err := d.r.pull(ctx, d.sess, o)
	if err == nil && pr.Truncated {
		o.Full = true
		pr, err = d.r.pull(ctx, d.sess, o)
	}
	return pr, err
}

// catchUp pulls from the chain's end (or, with no chain yet, from the
// stored cursor) until the server has no more, storing in seq order.
// With until > 0 it stops once the chain reaches until.
func (d *device) catchUp(ctx context.Context, until uint64) error {
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
func (d *device) ackHTTP(seq uint64) {
	if seq == 0 || seq <= d.acked {
		return
	}
	_, err := d.sess.Ack(context.Background(), seq)
	st := ledger.Accepted
	if err != nil {
		st = ledger.Refused
		if targets.StatusOf(err) != 409 {
			d.r.fail("device %d ack %d: %v", d.idx, seq, err)
		}
	} else {
		d.acked = seq
	}
	d.shard().Cursor(ledger.Cursor{Dev: d.idx, Seq: seq, Status: st, At: d.now()})
}

// online keeps a WebSocket open, stores frames in chain order (filling
// gaps by pulling), acknowledges its chain every AckEvery (through the
// run's acker), reconnects and pulls after a close, and on drain pulls to
// the end and acknowledges. The device's goroutine reads the connection
// itself; the acker ends the read at the drain or the end of the run.
func (d *device) online(ctx context.Context, drain <-chan struct{}) {
	a := d.r.ackerOf(ctx, drain)
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		select {
		case <-drain:
			d.final(ctx)
			return
		default:
		}
		ws, err := d.sess.Connect(ctx)
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
var errStopped = errors.New("loadgen: device stopped")

// connected catches up, then reads and handles frames until the
// connection ends (closed by the server, after a failed acknowledgement,
// or by the acker at the drain or the end of the run). The device is busy
// (attach) until the catch-up is done.
func (d *device) connected(ctx context.Context, ws targets.Conn, a *acker) {
	if err := d.catchUp(ctx, 0); err != nil {
		if ctx.Err() == nil {
			d.r.fail("device %d catch-up: %v", d.idx, err)
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
func (d *device) frame(ctx context.Context, f *targets.Push) bool {
	if f.PrevSeq > d.chain {
		if err := d.catchUp(ctx, f.Msg.Seq); err != nil {
			if ctx.Err() == nil {
				d.r.fail("device %d gap fill: %v", d.idx, err)
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

// final pulls to the end from the chain and acknowledges it.
func (d *device) final(ctx context.Context) {
	if err := d.catchUp(ctx, 0); err != nil {
		d.r.fail("device %d final drain: %v", d.idx, err)
		return
	}
	d.ackHTTP(d.chain)
}

// puller comes back every ComeBackEvery (from its own phase) and at the
// drain, and pulls to the end from its stored cursor.
func (d *device) puller(ctx context.Context, drain <-chan struct{}) {
	every := d.r.cfg.Pop.ComeBackEvery
	next := d.phase
	for {
		var wake <-chan time.Time
		if every > 0 {
			wake = time.After(time.Until(d.r.start.Add(next)))
		}
		select {
		case <-wake:
			d.visit(ctx, false)
			d.cameOnline(ctx)
			next += every
		case <-drain:
			d.visit(ctx, true)
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
func (d *device) visit(ctx context.Context, final bool) {
	crashes := 0
	for ctx.Err() == nil {
		pr, err := d.page(ctx, false)
		if err != nil {
			if ctx.Err() == nil {
				d.r.fail("device %d pull: %v", d.idx, err)
			}
			return
		}
		if len(pr.Msgs) > 0 && d.kind == ledger.Crashy && !final && crashes < maxCrashesPerVisit {
			d.pages++
			if d.pages%d.r.cfg.Pop.CrashEvery == 0 {
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
