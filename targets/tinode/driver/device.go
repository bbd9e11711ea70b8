package driver

import (
	"context"
	"errors"
	"fmt"

	"imlab/targets/tinode"
)

// Msg is a message a device received, in the lab's names.
type Msg struct {
	ConvID, ConvSeq, MsgID uint64
	From                   uint64 // lab uid of the sender (0: not of this population)
	Tick                   uint64 // from the tag (0: none of this run)
	Content                string // the content if it is a string
}

// Device is one simulated device of a user: a session of its own,
// attached to every topic of its user, and the highest seq it holds of
// each topic. A Device is owned by one goroutine.
type Device struct {
	d      *Driver
	ui     int
	did    string
	s      *tinode.Session
	topics []Topic
	last   map[uint64]int64 // conv -> highest seq held
	byName map[string]Topic
}

// Device makes device did of lab uid uid (not connected).
func (d *Driver) Device(uid uint64, did string) (*Device, error) {
	ui, ok := d.byUID[uid]
	if !ok {
		return nil, fmt.Errorf("%w: device of uid %d: not in the population", ErrInvalid, uid)
	}
	dv := &Device{d: d, ui: ui, did: did, topics: d.topicsOf(ui), last: map[uint64]int64{}, byName: map[string]Topic{}}
	for _, t := range dv.topics {
		dv.byName[t.Name] = t
	}
	return dv, nil
}

// Connect opens the device's session (closing an earlier one), logs in
// and attaches it to every topic of its user, within Config.AttachTimeout.
func (v *Device) Connect(ctx context.Context) error {
	v.Close()
	ctx, cancel := context.WithTimeout(ctx, v.d.cfg.AttachTimeout)
	defer cancel()
	s, err := v.d.login(ctx, v.ui, v.did)
	if err != nil {
		return err
	}
	for _, t := range v.topics {
		if err := attach(ctx, s, t.Name); err != nil {
			s.Close()
			return fmt.Errorf("tinode driver: device %s attach %s: %w", v.did, t.Name, err)
		}
	}
	v.s = s
	return nil
}

// Pushes is the connected session's push channel (nil when not
// connected); Done is closed when the session ends.
func (v *Device) Pushes() <-chan tinode.Push {
	if v.s == nil {
		return nil
	}
	return v.s.Pushes()
}

// Done is closed when the session ends (nil when not connected).
func (v *Device) Done() <-chan struct{} {
	if v.s == nil {
		return nil
	}
	return v.s.Done()
}

// Close ends the session, if any.
func (v *Device) Close() {
	if v.s != nil {
		v.s.Close()
		v.s = nil
	}
}

// Take handles one push: a {data} of a topic is emitted in seq order
// (a seq past the next one held is preceded by the history between,
// read with pulled=true); a topic the server detached the session from
// (205) is attached again and caught up. Other pushes are ignored.
func (v *Device) Take(ctx context.Context, p tinode.Push, emit func(m Msg, pulled bool)) error {
	switch {
	case p.Kind == tinode.PushData && p.Data != nil:
		t, ok := v.byName[p.Data.Topic]
		if !ok {
			return nil
		}
		if p.Data.Seq > v.last[t.Conv]+1 {
			if err := v.catchUpTopic(ctx, t, p.Data.Seq, emit); err != nil {
				return err
			}
		}
		return v.emit(t, *p.Data, false, emit)
	case p.Kind == tinode.PushNotice && p.Ctrl != nil && p.Ctrl.Code == tinode.CodeResetContent:
		t, ok := v.byName[p.Ctrl.Topic]
		if !ok || v.s == nil {
			return nil
		}
		if err := attach(ctx, v.s, t.Name); err != nil {
			return fmt.Errorf("tinode driver: device %s re-attach %s: %w", v.did, t.Name, err)
		}
		return v.catchUpTopic(ctx, t, 0, emit)
	}
	return nil
}

// CatchUp reads every topic's history above the highest seq held.
func (v *Device) CatchUp(ctx context.Context, emit func(m Msg, pulled bool)) error {
	for _, t := range v.topics {
		if err := v.catchUpTopic(ctx, t, 0, emit); err != nil {
			return err
		}
	}
	return nil
}

// catchUpTopic reads t's history from the next seq not held up to before
// (0: the topic's latest).
func (v *Device) catchUpTopic(ctx context.Context, t Topic, before int64, emit func(Msg, bool)) error {
	if v.s == nil {
		return errors.New("tinode driver: device not connected")
	}
	h, err := v.s.History(ctx, t.Name, v.last[t.Conv]+1, before)
	if err != nil {
		return fmt.Errorf("tinode driver: device %s history of %s: %w", v.did, t.Name, err)
	}
	for _, m := range h.Messages {
		if err := v.emit(t, m, true, emit); err != nil {
			return err
		}
	}
	return nil
}

func (v *Device) emit(t Topic, m tinode.Data, pulled bool, emit func(Msg, bool)) error {
	if m.Seq <= v.last[t.Conv] {
		return nil // held already (a push that raced a history page)
	}
	if err := checkSeq(t.Name, m.Seq); err != nil {
		return err
	}
	v.last[t.Conv] = m.Seq
	emit(v.d.msgOf(t.Conv, m), pulled)
	return nil
}

// msgOf names a {data} in the lab's terms.
func (d *Driver) msgOf(conv uint64, m tinode.Data) Msg {
	out := Msg{ConvID: conv, ConvSeq: uint64(m.Seq), MsgID: MsgID(conv, m.Seq), From: d.uidOf(m.From), Tick: d.cfg.TickOf(m.Tag)}
	var s string
	if jsonString(m.Content, &s) {
		out.Content = s
	}
	return out
}
