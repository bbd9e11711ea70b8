package fanout

import (
	"encoding/binary"
	"fmt"
	"time"

	"imlab/ref/model"
)

// Event is a fan-out record's payload: the message's locators, and with
// HasBody its body. Under the queue policy, which stores nothing before
// the ACK, the body is the only copy and the inbox tier stores it. Under
// the store and outbox policies (and the direct fan-out) the body is a
// copy of the msg_content row committed before the event was made
// (Stored, StoredEvent): the inbox and history tiers take it from the
// event instead of reading it back (seed 003 reads it back: one query per
// batch and a primary-key lookup per message, outside the inbox
// transaction), and store nothing. A locator-only event (an older
// producer, strict's history feed) is still read back. An event with the
// largest body is MaxStoredEventBytes, under MaxEventBytes (mq_outbox's
// payload column) and far under Kafka's default record limit (1 MiB).
type Event struct {
	MsgID     uint64
	ConvID    uint64
	ConvSeq   uint64
	SenderUID uint64
	SentAt    time.Time // the message's created_at; the lab owns it, lag ages derive from it

	// InboxDone says every recipient's inbox row was committed before the
	// event was published (the strict policy's history feed): the inbox tier
	// skips it without touching storage; the history tier writes it.
	InboxDone bool

	// Body: HasBody says the event carries one; Stored says msg_content
	// held it before the event was made (not the queue policy), so the
	// consumer must not store it again.
	HasBody     bool
	Stored      bool
	ConvType    model.ConvType
	ClientMsgID string
	Content     string
}

const (
	eventVersion  = 1
	flagBody      = 1
	flagInboxDone = 2
	flagStored    = 4
	eventFixedLen = 1 + 1 + 5*8
	// MaxEventBytes bounds an encoded event; it equals mq_outbox.payload's
	// VARBINARY(8192).
	MaxEventBytes = 8192
	// MaxStoredEventBytes is the largest event with a body a valid message
	// makes (both strings at their limits).
	MaxStoredEventBytes = eventFixedLen + 1 + 2 + model.MaxClientMsgIDLen + 2 + model.MaxContentLen
)

// The largest event with a body fits mq_outbox's payload column.
var _ [MaxEventBytes - MaxStoredEventBytes]struct{}

// Message returns the stored message an event with a body describes.
func (e Event) Message() model.Message {
	return model.Message{
		MsgID: e.MsgID, ConvID: e.ConvID, ConvType: e.ConvType, ConvSeq: e.ConvSeq,
		SenderUID: e.SenderUID, ClientMsgID: e.ClientMsgID, Content: e.Content, CreatedAt: e.SentAt,
	}
}

// EventOf builds the locator event of a stored message; withBody adds the
// body (queue policy only).
func EventOf(m model.Message, withBody bool) Event {
	e := Event{MsgID: m.MsgID, ConvID: m.ConvID, ConvSeq: m.ConvSeq, SenderUID: m.SenderUID, SentAt: m.CreatedAt}
	if withBody {
		e.HasBody = true
		e.ConvType = m.ConvType
		e.ClientMsgID = m.ClientMsgID
		e.Content = m.Content
	}
	return e
}

// StoredEvent is the event of a message whose msg_content row is
// committed: its locators and a copy of its body (Stored), so the
// consumers need not read it back.
func StoredEvent(m model.Message) Event {
	e := EventOf(m, true)
	e.Stored = true
	return e
}

// Validate checks an event's fields.
func (e Event) Validate() error {
	switch {
	case e.MsgID == 0:
		return fmt.Errorf("%w: event msg_id 0", model.ErrInvalid)
	case e.ConvSeq == 0:
		return fmt.Errorf("%w: event conv_seq 0", model.ErrInvalid)
	case e.SenderUID == 0 || e.SenderUID > model.MaxUID:
		return fmt.Errorf("%w: event sender_uid %d", model.ErrInvalid, e.SenderUID)
	case e.Stored && !e.HasBody:
		return fmt.Errorf("%w: event marked stored without a body", model.ErrInvalid)
	}
	if _, _, _, err := model.ParseConvID(e.ConvID); err != nil {
		return fmt.Errorf("event: %w", err)
	}
	if e.HasBody {
		if t, _, _, _ := model.ParseConvID(e.ConvID); t != e.ConvType {
			return fmt.Errorf("%w: event conv_type %d does not match conv_id", model.ErrInvalid, e.ConvType)
		}
		if len(e.ClientMsgID) > model.MaxClientMsgIDLen || len(e.Content) > model.MaxContentLen {
			return fmt.Errorf("%w: event body too large", model.ErrTooLarge)
		}
	}
	return nil
}

