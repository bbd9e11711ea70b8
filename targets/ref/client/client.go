// Package client is the lab's side of the HTTP + WebSocket contract: it
// mints lab tokens, sends messages, pulls, acknowledges cursors, creates
// groups, and speaks the /v1/ws frames. It knows the JSON shapes of the
// contract and nothing of the server's internals (it must not import ref/...),
// and it decides nothing: callers classify outcomes and retry.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"
)

// ErrInvalid marks a bad configuration or argument.
var ErrInvalid = errors.New("client: invalid")

// Limits of the contract the client enforces before sending.
const (
	MaxPullLimit   = 500
	MaxGroupSize   = 500
	MinSecretLen   = 16
	maxRetryAfter  = 60 * time.Second
	maxErrBodySize = 512
)

// Config for a Client.
type Config struct {
	// Target is the server's base URL, e.g. http://127.0.0.1:8080.
	Target string
	// Secret signs lab tokens (IMLAB_SECRET).
	Secret string
	// MaxConns bounds the HTTP connection pool.
	MaxConns int
	// Timeout bounds one HTTP exchange.
	Timeout time.Duration
	// Pipeline, when > 0, pipelines HTTP/1.1 requests: up to Pipeline
	// requests in flight on each of MaxConns connections, written and read
	// in batches (far fewer system calls per request). A server answers a
	// connection's requests one at a time and in order, so a slow answer
	// delays the ones behind it, and a server that batches concurrent
	// requests (the ref server's group commit) sees at most MaxConns at
	// once: use it to measure the generator or a server with many
	// connections' worth of pipelined capacity. 0 (the default) sends one
	// request at a time per connection.
	Pipeline int
	// PipelineDelay: with Pipeline, a connection's writer waits up to this
	// long for more requests before it flushes (fewer, larger writes; each
	// answer may come this much later). 0 flushes when nothing is queued.
	PipelineDelay time.Duration
}

// Bounds of the pipelining settings.
const (
	MaxPipeline      = 4096
	MaxPipelineDelay = 10 * time.Millisecond
)

// maxWarmRequests bounds the concurrent requests of one Warm.
const maxWarmRequests = 4096

// DefaultConfig returns a pool sized for tens of thousands of requests per second.
func DefaultConfig() Config {
	return Config{MaxConns: 512, Timeout: 5 * time.Second}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	u, err := url.Parse(c.Target)
	switch {
	case err != nil || u.Scheme != "http" || u.Host == "":
		return fmt.Errorf("%w: target %q must be http://host:port", ErrInvalid, c.Target)
	case len(c.Secret) < MinSecretLen:
		return fmt.Errorf("%w: secret must be at least %d bytes", ErrInvalid, MinSecretLen)
	case c.MaxConns < 1 || c.MaxConns > 100_000:
		return fmt.Errorf("%w: max_conns %d must be in 1..100000", ErrInvalid, c.MaxConns)
	case c.Timeout <= 0:
		return fmt.Errorf("%w: timeout must be > 0", ErrInvalid)
	case c.Pipeline < 0 || c.Pipeline > MaxPipeline:
		return fmt.Errorf("%w: pipeline %d must be in 0..%d", ErrInvalid, c.Pipeline, MaxPipeline)
	case c.PipelineDelay < 0 || c.PipelineDelay > MaxPipelineDelay:
		return fmt.Errorf("%w: pipeline delay %s must be in 0..%s", ErrInvalid, c.PipelineDelay, MaxPipelineDelay)
	}
	return nil
}

// Client talks to one server. It is safe for concurrent use.
type Client struct {
	cfg    Config
	host   string
	hc     doer
	pipe   *pipePool // with Pipeline: the requests of do (hc serves the clock's samples)
	secret []byte
}

// doer is the HTTP transport of one-at-a-time connections
// (fasthttp.HostClient); pipelined requests go through pipePool.
type doer interface {
	DoTimeout(req *fasthttp.Request, resp *fasthttp.Response, timeout time.Duration) error
}

