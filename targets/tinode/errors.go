package tinode

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns wraps exactly one of
// the outcome classes below, so OutcomeOf can tell a caller what it may
// conclude about a request.
var (
	// ErrInvalid: a bad argument or config. Nothing was sent.
	ErrInvalid = errors.New("tinode: invalid argument")
	// ErrClosed: the session had ended before the request was written.
	// Nothing was sent.
	ErrClosed = errors.New("tinode: session closed")
	// ErrTooManyPending: Config.MaxPending requests were already awaiting
	// their answer. Nothing was sent.
	ErrTooManyPending = errors.New("tinode: too many requests awaiting an answer")
	// ErrNotSent: the context ended before the request was written.
	// Nothing was sent.
	ErrNotSent = errors.New("tinode: request not sent")
	// ErrDial: the WebSocket could not be opened. Nothing was sent.
	ErrDial = errors.New("tinode: cannot connect")

	// ErrRejected: the server answered with a 3xx or 4xx {ctrl}: it refused
	// the request (see *ServerError for the code).
	ErrRejected = errors.New("tinode: refused by the server")
	// ErrServerFailure: the server answered with a 5xx {ctrl}: it says the
	// request failed. Whether a failed {pub} left nothing behind is exactly
	// what the lab's checker verifies; this package reports the answer.
	ErrServerFailure = errors.New("tinode: server reported a failure")

	// ErrUnknownOutcome: the request was written (or may have been) but no
	// answer came: timeout, cancelled context, lost connection. The server
	// may or may not have acted on it. Never a failure.
	ErrUnknownOutcome = errors.New("tinode: outcome unknown")
	// ErrProtocol: an answer this client cannot interpret (malformed frame,
	// missing field, a history page out of order). For a write the outcome
	// is unknown.
	ErrProtocol = errors.New("tinode: protocol violation")
	// ErrTruncated: a result does not fit a named limit of this client
	// (Config.MaxHistory) or could not be read completely through the
	// protocol's pages (a delete transaction with more ranges than
	// Config.MaxResults). Nothing is returned in part.
	ErrTruncated = errors.New("tinode: result truncated")
)

// ServerError is a {ctrl} answer with a code of 300 or more.
type ServerError struct {
	Op     string // hi, acc, login, sub, leave, pub, get, set, del
	Topic  string
	Code   int
	Text   string
	Params json.RawMessage
}

func (e *ServerError) Error() string {
	if e.Topic != "" {
		return fmt.Sprintf("tinode: %s %s: %d %s", e.Op, e.Topic, e.Code, e.Text)
	}
	return fmt.Sprintf("tinode: %s: %d %s", e.Op, e.Code, e.Text)
}

// Unwrap places the answer in its outcome class: ErrServerFailure for 5xx,
// ErrRejected otherwise.
func (e *ServerError) Unwrap() error {
	if e.Code >= 500 {
		return ErrServerFailure
	}
	return ErrRejected
}

// Codes of {ctrl} answers this client gives a meaning to (HTTP model).
const (
	CodeOK           = 200
	CodeCreated      = 201 // {hi}
	CodeAccepted     = 202 // {pub}: params.seq is the message's seq
	CodeNoContent    = 204 // {get}: nothing matched
	CodeResetContent = 205 // unsolicited: topic evicted / server shutdown
	CodeDelivered    = 208 // {get what="data"}: all {data} frames sent
	CodeBadRequest   = 400
	CodeUnauthorized = 401
	CodeForbidden    = 403
	CodeNotFound     = 404
	CodeConflict     = 409 // includes "must attach first", "duplicate credential"
	CodeInternal     = 500
	CodeUnavailable  = 503
)

// IsCode reports whether err carries a server answer with the given code.
func IsCode(err error, code int) bool {
	var se *ServerError
	return errors.As(err, &se) && se.Code == code
}

// Outcome is what a caller may conclude about a request from its error.
type Outcome int

const (
	// OutcomeOK: the server answered success.
	OutcomeOK Outcome = iota
	// OutcomeFailed: definitely not done by this client's say-so: not sent,
	// or the server answered an error code.
	OutcomeFailed
	// OutcomeUnknown: sent, no interpretable answer.
	OutcomeUnknown
)

func (o Outcome) String() string {
	switch o {
	case OutcomeOK:
		return "ok"
	case OutcomeFailed:
		return "failed"
	default:
		return "unknown"
	}
}

// OutcomeOf classifies err. Any error this package did not produce is
// unknown: only an explicit answer or a request never written is a failure.
func OutcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, ErrUnknownOutcome), errors.Is(err, ErrProtocol):
		return OutcomeUnknown
	case errors.Is(err, ErrRejected), errors.Is(err, ErrServerFailure),
		errors.Is(err, ErrInvalid), errors.Is(err, ErrClosed), errors.Is(err, ErrTooManyPending),
		errors.Is(err, ErrNotSent), errors.Is(err, ErrDial):
		return OutcomeFailed
	default:
		return OutcomeUnknown
	}
}

// UnknownError is a request that was written (or may have been) and got no
// interpretable answer. ID is the request id it was sent with: should the
// answer arrive later it is delivered on Pushes as PushLate with that id.
type UnknownError struct {
	Op, Topic, ID string
	Cause         error
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("tinode: outcome unknown: %s %s (id %s): %v", e.Op, e.Topic, e.ID, e.Cause)
}

// Unwrap yields ErrUnknownOutcome and the cause (context.DeadlineExceeded,
// the connection's read error, ErrProtocol, ...).
func (e *UnknownError) Unwrap() []error { return []error{ErrUnknownOutcome, e.Cause} }

func protocolf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
