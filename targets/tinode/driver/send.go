package driver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"imlab/targets/tinode"
)

// Ack is a send's acceptance in the lab's names.
type Ack struct {
	MsgID, ConvID, ConvSeq uint64
}

// SendReq is one send: from lab uid From (sending session Slot mod
// SendersPerUser) to uid or group Target, Tag its client tag (the lab's
// client message id, RUNID-TICK).
type SendReq struct {
	From     uint64
	Slot     int
	ConvType uint8
	Target   uint64
	Tag      string
	Content  string
}

// SendError is a send that did not end in an ACK: Status is Tinode's
// {ctrl} code of a definite refusal (4xx or 5xx: Tinode answers after its
// store call returned), 0 when no answer came; Unknown tells them apart.
type SendError struct {
	Conv    uint64 // the conversation the send was for
	Status  int
	Unknown bool
	Err     error
}

func (e *SendError) Error() string { return e.Err.Error() }
func (e *SendError) Unwrap() error { return e.Err }

type senderKey struct {
	ui, slot int
}

// sender is one sending session of a user. mu guards s and attached; a
// publish runs outside it (the wire client matches answers by id).
type sender struct {
	mu       sync.Mutex
	s        *tinode.Session
	attached map[string]bool
}

// Send publishes one message and classifies its outcome. The sending
// session is opened, and attached to the topic, on first use; a session
// that ended is replaced on the next send. A send refused with 409 "must
// attach first" (the server detached the session from the topic) is
// attached again and published again: the refusal stored nothing.
func (d *Driver) Send(ctx context.Context, r SendReq) (Ack, error) {
	ui, ok := d.byUID[r.From]
	if !ok {
		return Ack{}, &SendError{Err: fmt.Errorf("%w: send from uid %d: not in the population", ErrInvalid, r.From)}
	}
	t, err := d.sendTopic(ui, r.ConvType, r.Target)
	if err != nil {
		return Ack{}, &SendError{Err: err}
	}
	if r.Tag == "" {
		return Ack{}, &SendError{Err: fmt.Errorf("%w: send without a client tag", ErrInvalid)}
	}
	msg := tinode.Message{Tag: r.Tag, Content: r.Content, NoEcho: true}
	for attempt := 0; ; attempt++ {
		s, err := d.senderFor(ctx, ui, r.Slot, t.Name)
		if err != nil {
			return Ack{}, classify(t.Conv, err)
		}
		ack, err := s.Publish(ctx, t.Name, msg)
		if err == nil {
			if err := checkSeq(t.Name, ack.Seq); err != nil {
				return Ack{}, &SendError{Conv: t.Conv, Unknown: true, Err: err}
			}
			return Ack{MsgID: MsgID(t.Conv, ack.Seq), ConvID: t.Conv, ConvSeq: uint64(ack.Seq)}, nil
		}
		if tinode.IsCode(err, tinode.CodeConflict) && attempt == 0 {
			d.detached(ui, r.Slot, t.Name)
			continue
		}
		return Ack{}, classify(t.Conv, err)
	}
}

// classify turns a wire error into a SendError.
func classify(conv uint64, err error) *SendError {
	e := &SendError{Conv: conv, Err: err, Unknown: tinode.OutcomeOf(err) == tinode.OutcomeUnknown}
	var se *tinode.ServerError
	if errors.As(err, &se) {
		e.Status = se.Code
	}
	return e
}

// senderFor is sending session (ui, slot), attached to topic.
func (d *Driver) senderFor(ctx context.Context, ui, slot int, topic string) (*tinode.Session, error) {
	k := senderKey{ui, slot % d.cfg.SendersPerUser}
	d.sendMu.Lock()
	sn := d.senders[k]
	if sn == nil {
		sn = &sender{}
		d.senders[k] = sn
	}
	d.sendMu.Unlock()
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if sn.s != nil {
		select {
		case <-sn.s.Done():
			sn.s = nil
		default:
		}
	}
	if sn.s == nil {
		s, err := d.login(ctx, ui, "send"+strconv.Itoa(k.slot))
		if err != nil {
			return nil, err
		}
		go discard(s) // a sender reads no pushes: NoEcho spares it its own
		sn.s, sn.attached = s, map[string]bool{}
	}
	if !sn.attached[topic] {
		if err := attach(ctx, sn.s, topic); err != nil {
			return nil, err
		}
		sn.attached[topic] = true
	}
	return sn.s, nil
}

// detached forgets that a sender is attached to topic.
func (d *Driver) detached(ui, slot int, topic string) {
	d.sendMu.Lock()
	sn := d.senders[senderKey{ui, slot % d.cfg.SendersPerUser}]
	d.sendMu.Unlock()
	if sn != nil {
		sn.mu.Lock()
		delete(sn.attached, topic)
		sn.mu.Unlock()
	}
}

// discard drains a session's pushes until it ends.
func discard(s *tinode.Session) {
	for {
		select {
		case <-s.Pushes():
		case <-s.Done():
			return
		}
	}
}

// Close ends every sending session.
func (d *Driver) Close() {
	d.sendMu.Lock()
	defer d.sendMu.Unlock()
	for k, sn := range d.senders {
		sn.mu.Lock()
		if sn.s != nil {
			sn.s.Close()
		}
		sn.mu.Unlock()
		delete(d.senders, k)
	}
}

// WarmSenders opens every sending session and attaches it to every topic
// of its user, as a client attached to its conversations is: the first
// send to a topic must not pay for a login and a {sub}.
func (d *Driver) WarmSenders(ctx context.Context) error {
	return d.forEach(ctx, len(d.pop.Users), func(ctx context.Context, ui int) error {
		for slot := range d.cfg.SendersPerUser {
			for _, t := range d.topicsOf(ui) {
				if _, err := d.senderFor(ctx, ui, slot, t.Name); err != nil {
					return fmt.Errorf("tinode driver: sending session %d of uid %d, topic %s: %w", slot, d.pop.Users[ui], t.Name, err)
				}
			}
		}
		return nil
	})
}