// New returns a Client.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(cfg.Target)
	c := &Client{cfg: cfg, host: u.Host, secret: []byte(cfg.Secret)}
	c.hc = &fasthttp.HostClient{
		Addr:                          u.Host,
		MaxConns:                      cfg.MaxConns,
		ReadTimeout:                   cfg.Timeout,
		WriteTimeout:                  cfg.Timeout,
		MaxIdleConnDuration:           time.Minute,
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
		MaxConnWaitTimeout:            cfg.Timeout,
	}
	if cfg.Pipeline > 0 {
		c.pipe = newPipePool(u.Host, cfg)
	}
	return c, nil
}

// Warm opens the connection pool before a run, so that the first sends of
// a schedule do not pay for connecting: n concurrent GET /healthz (n is
// capped at MaxConns). A pipelined pool spreads its requests over all its
// connections in turn, so it gets MaxConns of them (at most
// maxWarmRequests), one per connection. It fails when no request got an
// answer.
func (c *Client) Warm(ctx context.Context, n int) error {
	n = max(1, min(n, c.cfg.MaxConns))
	if c.pipe != nil {
		n = min(c.cfg.MaxConns, maxWarmRequests)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		ok      int
		lastErr error
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ctx.Err() != nil {
				return
			}
			err := c.healthz()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				lastErr = err
				return
			}
			ok++
		}()
	}
	wg.Wait()
	if ok == 0 {
		if lastErr == nil {
			lastErr = ctx.Err()
		}
		return &Error{Err: fmt.Errorf("warm %d connections to %s: %w", n, c.host, lastErr)}
	}
	return nil
}

// healthz makes one GET /healthz on the pool and reports only a transport
// error (any answer means the connection works).
func (c *Client) healthz() error {
	var ce *Error
	if err := c.do(fasthttp.MethodGet, "/healthz", "", nil, nil); errors.As(err, &ce) && ce.Status == 0 {
		return ce.Err
	}
	return nil
}

// Host returns host:port of the target.
func (c *Client) Host() string { return c.host }

// Close releases idle connections, and closes a pipelined pool's (a
// request still without an answer on one ends with a transport error).
func (c *Client) Close() {
	if hc, ok := c.hc.(*fasthttp.HostClient); ok {
		hc.CloseIdleConnections()
	}
	if c.pipe != nil {
		c.pipe.close()
	}
}

type claims struct {
	UID uint64 `json:"uid"`
	DID string `json:"did"`
	jwt.RegisteredClaims
}

// Token mints a lab token (HS256, claims uid and did, issued now, no expiry).
func (c *Client) Token(uid uint64, did string) (string, error) {
	return MintToken(c.secret, uid, did)
}

// MintToken signs a lab token with secret.
func MintToken(secret []byte, uid uint64, did string) (string, error) {
	if uid == 0 || did == "" || len(did) > 64 {
		return "", fmt.Errorf("%w: token for uid %d did %q", ErrInvalid, uid, did)
	}
	cl := claims{UID: uid, DID: did}
	cl.IssuedAt = jwt.NewNumericDate(time.Now().Add(-time.Second))
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, cl).SignedString(secret)
	if err != nil {
		return "", fmt.Errorf("client: sign token: %w", err)
	}
	return s, nil
}

// SendReq is the body of POST /v1/msg/send (and of a WebSocket send frame).
type SendReq struct {
	ClientMsgID string `json:"client_msg_id"`
	ConvType    uint8  `json:"conv_type"`
	ToUID       uint64 `json:"to_uid,omitempty"`
	GroupID     uint64 `json:"group_id,omitempty"`
	Content     string `json:"content"`
}

