package device

import (
	"context"
	"sync"

	"imlab/ledger"
	"imlab/targets"
	"imlab/targets/wspoll"
)

// Online devices' reads on one poller (Env.PollReads, a driver that offers
// targets.PollSession, Linux): the fleet's poller goroutine reads every
// online device's WebSocket (wspoll: one epoll, one read per ready socket)
// and hands each push to the device's pollIn. While the device's goroutine
// waits for frames (parked), the device's state is the poller's under
// d.ws.mu: a push that needs no blocking call (a message at the chain's
// end, when the mix does not open conversations on a push) is stored and
// recorded for the acker right there, without a goroutine wake-up; any
// other push (a gap to fill by pulling, a conversation to enter) is queued
// and the device's goroutine is woken, which handles it and every push
// queued after it in order, as connected does, then parks again. The
// device's goroutine still dials, catches up, reconnects and drains. The
// acker is unchanged: it never acknowledges while the device handles a
// frame (the poller holds d.ws.mu through one).

// pollIn is one polled connection's pushes for the device (under d.ws.mu).
type pollIn struct {
	d     *Device
	q     []targets.Push // pushes for the device's goroutine, in order
	ended bool           // the connection ended: nothing follows q
	wake  chan struct{}  // q grew or the connection ended
}

func (in *pollIn) signal() {
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

// Push is the poller's call with one push (targets.PushHandler).
func (in *pollIn) Push(p *targets.Push) {
	d := in.d
	s := &d.ws
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.in != in || in.ended || s.stopped {
		return // an old connection, or stopped: the device's goroutine pulls what it missed
	}
	if s.parked && len(in.q) == 0 && d.quick(p) {
		d.storeParked(p)
		return
	}
	in.q = append(in.q, *p)
	in.signal()
}

// Ended is the poller's call when the connection ended.
func (in *pollIn) Ended(error) {
	s := &in.d.ws
	s.mu.Lock()
	in.ended = true
	s.mu.Unlock()
	in.signal()
}

// quick says whether p can be handled without a blocking call (the device
// parked, d.ws.mu held).
func (d *Device) quick(p *targets.Push) bool {
	if p.Type != targets.PushMsg || p.Msg.Seq <= d.chain {
		return true // skipped, as connected skips it
	}
	return p.PrevSeq <= d.chain && d.f.env.Mix.OpenOnPush == 0
}

// storeParked handles a quick push on the poller's goroutine (d.ws.mu
// held): frame's store and idle's bookkeeping, in the same order.
func (d *Device) storeParked(p *targets.Push) {
	if p.Type != targets.PushMsg || p.Msg.Seq <= d.chain {
		return
	}
	d.store(&p.Msg, ledger.Push)
	d.chain = p.Msg.Seq
	s := &d.ws
	s.chain = d.chain
	if s.conn == nil {
		return
	}
	if !s.armed && s.chain > d.acked {
		s.armed = true
		d.f.acks.queue(d)
	}
}

// connectPolled opens the device's push connection on the fleet's
// poller.
func (d *Device) connectPolled(ctx context.Context, ps targets.PollSession) (wsConn, *pollIn, error) {
	in := &pollIn{d: d, wake: make(chan struct{}, 1)}
	s := &d.ws
	s.mu.Lock()
	s.in = in
	s.mu.Unlock()
	c, err := ps.ConnectPolled(ctx, d.f.poller, in)
	if err != nil {
		s.mu.Lock()
		s.in = nil
		s.mu.Unlock()
		return nil, nil, err
	}
	return c, in, nil
}

// polled is connected for a polled connection: it catches up, then
// handles the pushes the poller queued until the connection ends.
func (d *Device) polled(ctx context.Context, in *pollIn, a *acker) {
	if !d.caughtUp(ctx, a) {
		return
	}
	for {
		q, ended := d.park(ctx, in)
		for i := range q {
			f := &q[i]
			if f.Type != targets.PushMsg || f.Msg.Seq <= d.chain {
				continue
			}
			d.busy()
			if !d.frame(ctx, f) || d.idle(a) != nil {
				return
			}
		}
		if ended || ctx.Err() != nil {
			return
		}
	}
}

// park waits until the poller queued pushes or the connection ended, the
// device's state the poller's meanwhile; it returns the queue.
func (d *Device) park(ctx context.Context, in *pollIn) (q []targets.Push, ended bool) {
	s := &d.ws
	s.mu.Lock()
	for len(in.q) == 0 && !in.ended && ctx.Err() == nil {
		s.parked = true
		s.mu.Unlock()
		select {
		case <-in.wake:
		case <-ctx.Done():
		}
		s.mu.Lock()
		s.parked = false
	}
	q, in.q = in.q, nil
	ended = in.ended
	s.mu.Unlock()
	return q, ended
}

// startPoller starts the fleet's poller when the run asks for it and the
// driver offers it; its goroutine (counted by wg) ends with ctx or once
// the last online device's goroutine has returned (onlineDone).
func (f *Fleet) startPoller(ctx context.Context, wg *sync.WaitGroup) {
	if !f.env.PollReads || !f.env.Caps.Inbox || len(f.online) == 0 || !wspoll.Supported {
		return
	}
	if _, ok := f.online[0].Sess.(targets.PollSession); !ok {
		return
	}
	p, err := wspoll.New()
	if err != nil {
		f.env.Fail("ws poller: %v (devices read on goroutines of their own)", err)
		return
	}
	pctx, cancel := context.WithCancel(ctx)
	f.poller, f.pollStop = p, cancel
	f.onlineLeft.Store(int64(len(f.online)))
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cancel()
		if err := p.Run(pctx); err != nil {
			f.env.Fail("ws poller: %v", err)
		}
	}()
}

// onlineDone is an online device's goroutine returning: the last one
// stops the poller.
func (f *Fleet) onlineDone() {
	if f.poller != nil && f.onlineLeft.Add(-1) == 0 {
		f.pollStop()
	}
}
