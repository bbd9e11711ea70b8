package targets

import (
	"context"
	"errors"
	"time"
)

// This file holds what a target offers only inside the lab: reads of its
// stores that bypass what a client sees, its queue lag and its clock. A
// driver offers them by implementing LabDriver and its sessions LabSession;
// the generator names the checks it cannot make without them.

// LabDriver is a target's lab-only view of itself.
type LabDriver interface {
	// QueueLag reads the target's queue lag now.
	QueueLag(ctx context.Context) (QueueLag, error)
	// EstimateClock samples the target's wall clock n times.
	EstimateClock(ctx context.Context, n int) (Clock, error)
}

// LabSession reads a user's data as the target's stores hold it.
type LabSession interface {
	// StoredInbox reads one page (limit 1..MaxPullLimit) of the user's
	// inbox as the store of record holds it, after seq after.
	StoredInbox(ctx context.Context, after uint64, limit int) (StoredPage, error)
	// Stored reads what the store holds of msgID for the user.
	Stored(ctx context.Context, msgID uint64) (StoredMsg, error)
}

// StoredPage is a page of a user's inbox as stored, and the target's ack
// policy.
type StoredPage struct {
	Policy     string
	Msgs       []Msg
	HasMore    bool
	NextCursor uint64
}

// StoredMsg is what the store holds of one message for one user. Outbox
// is the outbox row's state: none, pending, published or confirmed.
type StoredMsg struct {
	Policy  string
	MsgID   uint64
	UID     uint64
	Content bool
	ConvID  uint64
	ConvSeq uint64
	Inbox   bool
	Seq     uint64
	Outbox  string
}

// ErrNoQueue is what LabDriver.QueueLag wraps when the target says it has
// no queue (its topology has none): no lag to measure, which is not a
// failed measurement.
var ErrNoQueue = errors.New("targets: the target has no queue")

// QueueLag is the target's queue lag: per consumer group, records behind
// and the age of the oldest unprocessed message.
type QueueLag struct {
	MaxAgeSeconds map[string]float64
	UnknownAge    map[string]int
	Records       map[string]int64
	OutboxBacklog int64
	Errors        []string
}

// Clock is an estimate of the target's wall clock against this machine's.
// Offset: the target's clock minus ours (positive: the target is ahead).
// Precision bounds the error of Offset. Source says how it was read.
type Clock struct {
	Offset    time.Duration `json:"offset_ns"`
	Precision time.Duration `json:"precision_ns"`
	Source    string        `json:"source"`
	Samples   int           `json:"samples"`
}

// LabHistoryReader reads a conversation's history as stored, without
// projection (a Session's optional lab view).
type LabHistoryReader interface {
	// LabHistory reads conv_seqs From..To (at most MaxHistoryRange) as the
	// store holds them; the session's user must be a party or member.
	LabHistory(ctx context.Context, o HistoryOpts) (StoredHistory, error)
}

// StoredHistory is a range of a conversation's history as stored.
// MaxSeq is the highest conv_seq the store records as written; Clears are
// every user's clear watermark (uid -> min_seq).
type StoredHistory struct {
	Slots  []StoredSlot
	MaxSeq uint64
	Clears map[uint64]uint64
}

// StoredSlot is one conv_seq that holds something: a message (Purged
// false, Invalid false), a physical deletion (Purged), or something that
// is no message (Invalid: Detail says what). StoredSeq is the conv_seq
// recorded inside the message (another than ConvSeq: written to another's
// slot). DelList: the users who deleted it for themselves.
type StoredSlot struct {
	ConvSeq   uint64
	StoredSeq uint64
	MsgID     uint64
	SenderUID uint64
	Content   string
	Revoked   bool
	Purged    bool
	Invalid   bool
	Detail    string
	IsRead    bool
	DelList   []uint64
}

// RetentionReader reads what the target's retention deleted (a Driver's
// optional lab view).
type RetentionReader interface {
	Retention(ctx context.Context) (RetentionLog, error)
}

// RetentionLog is what the target's retention deleted since it started
// and the rules in force. Active: the target runs retention at all.
// Truncated: more rows were deleted than listed. Times are the target's
// clock.
type RetentionLog struct {
	Active       bool
	MaxAge       time.Duration
	PulledMinAge time.Duration
	Interval     time.Duration
	Truncated    bool
	Rows         []RetainedRow
}

// RetainedRow is one inbox row retention deleted; Pulled: early deletion
// (every device had pulled it), else expired.
type RetainedRow struct {
	UID       uint64
	Seq       uint64
	MsgID     uint64
	ConvID    uint64
	CreatedAt time.Time
	DeletedAt time.Time
	Pulled    bool
}
