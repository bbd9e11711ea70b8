package device

import (
	"context"
	"errors"
	"time"

	"imlab/ledger"
	"imlab/targets"
)

// This file holds the devices and the end of a run on a target without a
// per-user inbox (Capabilities.Inbox false, e.g. Tinode): no pull, no
// cursor, no inbox witness. A device is a push connection whose driver
// hands out first what the device missed (its conversations' history
// above what it was handed before), then the pushes; the conversation log
// is read whole at the end by the driver (the witness's ConvLog).

// convRun runs a device of a target without an inbox: an online device
// stays connected (reconnecting after a close); the others connect every
// ComeBackEvery (from their own phase) and take what they missed; all
// take what they missed at the drain. A crashy device behaves as an
// offline one: without a cursor there is no acknowledgement to crash
// around.
func (d *Device) convRun(ctx context.Context, drain <-chan struct{}) {
	if d.Kind == ledger.Online {
		d.convOnline(ctx, drain)
		return
	}
	d.comeBack(ctx, drain, d.convVisit)
}

// convStore records a message the device was handed (Seq 0: no inbox).
func (d *Device) convStore(m *targets.Msg, via ledger.Via) {
	tick, intended, ours := d.f.env.Parse(m.Content)
	at := d.now()
	d.saw(m)
	d.shard().Delivery(ledger.Delivery{Dev: d.Idx, Via: via, MsgID: m.MsgID, ConvID: m.ConvID, ConvSeq: m.ConvSeq, Tick: tick, At: at})
	d.f.env.Delivered(d.Idx, tick, at-intended, ours)
}

// maxFinalVisits bounds the tries of a device's final catch-up on a target
// without an inbox (DrainTimeout bounds their time).
const maxFinalVisits = 10

// convVisit connects, takes everything the device missed, and leaves. The
// final visit is tried again after a failure (a server slow to answer the
// logins of every device at once): a device that misses its final
// catch-up leaves messages it never got.
func (d *Device) convVisit(ctx context.Context, final bool) {
	backoff := 50 * time.Millisecond
	for try := 1; ; try++ {
		err := d.convVisitOnce(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		if !final || try == maxFinalVisits {
			if final {
				d.f.finalMissed.Add(1)
			}
			d.f.env.Fail("device %d catch-up (final %v, try %d): %v", d.Idx, final, try, err)
			return
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (d *Device) convVisitOnce(ctx context.Context) error {
	c, err := d.Sess.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return d.convTake(c)
}

// convTake stores what c holds now: Recv with a deadline already past
// hands out what the driver queued (all that was missed, after Connect)
// and then its deadline error.
func (d *Device) convTake(c targets.Conn) error {
	for {
		p, err := c.Recv(time.Now())
		if errors.Is(err, context.DeadlineExceeded) {
			return nil
		}
		if err != nil {
			return err
		}
		if p.Type == targets.PushMsg {
			d.convStore(&p.Msg, ledger.Pull)
		}
	}
}

// convOnline keeps a connection open, storing every message it hands
// out, reconnecting after a close (the driver then hands out what was
// missed first), and on drain takes what a new connection has missed.
func (d *Device) convOnline(ctx context.Context, drain <-chan struct{}) {
	backoff := 10 * time.Millisecond
	for ctx.Err() == nil {
		select {
		case <-drain:
			d.convVisit(ctx, true)
			return
		default:
		}
		c, err := d.Sess.Connect(ctx)
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
		if d.f.env.Mix.EnterOnOnline > 0 {
			// What the connection queued first is what the device missed:
			// the device takes it, then enters some of the conversations
			// it brought news of (the client mix).
			if err := d.convTake(c); err != nil {
				c.Close()
				continue
			}
			d.cameOnline(ctx)
		}
		frames := make(chan targets.Push, frameQueue)
		go func() { // ends when c is closed
			defer close(frames)
			for {
				f, err := c.Recv(time.Time{})
				if err != nil {
					return
				}
				frames <- f
			}
		}()
		done := false
	recv:
		for {
			select {
			case <-ctx.Done():
				done = true
				break recv
			case <-drain:
				done = true
				break recv
			case f, ok := <-frames:
				if !ok {
					break recv // closed by the target: reconnect
				}
				if f.Type == targets.PushMsg {
					d.convStore(&f.Msg, ledger.Push)
					d.pushed(ctx, &f.Msg)
				}
			}
		}
		c.Close()
		for f := range frames { // handed out before the close: the device has them
			if f.Type == targets.PushMsg {
				d.convStore(&f.Msg, ledger.Push)
			}
		}
		if done {
			if ctx.Err() == nil {
				d.convVisit(ctx, true)
			}
			return
		}
	}
}
