// Package targets is the interface through which the lab (the load
// generator, and through its ledger the checker, the scenario runner and the
// capacity search) talks to a server under test: a Driver per target
// (targets/ref for the reference server's HTTP + WebSocket contract, a
// Tinode driver for Tinode's JSON over WebSocket), Sessions per device, the
// classification of every answer, and what the target offers
// (Capabilities, the ledger's). It owns the vocabulary only: it holds no
// connection, starts no goroutine and must not import a driver (the
// targets/drivers package chooses one by name or URL scheme).
//
// # Identities
//
// The lab names users, groups and conversations by numbers (uid, group id,
// conv_id, conv_seq, inbox seq) because the ledger does. A driver maps them
// to what its target uses (Tinode's user ids and topic names) and keeps the
// map for the run: Provision creates the population under a per-run prefix
// so that runs never collide, and Session opens a device of one of its
// users. A target that has no per-user inbox answers seq 0 everywhere and
// says so (Capabilities.Inbox false); one whose conversations have no
// numeric id gets one from its driver, stable for the run.
//
// # Answers
//
// Every method that asks the target for something returns either its
// answer or an error that Classify sorts into one of three classes, which
// is what the ledger records: Failed (the target certainly did nothing: a
// definite refusal), Unknown (it may or may not have acted: a timeout, a
// lost connection, a 5xx), and Retryable (it did nothing and asks to be
// asked again later, *Error.RetryAfter; once the caller gives up it counts
// as Failed). A bad argument the driver refuses before sending anything
// is ErrInvalid, class Failed.
//
// # Capabilities
//
// Capabilities say what a target lacks, so that the generator does not
// ask for it (an action of the client mix a target does not offer is a
// configuration error) and the checker names the findings it cannot make:
// no inbox (no Pull, Ack, conversation pull), no idempotent send (a
// retried send may be stored twice), no actions of some kinds. A method
// the target does not offer answers an *Error with Class Failed and Code
// CodeNotOffered, never a silent success.
package targets

import (
	"context"
	"errors"
	"fmt"
	"time"

	"imlab/ledger"
)

// Capabilities say what a target offers (the ledger's header records them).
type Capabilities = ledger.Capabilities

// ErrInvalid marks a bad configuration or argument (class Failed).
var ErrInvalid = errors.New("targets: invalid")

// Named limits of the lab's requests (a driver may enforce lower ones of
// its target).
const (
	// MaxPullLimit bounds the entries of one inbox pull page.
	MaxPullLimit = 500
	// MaxConvPullLimit bounds the entries of one conversation pull page.
	MaxConvPullLimit = 50
	// MaxHistoryRange bounds To-From+1 of one history page.
	MaxHistoryRange = 1000
)

// CodeNotOffered is the Code of an *Error answering a method the target
// does not offer.
const CodeNotOffered = "not_offered"

// Conversation types (the ledger's: Attempt.ConvType).
const (
	ConvSingle uint8 = 1 // one to one: SendReq.ToUID
	ConvGroup  uint8 = 2 // a group: SendReq.GroupID
)

// Driver is one target: it provisions the population, opens device
// sessions and says what the target offers. It is safe for concurrent use.
type Driver interface {
	// Name is the driver's name ("ref", "tinode"), as Capabilities.Driver.
	Name() string
	// Capabilities are what the target offers.
	Capabilities() Capabilities
	// Warm opens the driver's connections before a run, so that the first
	// sends of a schedule do not pay for connecting; an error says the
	// target is not answering.
	Warm(ctx context.Context) error
	// Provision makes the population exist on the target: users (accounts,
	// where the target has them) and groups with their members. Running it
	// again with the same population is a no-op.
	Provision(ctx context.Context, p Population) error
	// Session returns the session of device did of user uid. It may
	// connect lazily: opening one costs nothing until it is used.
	Session(ctx context.Context, uid uint64, did string) (Session, error)
	// Close releases the driver's connections; sessions are useless after.
	Close() error
}

// Population is what Provision creates. Prefix is the run's own (letters,
// digits, '-'), for the names a target needs (logins, topic names) so that
// runs never collide.
type Population struct {
	Prefix string
	Users  []uint64
	Groups []Group
}