// appendJSON writes the request body without reflection.
func (r *SendReq) appendJSON(b []byte) []byte {
	b = append(b, `{"client_msg_id":`...)
	b = appendJSONString(b, r.ClientMsgID)
	b = append(b, `,"conv_type":`...)
	b = strconv.AppendUint(b, uint64(r.ConvType), 10)
	if r.ConvType == 2 {
		b = append(b, `,"group_id":`...)
		b = strconv.AppendUint(b, r.GroupID, 10)
	} else {
		b = append(b, `,"to_uid":`...)
		b = strconv.AppendUint(b, r.ToUID, 10)
	}
	b = append(b, `,"content":`...)
	b = appendJSONString(b, r.Content)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 replaced by U+FFFD (the server
// would refuse it; strconv.AppendQuote's \x escapes are not JSON).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		switch c {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
	}
	return append(b, '"')
}

// SendAck is the answer to a send.
type SendAck struct {
	MsgID      uint64 `json:"msg_id"`
	ConvID     uint64 `json:"conv_id"`
	ConvSeq    uint64 `json:"conv_seq"`
	ServerTime int64  `json:"server_time"`
}

// Msg is one inbox entry (pull item or push frame fields).
type Msg struct {
	Seq       uint64 `json:"seq"`
	MsgID     uint64 `json:"msg_id"`
	ConvID    uint64 `json:"conv_id"`
	ConvType  uint8  `json:"conv_type"`
	ConvSeq   uint64 `json:"conv_seq"`
	SenderUID uint64 `json:"sender_uid"`
	CreatedAt int64  `json:"created_at"`
	Content   string `json:"content"`
}

// PullResp is the answer of GET /v1/sync/pull.
type PullResp struct {
	Msgs       []Msg           `json:"msgs"`
	HasMore    bool            `json:"has_more"`
	NextCursor uint64          `json:"next_cursor"`
	Truncated  bool            `json:"truncated"`
	Summary    json.RawMessage `json:"summary,omitempty"`
}

// Error is a non-2xx answer, or a transport failure (Status 0).
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration
	Err        error // transport error when Status is 0
}

func (e *Error) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("transport: %v", e.Err)
	}
	return fmt.Sprintf("http %d %s: %s", e.Status, e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Definite tells whether the server certainly did not act on the request:
// a 4xx answer other than 408 (timeout) and 429 (retry later, nothing done).
func (e *Error) Definite() bool {
	return e.Status >= 400 && e.Status < 500 && e.Status != 408
}

func (c *Client) do(method, path, token string, body []byte, out any) error {
	if c.pipe != nil {
		call, err := c.pipe.roundTrip(method, path, token, body)
		if err != nil {
			return err
		}
		defer c.pipe.release(call)
		return decode(&call.resp, out)
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	req.Header.SetHost(c.host)
	if token != "" {
		bp := getScratch()
		*bp = append(append(*bp, "Bearer "...), token...)
		req.Header.SetBytesV("Authorization", *bp)
		putScratch(bp)
	}
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body) // a copy: the caller may reuse body at once
	}
	if err := c.hc.DoTimeout(req, resp, c.cfg.Timeout); err != nil {
		return &Error{Err: err}
	}
	return decode(resp, out)
}

// decode reads an answer: a non-2xx one is an *Error, a 2xx one's body goes
// into out.
func decode(resp *fasthttp.Response, out any) error {
	st := resp.StatusCode()
	if st/100 != 2 {
		return apiError(resp)
	}
	var perr error
	switch o := out.(type) {
	case nil:
	case *SendAck:
		perr = parseSendAck(resp.Body(), o)
	case *PullResp:
		perr = parsePull(resp.Body(), o)
	default:
		perr = json.Unmarshal(resp.Body(), out)
	}
	if perr != nil {
		return &Error{Status: st, Code: "bad_body", Message: perr.Error()}
	}
	return nil
}

func apiError(resp *fasthttp.Response) *Error {
	e := &Error{Status: resp.StatusCode()}
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	b := resp.Body()
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
	} else {
		if len(b) > maxErrBodySize {
			b = b[:maxErrBodySize]
		}
		e.Message = string(bytes.TrimSpace(b))
	}
	if ra := resp.Header.Peek("Retry-After"); len(ra) > 0 {
		if s, err := strconv.ParseFloat(strings.TrimSpace(string(ra)), 64); err == nil && s >= 0 {
			e.RetryAfter = min(time.Duration(s*float64(time.Second)), maxRetryAfter)
		}
	}
	return e
}

