package device

import (
	"context"
	"sync"
	"time"

	"imlab/ledger"
	"imlab/targets"
)

// An online device of a target with an inbox is one goroutine: it reads
// its WebSocket and handles each frame itself (stores it, fills a gap by
// pulling, enters the conversation). What it cannot do while it waits in
// a read, one goroutine does for every online device of the run (the
// acker): acknowledge the chain AckEvery after it first grew past the
// last acknowledgement, and close every connection at the drain or the
// end of the run, which ends the read. Before, each connection had a
// reader goroutine handing its frames to the device's goroutine through a
// channel: a wake-up per frame, and a timer per device.

// wsState is what an online device shares with the acker, under mu.
type wsState struct {
	mu      sync.Mutex
	conn    targets.Conn // the connection in use; nil while there is none
	stopped bool         // drained or ended: no connection may be used
	busy    bool         // handling a frame: an acknowledgement waits for it
	due     bool         // the acknowledgement came due while busy
	armed   bool         // queued in the acker
	chain   uint64       // the chain as far as the device has recorded it
}

// ackDue is a device whose acknowledgement comes due at at.
type ackDue struct {
	at time.Time
	d  *Device
}

// acker acknowledges online devices' chains over their connections and
// ends their reads at the drain. Deadlines are queued in order (AckEvery
// is one for every device), so the queue is a FIFO.
type acker struct {
	every time.Duration
	devs  []*Device // the online devices it closes at the end
	mu    sync.Mutex
	q     []ackDue
	kick  chan struct{} // a deadline was queued into an empty queue
}

// ackerOf returns the fleet's acker, starting it with the first online
// device (ctx and drain are every device's).
func (f *Fleet) ackerOf(ctx context.Context, drain <-chan struct{}) *acker {
	f.ackOnce.Do(func() {
		f.acks = &acker{every: f.env.AckEvery, devs: f.online, kick: make(chan struct{}, 1)}
		go f.acks.run(ctx, drain)
	})
	return f.acks
}

// queue schedules d's acknowledgement AckEvery from now.
func (a *acker) queue(d *Device) {
	a.mu.Lock()
	a.q = append(a.q, ackDue{at: time.Now().Add(a.every), d: d})
	first := len(a.q) == 1
	a.mu.Unlock()
	if first {
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

// next pops the deadlines that are due and says how long until the next.
func (a *acker) next(now time.Time, due []*Device) ([]*Device, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for n < len(a.q) && !a.q[n].at.After(now) {
		due = append(due, a.q[n].d)
		n++
	}
	if n > 0 {
		a.q = a.q[:copy(a.q, a.q[n:])]
	}
	if len(a.q) == 0 {
		return due, -1
	}
	return due, a.q[0].at.Sub(now)
}

func (a *acker) run(ctx context.Context, drain <-chan struct{}) {
	defer a.stop()
	t := time.NewTimer(time.Hour)
	t.Stop()
	var due []*Device
	for {
		var wait time.Duration
		due, wait = a.next(time.Now(), due[:0])
		for _, d := range due {
			d.ackDue()
		}
		var tc <-chan time.Time
		if wait >= 0 {
			t.Reset(wait)
			tc = t.C
		}
		select {
		case <-tc:
		case <-a.kick:
			t.Stop()
		case <-drain:
			return
		case <-ctx.Done():
			return
		}
	}
}

// stop closes every online device's connection and keeps them from using
// another: their reads end, and they see the drain or the end.
func (a *acker) stop() {
	for _, d := range a.devs {
		s := &d.ws
		s.mu.Lock()
		s.stopped = true
		if s.conn != nil {
			s.conn.Close()
		}
		s.mu.Unlock()
	}
}

// ackDue is the acker's call when d's acknowledgement comes due.
func (d *Device) ackDue() {
	s := &d.ws
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
	switch {
	case s.conn == nil || s.stopped:
	case s.busy:
		s.due = true
	default:
		d.ackWS()
	}
}

// ackWS acknowledges the recorded chain over the connection (s.mu held).
// A failed write closes the connection: the device's read ends, and it
// reconnects and pulls.
func (d *Device) ackWS() error {
	s := &d.ws
	if s.chain <= d.acked {
		return nil
	}
	if err := s.conn.Ack(s.chain); err != nil {
		s.conn.Close()
		return err
	}
	d.acked = s.chain
	d.shard().Cursor(ledger.Cursor{Dev: d.Idx, Seq: s.chain, Status: ledger.Sent, At: d.now()})
	return nil
}

// attach makes c the device's connection, busy until idle is called;
// false when the run has drained or ended (c is then closed).
func (d *Device) attach(c targets.Conn) bool {
	s := &d.ws
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		c.Close()
		return false
	}
	s.conn, s.busy, s.due = c, true, false
	return true
}

// detach closes the connection; the acker no longer touches the device.
func (d *Device) detach() {
	s := &d.ws
	s.mu.Lock()
	c := s.conn
	s.conn, s.busy, s.due = nil, false, false
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// busy marks the device as handling a frame.
func (d *Device) busy() {
	s := &d.ws
	s.mu.Lock()
	s.busy = true
	s.mu.Unlock()
}

// idle records the chain for the acker and marks the device as waiting
// for a frame: an acknowledgement that came due meanwhile is made now, and
// a chain past the last acknowledgement is queued for one AckEvery from
// now. An error when the connection is no longer usable.
func (d *Device) idle(a *acker) error {
	s := &d.ws
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy = false
	s.chain = d.chain
	if s.stopped || s.conn == nil {
		return errStopped
	}
	if s.due {
		s.due = false
		if err := d.ackWS(); err != nil {
			return err
		}
	}
	if !s.armed && s.chain > d.acked {
		s.armed = true
		a.queue(d)
	}
	return nil
}