// Group is one group of the population, created by device CreatorDID of
// Members[0] (a target that registers devices on first contact sees only
// the population's own devices).
type Group struct {
	ID         uint64
	Members    []uint64
	CreatorDID string
}

// Session is one device (uid, did) of the population. Its methods are safe
// for concurrent use; each is bounded in time by the driver's timeout (and
// by ctx where it waits).
type Session interface {
	// UID and DID name the device.
	UID() uint64
	DID() string

	// Send sends one message and waits for the target's ACK.
	Send(ctx context.Context, r *SendReq) (SendAck, error)

	// Pull reads one page of the user's inbox (Capabilities.Inbox).
	Pull(ctx context.Context, o PullOpts) (PullPage, error)
	// Ack acknowledges the device's inbox cursor up to seq and answers
	// the cursor the target holds (Capabilities.Inbox).
	Ack(ctx context.Context, seq uint64) (uint64, error)
	// Connect opens the device's push connection.
	Connect(ctx context.Context) (Conn, error)
	// DialSender opens a connection that carries sends of this device
	// over the push transport, many at once (SendVia ws).
	DialSender(ctx context.Context) (Sender, error)

	// ConvPull reads one page of this conversation's entries of the
	// user's inbox above a cursor (action "conv-pull").
	ConvPull(ctx context.Context, o ConvPullOpts) (PullPage, error)
	// History reads a conversation's history From..To by conv_seq, as
	// the target shows it to this user (action "history").
	History(ctx context.Context, o HistoryOpts) ([]HistoryItem, error)
	// Revoke revokes the user's own message for everyone (action "revoke").
	Revoke(ctx context.Context, convID, convSeq uint64) error
	// Delete deletes a message for this user only (action "delete").
	Delete(ctx context.Context, convID, convSeq uint64) error
	// Clear clears the conversation for this user and answers the
	// watermark in force: history shows the user only conv_seqs above it
	// (action "clear").
	Clear(ctx context.Context, convID uint64) (minSeq uint64, err error)
	// MarkRead marks conv_seqs From..To of a one-to-one conversation read
	// by this user (action "read").
	MarkRead(ctx context.Context, convID, from, to uint64) error
}

// SendReq is one message to send. ClientMsgID identifies the send: a
// target with idempotent send stores a retry of it once; a driver of one
// without carries it in the message so that a duplicate is recognisable.
type SendReq struct {
	ClientMsgID string
	ConvType    uint8  // ConvSingle or ConvGroup
	ToUID       uint64 // ConvSingle
	GroupID     uint64 // ConvGroup
	Content     string
}

// SendAck is the target's ACK of a send: the message's id, its
// conversation and its place there. ServerTime is the target's clock in
// unix milliseconds (0: not given).
type SendAck struct {
	MsgID      uint64
	ConvID     uint64
	ConvSeq    uint64
	ServerTime int64
}

// Msg is one message as a device receives it (a pull page's entry or a
// push). Seq is the user's inbox seq (0 on a target without an inbox).
type Msg struct {
	Seq       uint64
	MsgID     uint64
	ConvID    uint64
	ConvType  uint8
	ConvSeq   uint64
	SenderUID uint64
	CreatedAt int64 // unix milliseconds
	Content   string
}

// PullOpts selects an inbox page.
type PullOpts struct {
	Cursor    uint64
	UseCursor bool // false: from the device's stored cursor
	Limit     int  // 1..MaxPullLimit
	Full      bool // page the whole backlog even past an unread threshold
}

// PullPage is one page of an inbox or conversation pull. Truncated: the
// target answered a summary instead of the backlog (pull again with Full).
type PullPage struct {
	Msgs       []Msg
	HasMore    bool
	NextCursor uint64
	Truncated  bool
}

// ConvPullOpts selects a page of one conversation's inbox entries above
// Cursor (an inbox seq).
type ConvPullOpts struct {
	ConvID uint64
	Cursor uint64
	Limit  int // 1..MaxConvPullLimit
}

// HistoryOpts selects a history page by conv_seq, From..To inclusive
// (To-From+1 <= MaxHistoryRange).
type HistoryOpts struct {
	ConvID   uint64
	From, To uint64
}

