package device

import (
	"context"
	"sync"
	"time"

	"imlab/ledger"
	"imlab/targets"
)

// Register makes each of devs known to the target before the load, as a
// real client registers its device before it ever goes offline: one inbox
// pull of at most one entry (nothing stored, nothing acknowledged; the
// reference server makes a device known before it answers its first
// pull), workers at a time. Without it an offline device would be first
// heard of at its first visit, which a slow run puts late: the server's
// retention may then delete its uid's rows before it came, as it should
// (it waits only for the devices it has heard of). Each answer's time is
// the device's first contact, which Start writes to the ledger (the
// checker counts a device for retention from it). A device whose pull
// failed is a run error and has no contact. A target without an inbox:
// nothing to do. It runs before Start, which owns the devices after it.
func (f *Fleet) Register(ctx context.Context, devs []*Device, workers int) {
	if !f.env.Caps.Inbox || len(devs) == 0 {
		return
	}
	next := make(chan *Device)
	var wg sync.WaitGroup
	for range max(1, min(workers, len(devs))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range next {
				if _, err := f.env.Pull(ctx, d.Sess, targets.PullOpts{Limit: 1}); err != nil {
					if ctx.Err() == nil {
						f.env.Fail("device %d register: %v", d.Idx, err)
					}
					continue
				}
				d.contact = time.Now()
			}
		}()
	}
	for _, d := range devs {
		select {
		case next <- d:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
}

// writeContacts writes the first contact of each device Register made
// known, as an offset from start (negative: before the load).
func (f *Fleet) writeContacts(devs []*Device) {
	for _, d := range devs {
		if !d.contact.IsZero() {
			d.shard().Contact(ledger.Contact{Dev: d.Idx, At: d.contact.Sub(f.start)})
		}
	}
}