// Send posts one message. A non-nil error is an *Error.
func (c *Client) Send(token string, r *SendReq) (SendAck, error) {
	var ack SendAck
	bp := getScratch()
	*bp = r.appendJSON(*bp)
	err := c.do(fasthttp.MethodPost, "/v1/msg/send", token, *bp, &ack)
	putScratch(bp)
	return ack, err
}

// scratchPool holds request-body and header buffers of the send path (the
// request copies them, so they are free again when do returns).
var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxPooledScratch: larger buffers are left to the collector.
const maxPooledScratch = 16 << 10

// getScratch returns an empty buffer from scratchPool.
func getScratch() *[]byte {
	bp := scratchPool.Get().(*[]byte)
	*bp = (*bp)[:0]
	return bp
}

// putScratch gives bp back unless it grew past maxPooledScratch.
func putScratch(bp *[]byte) {
	if cap(*bp) <= maxPooledScratch {
		scratchPool.Put(bp)
	}
}

// ackParsers decode send ACKs without reflection (the generator's hot path).
var ackParsers fastjson.ParserPool

// parseSendAck reads a send ACK body; missing fields stay zero, a field of
// the wrong type is an error.
func parseSendAck(body []byte, ack *SendAck) error {
	p := ackParsers.Get()
	defer ackParsers.Put(p)
	return visitObject(p, body, func(k []byte, v *fastjson.Value) (err error) {
		switch string(k) {
		case "msg_id":
			ack.MsgID, err = v.Uint64()
		case "conv_id":
			ack.ConvID, err = v.Uint64()
		case "conv_seq":
			ack.ConvSeq, err = v.Uint64()
		case "server_time":
			ack.ServerTime, err = v.Int64()
		}
		return err
	})
}

// PullOpts selects a page.
type PullOpts struct {
	Cursor    uint64
	UseCursor bool // false: the server uses the device's stored cursor
	Limit     int
	Full      bool // page the whole backlog even past the unread threshold
}

// Pull fetches one page.
func (c *Client) Pull(token string, o PullOpts) (PullResp, error) {
	if o.Limit < 1 || o.Limit > MaxPullLimit {
		return PullResp{}, fmt.Errorf("%w: pull limit %d must be in 1..%d", ErrInvalid, o.Limit, MaxPullLimit)
	}
	b := make([]byte, 0, 64)
	b = append(b, "/v1/sync/pull?limit="...)
	b = strconv.AppendInt(b, int64(o.Limit), 10)
	if o.UseCursor {
		b = append(b, "&cursor="...)
		b = strconv.AppendUint(b, o.Cursor, 10)
	}
	if o.Full {
		b = append(b, "&full=1"...)
	}
	var pr PullResp
	err := c.do(fasthttp.MethodGet, string(b), token, nil, &pr)
	return pr, err
}

// Ack acknowledges a device's cursor; it returns the server's cursor.
func (c *Client) Ack(token string, pullSeq uint64) (uint64, error) {
	var out struct {
		PullSeq uint64 `json:"pull_seq"`
	}
	body := strconv.AppendUint([]byte(`{"pull_seq":`), pullSeq, 10)
	err := c.do(fasthttp.MethodPost, "/v1/sync/ack", token, append(body, '}'), &out)
	return out.PullSeq, err
}

// CreateGroup creates (idempotently) a group.
func (c *Client) CreateGroup(token string, groupID uint64, members []uint64) error {
	if len(members) > MaxGroupSize {
		return fmt.Errorf("%w: group of %d members (max %d)", ErrInvalid, len(members), MaxGroupSize)
	}
	body, _ := json.Marshal(struct {
		GroupID uint64   `json:"group_id"`
		Members []uint64 `json:"members"`
	}{groupID, members})
	return c.do(fasthttp.MethodPost, "/v1/group/create", token, body, nil)
}