// Marshal encodes an event: version, flags (1 body, 2 inbox done, 4 body
// stored), five big-endian uint64 (msg_id,
// conv_id, conv_seq, sender_uid, sent_at in Unix milliseconds), then, with a
// body, conv_type and two length-prefixed strings.
func (e Event) Marshal() ([]byte, error) {
	return e.AppendMarshal(make([]byte, 0, e.Len()))
}

// Len is the length of e's encoding.
func (e Event) Len() int {
	n := eventFixedLen
	if e.HasBody {
		n += 1 + 2 + len(e.ClientMsgID) + 2 + len(e.Content)
	}
	return n
}

// AppendMarshal appends e's encoding (Marshal) to b.
func (e Event) AppendMarshal(b []byte) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	var flags byte
	if e.HasBody {
		flags |= flagBody
	}
	if e.InboxDone {
		flags |= flagInboxDone
	}
	if e.Stored {
		flags |= flagStored
	}
	b = append(b, eventVersion, flags)
	b = binary.BigEndian.AppendUint64(b, e.MsgID)
	b = binary.BigEndian.AppendUint64(b, e.ConvID)
	b = binary.BigEndian.AppendUint64(b, e.ConvSeq)
	b = binary.BigEndian.AppendUint64(b, e.SenderUID)
	b = binary.BigEndian.AppendUint64(b, uint64(e.SentAt.UnixMilli()))
	if e.HasBody {
		b = append(b, byte(e.ConvType))
		b = binary.BigEndian.AppendUint16(b, uint16(len(e.ClientMsgID)))
		b = append(b, e.ClientMsgID...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(e.Content)))
		b = append(b, e.Content...)
	}
	return b, nil
}

// UnmarshalEvent decodes and validates an event. Errors wrap
// model.ErrInvalid: such a record can never succeed and goes straight to the
// dead-letter topic.
func UnmarshalEvent(b []byte) (Event, error) {
	var e Event
	if len(b) < eventFixedLen || len(b) > MaxEventBytes {
		return e, fmt.Errorf("%w: event of %d bytes", model.ErrInvalid, len(b))
	}
	if b[0] != eventVersion {
		return e, fmt.Errorf("%w: event version %d", model.ErrInvalid, b[0])
	}
	flags := b[1]
	if flags&^(flagBody|flagInboxDone|flagStored) != 0 {
		return e, fmt.Errorf("%w: event flags %#x", model.ErrInvalid, flags)
	}
	e.InboxDone = flags&flagInboxDone != 0
	e.Stored = flags&flagStored != 0
	p := b[2:]
	e.MsgID = binary.BigEndian.Uint64(p[0:])
	e.ConvID = binary.BigEndian.Uint64(p[8:])
	e.ConvSeq = binary.BigEndian.Uint64(p[16:])
	e.SenderUID = binary.BigEndian.Uint64(p[24:])
	ms := binary.BigEndian.Uint64(p[32:])
	if ms > 1<<62 {
		return e, fmt.Errorf("%w: event sent_at %d", model.ErrInvalid, ms)
	}
	e.SentAt = time.UnixMilli(int64(ms)).UTC()
	p = p[40:]
	if flags&flagBody != 0 {
		e.HasBody = true
		if len(p) < 3 {
			return e, fmt.Errorf("%w: event body truncated", model.ErrInvalid)
		}
		e.ConvType = model.ConvType(p[0])
		s, rest, err := readStr(p[1:])
		if err != nil {
			return e, err
		}
		e.ClientMsgID = s
		s, rest, err = readStr(rest)
		if err != nil {
			return e, err
		}
		e.Content = s
		p = rest
	}
	if len(p) != 0 {
		return e, fmt.Errorf("%w: %d trailing bytes in event", model.ErrInvalid, len(p))
	}
	return e, e.Validate()
}

func readStr(p []byte) (string, []byte, error) {
	if len(p) < 2 {
		return "", nil, fmt.Errorf("%w: event string length truncated", model.ErrInvalid)
	}
	n := int(binary.BigEndian.Uint16(p))
	if len(p) < 2+n {
		return "", nil, fmt.Errorf("%w: event string truncated", model.ErrInvalid)
	}
	return string(p[2 : 2+n]), p[2+n:], nil
}

// Recipients lists the uids whose inboxes get a message: for 1:1 both
// parties (the sender's own inbox too, for multi-device sync), for a group
// every member as members returns them.
func Recipients(convID uint64, members []uint64) ([]uint64, error) {
	t, a, b, err := model.ParseConvID(convID)
	if err != nil {
		return nil, err
	}
	if t == model.ConvSingle {
		return []uint64{a, b}, nil
	}
	return members, nil
}
