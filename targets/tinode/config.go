package tinode

import (
	"net/url"
	"strings"
	"time"
)

// Defaults and named limits.
const (
	// DefaultProtocolVersion is the wire protocol version sent in {hi}: the
	// version of the server line this client was tested against.
	DefaultProtocolVersion = "0.25"
	DefaultUserAgent       = "imlab/1 (tinode driver)"
	DefaultDialTimeout     = 5 * time.Second
	DefaultRequestTimeout  = 10 * time.Second
	DefaultWriteTimeout    = 5 * time.Second
	// DefaultMaxFrameBytes bounds one server frame. The server's own limit
	// on a client message is its max_message_size (128 KiB by default); a
	// {data} frame adds its envelope to that.
	DefaultMaxFrameBytes = 1 << 20
	// DefaultMaxPending bounds the requests of one session awaiting their
	// answer.
	DefaultMaxPending = 4096
	// DefaultPushQueue bounds the unsolicited frames ({data}, notices)
	// queued for the session's reader of Pushes; past it they are dropped
	// and counted (Stats.PushesDropped).
	DefaultPushQueue = 1024
	// DefaultPageLimit is the limit asked for in each {get what="data"}
	// page. The server answers at most its own cap per page (which may be
	// lower); History pages on until the range is exhausted either way.
	DefaultPageLimit = 1024
	// DefaultMaxResults is the server's store_config.max_results default:
	// the most delete-log rows it returns for one {get what="del"}.
	DefaultMaxResults = 1024
	// DefaultMaxHistory bounds the messages one History call assembles.
	DefaultMaxHistory = 1_000_000
)

// Config of a session. Zero fields take the defaults above.
type Config struct {
	// URL of the server's WebSocket endpoint, ws:// or wss://, e.g.
	// ws://127.0.0.1:6060/v0/channels.
	URL string
	// APIKey is sent as the X-Tinode-APIKey header (the server requires one
	// on every connection).
	APIKey string
	// ProtocolVersion is {hi}'s ver; UserAgent its ua; DeviceID its dev
	// (optional: one device id per simulated device).
	ProtocolVersion string
	UserAgent       string
	DeviceID        string

	// DialTimeout bounds the WebSocket upgrade and the {hi} exchange.
	DialTimeout time.Duration
	// RequestTimeout bounds the wait for one answer; past it the request's
	// outcome is unknown (ErrUnknownOutcome). A context deadline shorter
	// than this wins.
	RequestTimeout time.Duration
	// WriteTimeout bounds one frame write; a write that fails closes the
	// session.
	WriteTimeout time.Duration
	// MaxFrameBytes bounds one frame read; a larger frame closes the
	// session.
	MaxFrameBytes int64
	// MaxPending bounds the requests awaiting an answer (ErrTooManyPending).
	MaxPending int
	// PushQueue bounds the Pushes channel.
	PushQueue int
	// Presence also delivers {pres} and {info} frames on Pushes (otherwise
	// they are counted in Stats.Ignored and dropped).
	Presence bool
	// PageLimit is the limit of each {get what="data"} page.
	PageLimit int
	// MaxResults must be at most the server's store_config.max_results: it
	// is the limit of each {get what="del"} page, and a full page is how
	// this client knows more may follow (the protocol does not say).
	MaxResults int
	// MaxHistory bounds the messages one History call returns
	// (ErrTruncated past it).
	MaxHistory int
}

func (c Config) withDefaults() Config {
	if c.ProtocolVersion == "" {
		c.ProtocolVersion = DefaultProtocolVersion
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	setDur := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	setDur(&c.DialTimeout, DefaultDialTimeout)
	setDur(&c.RequestTimeout, DefaultRequestTimeout)
	setDur(&c.WriteTimeout, DefaultWriteTimeout)
	setInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	setInt(&c.MaxPending, DefaultMaxPending)
	setInt(&c.PushQueue, DefaultPushQueue)
	setInt(&c.PageLimit, DefaultPageLimit)
	setInt(&c.MaxResults, DefaultMaxResults)
	setInt(&c.MaxHistory, DefaultMaxHistory)
	return c
}

// Validate checks c after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	u, err := url.Parse(c.URL)
	if err != nil {
		return invalidf("url %q: %v", c.URL, err)
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return invalidf("url %q: scheme must be ws or wss", c.URL)
	}
	if u.Host == "" {
		return invalidf("url %q: no host", c.URL)
	}
	if strings.ContainsAny(c.APIKey, "\r\n") {
		return invalidf("api key holds a line break")
	}
	for name, d := range map[string]time.Duration{
		"DialTimeout": c.DialTimeout, "RequestTimeout": c.RequestTimeout, "WriteTimeout": c.WriteTimeout,
	} {
		if d < 0 {
			return invalidf("%s %v < 0", name, d)
		}
	}
	for name, v := range map[string]int{
		"MaxPending": c.MaxPending, "PushQueue": c.PushQueue, "PageLimit": c.PageLimit,
		"MaxResults": c.MaxResults, "MaxHistory": c.MaxHistory,
	} {
		if v < 0 {
			return invalidf("%s %d < 0", name, v)
		}
	}
	if c.MaxFrameBytes < 0 {
		return invalidf("MaxFrameBytes %d < 0", c.MaxFrameBytes)
	}
	return nil
}