// Post sends a raw JSON body to path; used to measure the client's own
// ceiling against a no-op endpoint.
func (c *Client) Post(path, token string, body []byte) error {
	return c.do(fasthttp.MethodPost, path, token, body, nil)
}

// Lab routes: the store of record read through the server's lab-only read
// path (mounted only when the server enables it; 404 otherwise).
const (
	LabInboxPath  = "/v1/lab/inbox"
	LabStoredPath = "/v1/lab/stored"
)

// StoredPage is the answer of GET /v1/lab/inbox: the token's uid's inbox
// as the store of record holds it, and the server's ack policy.
type StoredPage struct {
	Policy     string `json:"policy"`
	Msgs       []Msg  `json:"msgs"`
	HasMore    bool   `json:"has_more"`
	NextCursor uint64 `json:"next_cursor"`
}

// StoredMsg is the answer of GET /v1/lab/stored: what the store holds of
// one message for the token's uid.
type StoredMsg struct {
	Policy  string `json:"policy"`
	MsgID   uint64 `json:"msg_id"`
	UID     uint64 `json:"uid"`
	Content bool   `json:"content"`
	ConvID  uint64 `json:"conv_id"`
	ConvSeq uint64 `json:"conv_seq"`
	Inbox   bool   `json:"inbox"`
	Seq     uint64 `json:"seq"`
	// Outbox is the mq_outbox row's state: none, pending, published or
	// confirmed.
	Outbox string `json:"outbox"`
}

// StoredInbox reads one page (limit 1..MaxPullLimit) of the token's uid's
// stored inbox after seq after.
func (c *Client) StoredInbox(token string, after uint64, limit int) (StoredPage, error) {
	if limit < 1 || limit > MaxPullLimit {
		return StoredPage{}, fmt.Errorf("%w: store read limit %d must be in 1..%d", ErrInvalid, limit, MaxPullLimit)
	}
	b := append([]byte(LabInboxPath+"?limit="), strconv.Itoa(limit)...)
	b = strconv.AppendUint(append(b, "&after="...), after, 10)
	var p StoredPage
	err := c.do(fasthttp.MethodGet, string(b), token, nil, &p)
	return p, err
}

// Stored reads what the store holds of msgID for the token's uid.
func (c *Client) Stored(token string, msgID uint64) (StoredMsg, error) {
	var m StoredMsg
	err := c.do(fasthttp.MethodGet, LabStoredPath+"?msg_id="+strconv.FormatUint(msgID, 10), token, nil, &m)
	return m, err
}

// LagPath is the reference server's lab route of its queue lag (no token):
// per consumer group, records behind and the age of the oldest unprocessed
// message.
const LagPath = "/v1/lab/lag"

// LagNowPath is the same answer measured at the request (LagPath's is the
// server's latest snapshot, up to its interval old).
const LagNowPath = "/v1/lab/lag/now"

// NoQueueSays is what the reference server's lag routes say in their 404
// when the process has no queue (no Kafka brokers configured), as opposed
// to a server without the routes ("no such route").
const NoQueueSays = "has no queue"

// QueueLag is the part of GET /v1/lab/lag the generator reports.
type QueueLag struct {
	MaxAgeSeconds map[string]float64 `json:"max_age_seconds"`
	UnknownAge    map[string]int     `json:"unknown_age"`
	Records       map[string]int64   `json:"records"`
	OutboxBacklog int64              `json:"outbox_backlog"`
	Errors        []string           `json:"errors"`
}

// QueueLag reads the target's queue lag measured now (LagNowPath), or its
// latest snapshot (LagPath) from a server without that route; a *Error
// with Status 404 from a server with neither (or without a queue).
func (c *Client) QueueLag() (QueueLag, error) {
	var q QueueLag
	err := c.do(fasthttp.MethodGet, LagNowPath, "", nil, &q)
	if ce := (*Error)(nil); errors.As(err, &ce) && ce.Status == 404 {
		q = QueueLag{}
		err = c.do(fasthttp.MethodGet, LagPath, "", nil, &q)
	}
	return q, err
}
