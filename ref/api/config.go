package api

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"imlab/ref/auth"
	"imlab/ref/history"
	"imlab/ref/model"
)

// Named limits of the HTTP surface (see the package doc).
const (
	// MaxBodyBytes bounds a request body (and a WebSocket client frame):
	// larger bodies get 413 too_large. 32 KiB holds the largest valid send
	// body (4096 content bytes, each JSON-escaped to at most 6 bytes) and a
	// group of 500 members.
	MaxBodyBytes = 32 << 10
	// MaxReadBodyBytes is how much of an oversized body the server still
	// reads so that it can answer 413 as JSON on a connection the client is
	// still writing to. A body larger than this is refused by closing the
	// connection (fasthttp's own 413), never buffered.
	MaxReadBodyBytes = 4 * MaxBodyBytes
	// MaxHeaderBytes bounds the request line plus the header fields: it is
	// the server's read buffer. A request whose line alone overflows it is
	// answered 414 too_large, one whose headers do 431 too_large, both as
	// JSON, and the connection is closed.
	MaxHeaderBytes = 16 << 10
	// MaxRequestURIBytes bounds the request target (path and query) of a
	// request that fits MaxHeaderBytes: longer gets 414 too_large.
	MaxRequestURIBytes = 8 << 10
)

// Sender is the write side the API calls (ref/send.Service satisfies it).
type Sender interface {
	Send(ctx context.Context, req model.SendRequest) (model.SendResult, error)
	CreateGroup(ctx context.Context, groupID uint64, members []uint64) error
}

// Puller is the read side the API calls (ref/pull.Service satisfies it).
type Puller interface {
	Pull(ctx context.Context, uid uint64, did string, cursor *uint64, limit int, full bool) (model.PullResult, error)
	ConvPull(ctx context.Context, uid uint64, did string, convID, cursor uint64, limit int) (model.PullResult, error)
	Ack(ctx context.Context, uid uint64, did string, pullSeq uint64) (uint64, error)
	MarkServed(ctx context.Context, uid uint64, did string, seq uint64) error
	// MarkServedAck is MarkServed(seq) then Ack(seq) as one write (a seq
	// pushed over WebSocket and acknowledged).
	MarkServedAck(ctx context.Context, uid uint64, did string, seq uint64) (uint64, error)
	// Register makes the device known to the store before it is served
	// anything (the WebSocket upgrade calls it), so that retention waits
	// for its cursor (ref/pull Service.Register).
	Register(ctx context.Context, uid uint64, did string) error
}

// LabStore is the lab's read of the store of record, bypassing every cache
// (ref/pull.StoreReader satisfies it). It backs the lab routes, mounted only
// when Deps.Lab is set.
type LabStore interface {
	// Policy is the process's ack policy name.
	Policy() string
	Inbox(ctx context.Context, uid, after uint64, limit int) (model.PullResult, error)
	Message(ctx context.Context, uid, msgID uint64) (model.StoredMessage, error)
}

// LabHistory is the lab's read of the history store as stored
// (ref/history.Service satisfies it). It backs GET /v1/lab/history, which
// is mounted with the lab routes (Deps.Lab) and answers 501 without it.
type LabHistory interface {
	Witness(ctx context.Context, uid, convID, fromSeq, toSeq uint64) (history.Witness, error)
}

// Subscription is one device's push stream (ref/push, adapted in
// ref/server). Frames carries complete JSON server frames and is closed when
// the subscription ends (frames already queued are still written first);
// Reason then says why. MaxPushed is the highest inbox seq put on Frames so
// far. Close is idempotent.
type Subscription interface {
	Frames() <-chan []byte
	Reason() string
	MaxPushed() uint64
	Close()
}

// Hub opens push subscriptions.
type Hub interface {
	Subscribe(uid uint64, did string) (Subscription, error)
}

// ItemEncoder appends one inbox entry as the JSON object of the contract
// ({"seq","msg_id","conv_id","conv_type","conv_seq","sender_uid",
// "created_at","content"}). The push hub frames messages with the same
// encoder so a pulled item and a pushed frame cannot drift apart.
type ItemEncoder func(dst []byte, e model.InboxEntry) []byte

// Caller is the authenticated identity of a request: always the token's,
// never a parameter.
type Caller struct {
	UID uint64
	DID string
}

// HandlerFunc serves one authenticated route mounted from outside the
// package (the history routes, later roles). The API has already checked
// the token, the method and the body size; the handler parses its input with
// Request's strict helpers and returns a value to encode as JSON (200) or an
// error wrapping a model.Err* sentinel.
type HandlerFunc func(ctx context.Context, c Caller, r *Request) (any, error)

// Route mounts a HandlerFunc at an exact method and path under /v1/.
type Route struct {
	Method string // "GET" or "POST"
	Path   string // e.g. "/v1/history"
	Name   string // metric label, e.g. "history"
	Handle HandlerFunc
}

