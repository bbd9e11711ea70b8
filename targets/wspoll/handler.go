package wspoll

import "errors"

// Handler takes one connection's messages, on the poller's goroutine
// (those that came with the upgrade's answer on Dial's, before Dial
// returns), one at a time and in order. It must not block: the poller
// reads every other connection.
type Handler interface {
	// Message is one whole text or binary message; b is valid only during
	// the call. A non-nil error ends the connection with it.
	Message(b []byte) error
	// Ended is called once, last: why the connection ended (a
	// *CloseError, ErrClosed after Close, ErrStopped when the poller
	// stopped, a read or protocol error).
	Ended(err error)
}

// Errors of a connection's end or of the poller.
var (
	ErrClosed      = errors.New("wspoll: connection closed")
	ErrStopped     = errors.New("wspoll: poller stopped")
	ErrUnsupported = errors.New("wspoll: needs Linux (epoll)")
)
