package history

import (
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/bsontype"

	"imlab/ref/model"
)

// purgedMarker replaces a physically deleted slot (see the package doc).
const purgedMarker = "purged"

// Revoke roles. Only the sender revokes through the Service; the field keeps
// the seed's shape so that an operator tool can record another role.
const roleSender = "sender"

// msgDoc is the immutable message of a slot (bson layout).
type msgDoc struct {
	MsgID       int64  `bson:"msg_id"`
	Seq         int64  `bson:"seq"`
	SenderUID   int64  `bson:"sender_uid"`
	ConvType    int32  `bson:"conv_type"`
	ClientMsgID string `bson:"client_msg_id"`
	Content     string `bson:"content"`
	SendTime    int64  `bson:"send_time"` // unix ms
}

// revokeDoc is the revoke layer of a slot.
type revokeDoc struct {
	UserID int64  `bson:"user_id"`
	Role   string `bson:"role"`
	Time   int64  `bson:"time"` // unix ms
}

// slotDoc is one array element as stored. DelList is never nil when
// written, so the stored array exists and $addToSet has a target.
type slotDoc struct {
	Msg     *msgDoc    `bson:"msg"`
	Revoke  *revokeDoc `bson:"revoke"`
	DelList []int64    `bson:"del_list"`
	IsRead  bool       `bson:"is_read"`
	V       int64      `bson:"v"`
}

func emptySlotDoc() slotDoc { return slotDoc{DelList: []int64{}} }

func toMsgDoc(m model.Message) *msgDoc {
	return &msgDoc{
		MsgID:       int64(m.MsgID),
		Seq:         int64(m.ConvSeq),
		SenderUID:   int64(m.SenderUID),
		ConvType:    int32(m.ConvType),
		ClientMsgID: m.ClientMsgID,
		Content:     m.Content,
		SendTime:    m.CreatedAt.UnixMilli(),
	}
}

// SlotState tells what a slot holds.
type SlotState uint8

const (
	// SlotEmpty: never written (a pre-filled slot, a missing document, or
	// a slot past the end of a short array).
	SlotEmpty SlotState = iota
	// SlotFilled: a message is stored.
	SlotFilled
	// SlotPurged: physically deleted.
	SlotPurged
)

// Revoke is who revoked a message, and when.
type Revoke struct {
	UserID uint64    `json:"u"`
	Role   string    `json:"r"`
	At     time.Time `json:"t"`
}

// Slot is one decoded slot: the shared facts and tags, not yet projected
// for any viewer.
type Slot struct {
	Seq     uint64         `json:"s"`
	State   SlotState      `json:"st"`
	Msg     *model.Message `json:"m,omitempty"`
	Revoke  *Revoke        `json:"rv,omitempty"`
	DelList []uint64       `json:"d,omitempty"`
	IsRead  bool           `json:"ir,omitempty"`
	Version int64          `json:"v"`
}

// DeletedBy reports whether uid is in the slot's del_list.
func (s *Slot) DeletedBy(uid uint64) bool {
	for _, u := range s.DelList {
		if u == uid {
			return true
		}
	}
	return false
}

// decodeSlot turns one stored array element into a Slot. convID is not
// stored per slot and comes from the document.
func decodeSlot(convID, seq uint64, v bson.RawValue) (Slot, error) {
	s := Slot{Seq: seq}
	switch v.Type {
	case 0, bsontype.Null, bsontype.Undefined:
		return s, nil // $arrayElemAt past the end, or an absent element
	case bsontype.String:
		if str, _ := v.StringValueOK(); str == purgedMarker {
			s.State = SlotPurged
			return s, nil
		}
		return s, fmt.Errorf("history: slot of seq %d holds an unknown string", seq)
	case bsontype.EmbeddedDocument:
	default:
		return s, fmt.Errorf("history: slot of seq %d has bson type %s", seq, v.Type)
	}
	var d slotDoc
	if err := v.Unmarshal(&d); err != nil {
		return s, fmt.Errorf("history: decode slot of seq %d: %w", seq, err)
	}
	s.Version = d.V
	s.IsRead = d.IsRead
	for _, u := range d.DelList {
		s.DelList = append(s.DelList, uint64(u))
	}
	if d.Revoke != nil {
		s.Revoke = &Revoke{UserID: uint64(d.Revoke.UserID), Role: d.Revoke.Role, At: time.UnixMilli(d.Revoke.Time).UTC()}
	}
	if d.Msg == nil {
		return s, nil
	}
	if uint64(d.Msg.Seq) != seq {
		return s, fmt.Errorf("history: slot of seq %d holds conv_seq %d (bucket size changed?)", seq, d.Msg.Seq)
	}
	s.State = SlotFilled
	s.Msg = &model.Message{
		MsgID:       uint64(d.Msg.MsgID),
		ConvID:      convID,
		ConvType:    model.ConvType(d.Msg.ConvType),
		ConvSeq:     seq,
		SenderUID:   uint64(d.Msg.SenderUID),
		ClientMsgID: d.Msg.ClientMsgID,
		Content:     d.Msg.Content,
		CreatedAt:   time.UnixMilli(d.Msg.SendTime).UTC(),
	}
	return s, nil
}

// bucketDoc is a whole stored document as read by the fallback path.
type bucketDoc struct {
	ID     string          `bson:"_id"`
	ConvID string          `bson:"conv_id"`
	Idx    int64           `bson:"idx"`
	MaxSeq int64           `bson:"max_seq"`
	Msgs   []bson.RawValue `bson:"msgs"`
}

// Bucket is a decoded document.
type Bucket struct {
	ConvID uint64
	Idx    uint64
	MaxSeq uint64
	Slots  []Slot // position i holds seq Idx*size+i+1; may be short if the stored array is
	Size   int    // the layout's size, which a well-formed document's array has
}

// IsFull reports whether the bucket's last slot is taken. The seed's
// version indexed msgs[len-1] and panicked on an empty array; a short array
// (a document that breaks the fixed-size contract) is never full either.
func (b *Bucket) IsFull() bool {
	if b == nil || b.Size <= 0 || len(b.Slots) < b.Size {
		return false
	}
	return b.Slots[b.Size-1].State != SlotEmpty
}

// LastSeq is the highest seq taken (filled or purged) in the bucket, 0 if none.
func (b *Bucket) LastSeq() uint64 {
	if b.IsFull() {
		return b.Slots[b.Size-1].Seq
	}
	for i := len(b.Slots) - 1; i >= 0; i-- {
		if b.Slots[i].State != SlotEmpty {
			return b.Slots[i].Seq
		}
	}
	return 0
}

func decodeBucket(l Layout, convID uint64, d *bucketDoc) (*Bucket, error) {
	b := &Bucket{ConvID: convID, Idx: uint64(d.Idx), MaxSeq: uint64(d.MaxSeq), Size: int(l.Size)}
	n := len(d.Msgs)
	if n > b.Size {
		n = b.Size
	}
	b.Slots = make([]Slot, n)
	for i := 0; i < n; i++ {
		s, err := decodeSlot(convID, l.SeqOf(b.Idx, i), d.Msgs[i])
		if err != nil {
			return nil, err
		}
		b.Slots[i] = s
	}
	return b, nil
}

// slotAt returns slot i of the bucket; a missing position (a short array)
// reads as empty, never as a panic.
func (b *Bucket) slotAt(l Layout, i int) Slot {
	if i >= 0 && i < len(b.Slots) {
		return b.Slots[i]
	}
	return Slot{Seq: l.SeqOf(b.Idx, i)}
}