// OpenRoute mounts an unauthenticated GET route under /v1/ for operational
// data that carries no user content (like /metrics): e.g. the queue lag
// snapshot at /v1/lab/lag. Handle returns a value to encode as JSON (200)
// or an error wrapping a model.Err* sentinel; the query string must be
// empty.
type OpenRoute struct {
	Path   string // e.g. "/v1/lab/lag"
	Name   string // metric label
	Handle func(ctx context.Context) (any, error)
}

// History holds the history routes (ref/history). A nil handler answers 501
// not_implemented, so the contract's routes exist before their owner lands.
type History struct {
	Get    HandlerFunc // GET  /v1/history?conv_id=&from_seq=&to_seq=
	Revoke HandlerFunc // POST /v1/msg/revoke {"conv_id","conv_seq"}
	Delete HandlerFunc // POST /v1/msg/delete {"conv_id","conv_seq"}
	Clear  HandlerFunc // POST /v1/conv/clear {"conv_id"}
}

// WSConfig tunes /v1/ws.
type WSConfig struct {
	// PingInterval is how often the server pings; PongWait how long it
	// waits for any frame or pong before dropping the connection.
	PingInterval time.Duration
	PongWait     time.Duration
	// WriteWait bounds one frame write.
	WriteWait time.Duration
	// HandshakeTimeout bounds the upgrade; a subscription whose upgrade did
	// not complete in time is closed.
	HandshakeTimeout time.Duration
	// CloseGrace is how long the server waits for the client's close frame
	// after sending its own.
	CloseGrace time.Duration
	// ReplyQueue bounds the replies (send_ack, acked, error) waiting for the
	// connection's writer; the reader blocks when it is full.
	ReplyQueue int
}

// Config tunes the HTTP surface.
type Config struct {
	// RequestTimeout bounds the service call of one request or ws frame.
	RequestTimeout time.Duration
	// ReadTimeout, WriteTimeout and IdleTimeout are the fasthttp connection
	// timeouts.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
	// Concurrency bounds the requests served at once (fasthttp answers 503
	// beyond it).
	Concurrency int
	WS          WSConfig
}

// DefaultConfig returns the defaults used by imlab ref.
func DefaultConfig() Config {
	return Config{
		RequestTimeout: 10 * time.Second,
		ReadTimeout:    30 * time.Second,
		WriteTimeout:   30 * time.Second,
		IdleTimeout:    60 * time.Second,
		Concurrency:    64 << 10,
		WS: WSConfig{
			PingInterval:     20 * time.Second,
			PongWait:         60 * time.Second,
			WriteWait:        10 * time.Second,
			HandshakeTimeout: 10 * time.Second,
			CloseGrace:       2 * time.Second,
			ReplyQueue:       64,
		},
	}
}

// Validate checks every field.
func (c Config) Validate() error {
	pos := func(name string, d time.Duration) error {
		if d <= 0 {
			return fmt.Errorf("%w: api %s must be > 0", model.ErrInvalid, name)
		}
		return nil
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"request timeout", c.RequestTimeout}, {"read timeout", c.ReadTimeout},
		{"write timeout", c.WriteTimeout}, {"idle timeout", c.IdleTimeout},
		{"ws ping interval", c.WS.PingInterval}, {"ws pong wait", c.WS.PongWait},
		{"ws write wait", c.WS.WriteWait}, {"ws handshake timeout", c.WS.HandshakeTimeout},
		{"ws close grace", c.WS.CloseGrace},
	} {
		if err := pos(f.name, f.d); err != nil {
			return err
		}
	}
	if c.WS.PongWait <= c.WS.PingInterval {
		return fmt.Errorf("%w: api ws pong wait must exceed the ping interval", model.ErrInvalid)
	}
	if c.Concurrency <= 0 {
		return fmt.Errorf("%w: api concurrency must be > 0", model.ErrInvalid)
	}
	if c.WS.ReplyQueue <= 0 || c.WS.ReplyQueue > 1<<16 {
		return fmt.Errorf("%w: api ws reply queue must be in 1..65536", model.ErrInvalid)
	}
	return nil
}

// Deps are the collaborators of the API. Auth, Send, Pull and Registry are
// required; Hub nil answers /v1/ws with 501; History handlers may be nil.
type Deps struct {
	Auth    *auth.Authority
	Send    Sender
	Pull    Puller
	Hub     Hub
	History History
	Extra   []Route
	Open    []OpenRoute // unauthenticated GET routes (operational data only)
	// Lab mounts the lab routes /v1/lab/inbox, /v1/lab/stored and
	// /v1/lab/history (nil: not mounted, 404). For the lab only: never in a
	// production-like set-up.
	Lab LabStore
	// LabHistory serves /v1/lab/history when Lab is set (nil: 501, the
	// process has no history store).
	LabHistory LabHistory
	Encoder    ItemEncoder // nil: EncodeItem
	Registry   *prometheus.Registry
	Logger     *slog.Logger // nil: discard
}
