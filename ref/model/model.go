// Package model holds the value types and pure rules that every part of the
// reference server shares: conversation identity, send and pull shapes,
// inbox entries, and the error taxonomy that the HTTP layer maps to status
// codes.
//
// It owns no I/O and no state. It must not import any other imlab package,
// so that every other package (and the lab, through the JSON contract) can
// depend on it without cycles.
package model

import (
	"errors"
	"fmt"
	"time"
)

// ConvType is the conversation kind, as stored in offline_msg.conv_type.
type ConvType uint8

const (
	// ConvSingle is a 1:1 conversation.
	ConvSingle ConvType = 1
	// ConvGroup is a group conversation.
	ConvGroup ConvType = 2
)

// Limits that the contract names. Each is enforced where input enters.
const (
	// MaxUID is the largest uid a 1:1 conversation id can encode (31 bits).
	MaxUID = 1<<31 - 1
	// MaxGroupID is the largest group id (62 bits, bit 63 marks 1:1 ids).
	MaxGroupID = 1<<62 - 1
	// MaxGroupMembers bounds POST /v1/group/create.
	MaxGroupMembers = 500
	// MaxPullLimit bounds GET /v1/sync/pull?limit=.
	MaxPullLimit = 500
	// MaxConvPullLimit bounds GET /v1/conv/pull?limit=.
	MaxConvPullLimit = 50
	// MaxClientMsgIDLen bounds client_msg_id (bytes).
	MaxClientMsgIDLen = 64
	// MaxContentLen bounds a message body (bytes).
	MaxContentLen = 4096
	// MaxDeviceIDLen matches sync_cursor.device_id VARCHAR(64).
	MaxDeviceIDLen = 64
)

const singleBit = uint64(1) << 63

// SingleConvID derives the 1:1 conversation id from both uids so that both
// sides agree: bit 63 set, the smaller uid in bits 31..61, the larger in
// bits 0..30.
func SingleConvID(a, b uint64) (uint64, error) {
	if a == 0 || b == 0 || a > MaxUID || b > MaxUID {
		return 0, fmt.Errorf("%w: uid must be in 1..%d", ErrInvalid, MaxUID)
	}
	if a == b {
		return 0, fmt.Errorf("%w: cannot send a 1:1 message to oneself", ErrInvalid)
	}
	if a > b {
		a, b = b, a
	}
	return singleBit | a<<31 | b, nil
}

// GroupConvID derives a group conversation id from its group id.
func GroupConvID(groupID uint64) (uint64, error) {
	if groupID == 0 || groupID > MaxGroupID {
		return 0, fmt.Errorf("%w: group_id must be in 1..%d", ErrInvalid, uint64(MaxGroupID))
	}
	return groupID, nil
}

// ParseConvID tells a conversation id's type and its parties: for 1:1 the
// two uids (smaller first), for groups the group id in a.
func ParseConvID(convID uint64) (t ConvType, a, b uint64, err error) {
	if convID == 0 {
		return 0, 0, 0, fmt.Errorf("%w: conv_id 0", ErrInvalid)
	}
	if convID&singleBit != 0 {
		a = (convID &^ singleBit) >> 31
		b = convID & MaxUID
		if a == 0 || b == 0 || a >= b {
			return 0, 0, 0, fmt.Errorf("%w: malformed 1:1 conv_id %d", ErrInvalid, convID)
		}
		return ConvSingle, a, b, nil
	}
	if convID > MaxGroupID {
		return 0, 0, 0, fmt.Errorf("%w: malformed group conv_id %d", ErrInvalid, convID)
	}
	return ConvGroup, convID, 0, nil
}

// SendRequest is one send, after authentication: SenderUID and DeviceID come
// from the token, never from the body.
type SendRequest struct {
	SenderUID   uint64
	DeviceID    string
	ClientMsgID string
	ConvType    ConvType
	ToUID       uint64 // 1:1 only
	GroupID     uint64 // group only
	Content     string
}

// Validate checks a send request's shape (not membership, which needs
// storage). It returns an error wrapping ErrInvalid.
func (r SendRequest) Validate() error {
	switch {
	case r.SenderUID == 0 || r.SenderUID > MaxUID:
		return fmt.Errorf("%w: sender uid must be in 1..%d", ErrInvalid, MaxUID)
	case r.ClientMsgID == "":
		return fmt.Errorf("%w: client_msg_id is required", ErrInvalid)
	case len(r.ClientMsgID) > MaxClientMsgIDLen:
		return fmt.Errorf("%w: client_msg_id longer than %d bytes", ErrInvalid, MaxClientMsgIDLen)
	case len(r.Content) > MaxContentLen:
		return fmt.Errorf("%w: content longer than %d bytes", ErrTooLarge, MaxContentLen)
	}
	switch r.ConvType {
	case ConvSingle:
		if r.GroupID != 0 {
			return fmt.Errorf("%w: group_id given for conv_type 1", ErrInvalid)
		}
		_, err := SingleConvID(r.SenderUID, r.ToUID)
		return err
	case ConvGroup:
		if r.ToUID != 0 {
			return fmt.Errorf("%w: to_uid given for conv_type 2", ErrInvalid)
		}
		_, err := GroupConvID(r.GroupID)
		return err
	default:
		return fmt.Errorf("%w: conv_type must be 1 or 2", ErrInvalid)
	}
}