// HistoryItem is one message of a history page as the user sees it: a
// Tombstone carries ConvSeq only; Read is nil when the target said nothing
// of it.
type HistoryItem struct {
	ConvSeq   uint64
	MsgID     uint64
	SenderUID uint64
	CreatedAt int64
	Content   string
	Revoked   bool
	Tombstone bool
	Read      *bool
}

// PushMsg is the Type of a push that carries a message.
const PushMsg = "msg"

// Push is one frame a push connection received: a message (Type PushMsg,
// Msg; PrevSeq the inbox seq of the user's previous entry, 0 when the
// target does not say), or another frame the device may ignore (Type
// names it).
type Push struct {
	Type    string
	PrevSeq uint64
	Msg     Msg
}

// Conn is a device's push connection. One goroutine may Recv while others
// Ack; Close ends a Recv in progress.
type Conn interface {
	// Recv returns the next push; a zero deadline waits until the
	// connection ends. An error ends the connection.
	Recv(deadline time.Time) (Push, error)
	// Ack acknowledges the inbox cursor up to seq over the connection
	// (no answer comes back).
	Ack(seq uint64) error
	Close() error
}

// Sender carries many concurrent sends over one connection.
type Sender interface {
	// Send sends and waits up to timeout for the ACK.
	Send(ctx context.Context, r *SendReq, timeout time.Duration) (SendAck, error)
	// Done is closed once the connection has ended (the Sender is then
	// useless: dial another).
	Done() <-chan struct{}
	Close() error
}

// Class sorts an answer for the ledger.
type Class uint8

// Classes of an answer.
const (
	OK        Class = iota // answered: it happened
	Failed                 // definitely refused: nothing happened
	Unknown                // it may or may not have happened
	Retryable              // nothing happened; ask again after RetryAfter
)

func (c Class) String() string {
	switch c {
	case OK:
		return "ok"
	case Failed:
		return "failed"
	case Unknown:
		return "unknown"
	case Retryable:
		return "retryable"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Error is a target's answer other than success, or a failure to get one.
// Status is the answer's status in HTTP terms (a driver of another
// protocol maps its codes to the nearest; 0: no answer came).
type Error struct {
	Class      Class
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration
	Err        error // the cause (transport error, the driver's own error)
}

func (e *Error) Error() string {
	switch {
	case e.Status == 0 && e.Err != nil:
		return fmt.Sprintf("%s: %v", e.Class, e.Err)
	case e.Err != nil && e.Message == "":
		return fmt.Sprintf("%s: status %d %s: %v", e.Class, e.Status, e.Code, e.Err)
	}
	return fmt.Sprintf("%s: status %d %s: %s", e.Class, e.Status, e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Classify sorts err: nil is OK, an *Error its Class, ErrInvalid Failed,
// anything else (a cancelled context included) Unknown.
func Classify(err error) Class {
	if err == nil {
		return OK
	}
	var te *Error
	if errors.As(err, &te) {
		return te.Class
	}
	if errors.Is(err, ErrInvalid) {
		return Failed
	}
	return Unknown
}

// StatusOf is err's status in HTTP terms (200 for nil, 0 when no answer
// came).
func StatusOf(err error) int {
	if err == nil {
		return 200
	}
	var te *Error
	if errors.As(err, &te) {
		return te.Status
	}
	return 0
}

// RetryAfterOf is how long err asks the caller to wait (0: not said).
func RetryAfterOf(err error) time.Duration {
	var te *Error
	if errors.As(err, &te) {
		return te.RetryAfter
	}
	return 0
}

// NotOffered is the error of a method the target does not offer.
func NotOffered(driver, what string) *Error {
	return &Error{Class: Failed, Status: 501, Code: CodeNotOffered, Message: driver + " does not offer " + what}
}

// ClassOfStatus is the class of an HTTP-like status: 2xx OK; 429
// Retryable; another 4xx but 408 Failed; the rest (408, 5xx, 0: no
// answer) Unknown.
func ClassOfStatus(status int) Class {
	switch {
	case status >= 200 && status < 300:
		return OK
	case status == 429:
		return Retryable
	case status >= 400 && status < 500 && status != 408:
		return Failed
	}
	return Unknown
}