// ConvID is the request's conversation id (call Validate first).
func (r SendRequest) ConvID() uint64 {
	if r.ConvType == ConvGroup {
		id, _ := GroupConvID(r.GroupID)
		return id
	}
	id, _ := SingleConvID(r.SenderUID, r.ToUID)
	return id
}

// SendResult is the ACK. A retried client_msg_id gets the first one again.
type SendResult struct {
	MsgID      uint64    `json:"msg_id"`
	ConvID     uint64    `json:"conv_id"`
	ConvSeq    uint64    `json:"conv_seq"`
	ServerTime time.Time `json:"-"`
	// Duplicate is true when this answer was found, not made, by this call.
	Duplicate bool `json:"-"`
}

// Message is one stored message (msg_content), the body kept once.
type Message struct {
	MsgID       uint64
	ConvID      uint64
	ConvType    ConvType
	ConvSeq     uint64
	SenderUID   uint64
	ClientMsgID string
	Content     string
	CreatedAt   time.Time
}

// InboxEntry is one recipient's offline_msg row joined with its message.
type InboxEntry struct {
	UID       uint64
	Seq       uint64
	MsgID     uint64
	ConvID    uint64
	ConvType  ConvType
	ConvSeq   uint64
	SenderUID uint64
	CreatedAt time.Time
	Content   string
	// PrevSeq is the uid's highest committed seq before this entry (0 if
	// none). It is set on the write path only; the hot cache uses it to keep
	// its ZSet a gap-free suffix of the inbox.
	PrevSeq uint64
	// Missing is true when the inbox row exists but its content does not
	// (reverse reconciliation's case); Content is then empty.
	Missing bool
}

// ConvSummary is one conversation's line in a truncated pull's summary.
type ConvSummary struct {
	ConvID   uint64   `json:"conv_id"`
	ConvType ConvType `json:"conv_type"`
	Unread   uint64   `json:"unread"`
	MinSeq   uint64   `json:"min_seq"`
	MaxSeq   uint64   `json:"max_seq"`
}

// PullResult is one page of an inbox (or of one conversation in it).
type PullResult struct {
	Msgs       []InboxEntry
	HasMore    bool
	NextCursor uint64
	// Truncated marks a "latest N + summary" answer past the unread
	// threshold; Summary then lists each conversation's unread span.
	Truncated bool
	Summary   []ConvSummary
	// Source says where the page came from: "cache" or "mysql".
	Source string
}

// Outbox states of a StoredMessage (mq_outbox.status, or none).
const (
	OutboxNone      = -1 // no mq_outbox row names the message
	OutboxPending   = 0
	OutboxPublished = 1
	OutboxConfirmed = 2
)

// StoredMessage is what the store of record holds of one message for one
// uid, read directly from MySQL (the lab's read-after-ACK probe).
type StoredMessage struct {
	MsgID uint64
	UID   uint64
	// Content: the msg_content row exists; ConvID and ConvSeq are its.
	Content bool
	ConvID  uint64
	ConvSeq uint64
	// InInbox: uid's offline_msg row of the message exists, at InboxSeq.
	InInbox  bool
	InboxSeq uint64
	// Outbox is the mq_outbox row's status, or OutboxNone.
	Outbox int
}

// Error taxonomy. Every error that reaches the API wraps one of these; the
// HTTP layer maps them to codes and statuses and never shows internals.
var (
	ErrInvalid      = errors.New("invalid_argument")  // 400
	ErrUnauthorized = errors.New("unauthenticated")   // 401
	ErrForbidden    = errors.New("permission_denied") // 403
	ErrNotFound     = errors.New("not_found")         // 404
	ErrConflict     = errors.New("conflict")          // 409
	ErrTooLarge     = errors.New("too_large")         // 413
	ErrRateLimited  = errors.New("rate_limited")      // 429
	ErrUnavailable  = errors.New("unavailable")       // 503
	// ErrCursorAhead refuses a cursor ack past what the device was served (409).
	ErrCursorAhead = errors.New("cursor_beyond_served")
)

// RateLimitError carries how long to wait; it wraps ErrRateLimited.
type RateLimitError struct{ RetryAfter time.Duration }

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("rate limited: retry after %s", e.RetryAfter)
}

// Unwrap makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimitError) Unwrap() error { return ErrRateLimited }
