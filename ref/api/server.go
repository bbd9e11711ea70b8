package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"imlab/ref/model"
)

// Server is the HTTP surface of one process. Build it with New, run it with
// Serve, stop it with Shutdown.
type Server struct {
	cfg     Config
	deps    Deps
	enc     ItemEncoder
	log     *slog.Logger
	fs      *fasthttp.Server
	routes  map[string]*route
	metrics fasthttp.RequestHandler
	// unknown and unparsed count requests outside every route.
	unknown, unparsed *routeMetrics

	upgrader websocket.FastHTTPUpgrader

	// baseCtx parents every request context; cancelled when Shutdown ends.
	baseCtx    context.Context
	cancelBase context.CancelFunc
	closing    atomic.Bool

	// ws connection tracking: wsMu guards wsClosing and the WaitGroup Add.
	wsMu       sync.Mutex
	wsClosing  bool
	wsShutdown chan struct{} // closed when Shutdown starts closing ws connections
	wsWG       sync.WaitGroup

	m metrics
}

type route struct {
	name   string
	method string
	m      *routeMetrics
	authed bool
	serve  func(rc *fasthttp.RequestCtx, c Caller) // authed routes
	plain  func(rc *fasthttp.RequestCtx)           // /metrics, /healthz
}

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	panics   prometheus.Counter
	wsFrames *prometheus.CounterVec
}

// New builds a server; it registers its metrics on deps.Registry.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Auth == nil || deps.Send == nil || deps.Pull == nil || deps.Registry == nil {
		return nil, fmt.Errorf("%w: api needs Auth, Send, Pull and Registry", model.ErrInvalid)
	}
	s := &Server{cfg: cfg, deps: deps, enc: deps.Encoder, log: deps.Logger, wsShutdown: make(chan struct{})}
	if s.enc == nil {
		s.enc = EncodeItem
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	s.m = metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imlab_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "imlab_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"route"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "imlab_http_panics_total", Help: "Handler panics recovered (answered 500 or closed ws).",
		}),
		wsFrames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imlab_ws_client_frames_total", Help: "WebSocket client frames by type and result.",
		}, []string{"type", "result"}),
	}
	for _, c := range []prometheus.Collector{s.m.requests, s.m.latency, s.m.panics, s.m.wsFrames} {
		if err := deps.Registry.Register(c); err != nil {
			return nil, fmt.Errorf("api: register metrics: %w", err)
		}
	}
	s.metrics = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(deps.Registry, promhttp.HandlerOpts{Registry: deps.Registry}))
	s.upgrader = websocket.FastHTTPUpgrader{
		HandshakeTimeout: cfg.WS.HandshakeTimeout,
		// Tokens, not cookies, authenticate: a foreign page cannot ride a
		// browser's ambient credentials, so any origin may connect.
		CheckOrigin: func(*fasthttp.RequestCtx) bool { return true },
		Error: func(rc *fasthttp.RequestCtx, status int, reason error) {
			writeAPIError(rc, apiError{Status: status, Code: model.ErrInvalid.Error(), Message: reason.Error()})
		},
	}
	s.unknown, s.unparsed = newRouteMetrics("unknown", &s.m), newRouteMetrics("unparsed", &s.m)
	if err := s.buildRoutes(); err != nil {
		return nil, err
	}
	s.fs = &fasthttp.Server{
		Handler:              s.serve,
		ErrorHandler:         s.parseError,
		Name:                 "imlab",
		MaxRequestBodySize:   MaxReadBodyBytes,
		ReadBufferSize:       MaxHeaderBytes,
		ReadTimeout:          cfg.ReadTimeout,
		WriteTimeout:         cfg.WriteTimeout,
		IdleTimeout:          cfg.IdleTimeout,
		Concurrency:          cfg.Concurrency,
		NoDefaultDate:        true,
		NoDefaultContentType: true,
	}
	return s, nil
}

func (s *Server) buildRoutes() error {
	s.routes = map[string]*route{}
	add := func(r *route, path string) error {
		if _, dup := s.routes[path]; dup {
			return fmt.Errorf("%w: api route %s mounted twice", model.ErrInvalid, path)
		}
		r.m = newRouteMetrics(r.name, &s.m)
		s.routes[path] = r
		return nil
	}
	core := []struct {
		path string
		r    *route
	}{
		{"/v1/msg/send", &route{name: "send", method: "POST", authed: true, serve: s.json(s.handleSend)}},
		{"/v1/sync/pull", &route{name: "pull", method: "GET", authed: true, serve: s.json(s.handlePull)}},
		{"/v1/sync/ack", &route{name: "ack", method: "POST", authed: true, serve: s.json(s.handleAck)}},
		{"/v1/conv/pull", &route{name: "conv_pull", method: "GET", authed: true, serve: s.json(s.handleConvPull)}},
		{"/v1/group/create", &route{name: "group_create", method: "POST", authed: true, serve: s.json(s.handleGroupCreate)}},
		{"/v1/ws", &route{name: "ws", method: "GET", authed: true, serve: s.handleWS}},
		{"/v1/history", &route{name: "history", method: "GET", authed: true, serve: s.json(optional(s.deps.History.Get, "GET /v1/history"))}},
		{"/v1/msg/revoke", &route{name: "revoke", method: "POST", authed: true, serve: s.json(optional(s.deps.History.Revoke, "POST /v1/msg/revoke"))}},
		{"/v1/msg/delete", &route{name: "delete", method: "POST", authed: true, serve: s.json(optional(s.deps.History.Delete, "POST /v1/msg/delete"))}},
		{"/v1/conv/clear", &route{name: "conv_clear", method: "POST", authed: true, serve: s.json(optional(s.deps.History.Clear, "POST /v1/conv/clear"))}},
		{"/metrics", &route{name: "metrics", method: "GET", plain: s.handleMetrics}},
		{"/healthz", &route{name: "healthz", method: "GET", plain: s.handleHealth}},
	}
	for _, c := range core {
		if err := add(c.r, c.path); err != nil {
			return err
		}
	}
	if s.deps.Lab != nil {
		for _, l := range []struct {
			path, name string
			h          HandlerFunc
		}{{LabInboxPath, "lab_inbox", s.handleLabInbox}, {LabStoredPath, "lab_stored", s.handleLabStored},
			{LabHistoryPath, "lab_history", s.handleLabHistory}} {
			if err := add(&route{name: l.name, method: "GET", authed: true, serve: s.json(l.h)}, l.path); err != nil {
				return err
			}
		}
	}
	for _, e := range s.deps.Extra {
		if !strings.HasPrefix(e.Path, "/v1/") || e.Handle == nil || e.Name == "" || (e.Method != "GET" && e.Method != "POST") {
			return fmt.Errorf("%w: api extra route %q needs a /v1/ path, GET or POST, a name and a handler", model.ErrInvalid, e.Path)
		}
		if err := add(&route{name: e.Name, method: e.Method, authed: true, serve: s.json(e.Handle)}, e.Path); err != nil {
			return err
		}
	}
	for _, o := range s.deps.Open {
		if !strings.HasPrefix(o.Path, "/v1/") || o.Handle == nil || o.Name == "" {
			return fmt.Errorf("%w: api open route %q needs a /v1/ path, a name and a handler", model.ErrInvalid, o.Path)
		}
		h := o.Handle
		if err := add(&route{name: o.Name, method: "GET", plain: s.open(h)}, o.Path); err != nil {
			return err
		}
	}
	return nil
}

// open adapts an OpenRoute handler: empty query, request timeout, JSON
// answer or mapped error.
func (s *Server) open(h func(context.Context) (any, error)) func(rc *fasthttp.RequestCtx) {
	return s.jsonPlain(func(ctx context.Context, _ Caller, r *Request) (any, error) {
		if _, err := r.Query(); err != nil {
			return nil, err
		}
		return h(ctx)
	})
}

func (s *Server) jsonPlain(h HandlerFunc) func(rc *fasthttp.RequestCtx) {
	j := s.json(h)
	return func(rc *fasthttp.RequestCtx) { j(rc, Caller{}) }
}

func optional(h HandlerFunc, what string) HandlerFunc {
	if h != nil {
		return h
	}
	return func(context.Context, Caller, *Request) (any, error) {
		return nil, fmt.Errorf("%w: %s is not served by this process (history is not configured)", errNotImplemented, what)
	}
}

// Handler is the fasthttp handler (for tests and embedding).
func (s *Server) Handler() fasthttp.RequestHandler { return s.serve }

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.fs.Serve(lingerListener{ln}); err != nil {
		return fmt.Errorf("api: serve: %w", err)
	}
	return nil
}

// Shutdown stops accepting, lets in-flight requests finish (bounded by
// ctx), then closes every WebSocket with 1001 "server shutting down" and
// waits for their goroutines. A second call waits again and returns.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	err := s.fs.ShutdownWithContext(ctx)
	s.wsMu.Lock()
	if !s.wsClosing {
		s.wsClosing = true
		close(s.wsShutdown)
	}
	s.wsMu.Unlock()
	done := make(chan struct{})
	go func() { s.wsWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
	}
	s.cancelBase()
	if err != nil {
		return fmt.Errorf("api: shutdown: %w", err)
	}
	return nil
}

// serve is the single entry point: routing, method check, auth, recover,
// metrics.
func (s *Server) serve(rc *fasthttp.RequestCtx) {
	start := time.Now()
	r := s.routes[string(rc.Path())]
	name, rm := "unknown", s.unknown
	if r != nil {
		name, rm = r.name, r.m
	}
	defer func() {
		if p := recover(); p != nil {
			s.m.panics.Inc()
			s.log.Error("api: handler panic", "route", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			rc.Response.Reset()
			writeAPIError(rc, apiError{Status: fasthttp.StatusInternalServerError, Code: codeInternal, Message: "internal error"})
		}
		rm.count(rc.Response.StatusCode())
		rm.observe(time.Since(start).Seconds())
	}()
	if r == nil {
		writeAPIError(rc, apiError{Status: fasthttp.StatusNotFound, Code: model.ErrNotFound.Error(), Message: "no such route"})
		return
	}
	if n := len(rc.Request.RequestURI()); n > MaxRequestURIBytes {
		writeAPIError(rc, uriTooLong())
		return
	}
	if string(rc.Method()) != r.method {
		rc.Response.Header.Set("Allow", r.method)
		writeAPIError(rc, apiError{Status: fasthttp.StatusMethodNotAllowed, Code: codeMethod, Message: "use " + r.method})
		return
	}
	if n := len(rc.Request.Body()); n > MaxBodyBytes {
		writeAPIError(rc, apiError{Status: fasthttp.StatusRequestEntityTooLarge, Code: model.ErrTooLarge.Error(),
			Message: "body larger than " + strconv.Itoa(MaxBodyBytes) + " bytes"})
		return
	}
	if !r.authed {
		r.plain(rc)
		return
	}
	c, err := s.authenticate(rc)
	if err != nil {
		rc.Response.Header.Set("WWW-Authenticate", `Bearer realm="imlab"`)
		s.writeError(rc, name, err)
		return
	}
	r.serve(rc, c)
}

// authenticate reads "Authorization: Bearer <token>".
func (s *Server) authenticate(rc *fasthttp.RequestCtx) (Caller, error) {
	h := rc.Request.Header.Peek(fasthttp.HeaderAuthorization)
	if len(h) == 0 {
		return Caller{}, fmt.Errorf("%w: missing Authorization: Bearer <token>", model.ErrUnauthorized)
	}
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(string(h[:len(scheme)]), scheme) {
		return Caller{}, fmt.Errorf("%w: Authorization must be Bearer <token>", model.ErrUnauthorized)
	}
	uid, did, err := s.deps.Auth.VerifyBytes(bytes.TrimSpace(h[len(scheme):]))
	if err != nil {
		return Caller{}, err
	}
	return Caller{UID: uid, DID: did}, nil
}

// json adapts a HandlerFunc: request context with timeout, strict input
// helpers, JSON answer or mapped error.
func (s *Server) json(h HandlerFunc) func(rc *fasthttp.RequestCtx, c Caller) {
	return func(rc *fasthttp.RequestCtx, c Caller) {
		ctx, cancel := context.WithTimeout(s.baseCtx, s.cfg.RequestTimeout)
		defer cancel()
		out, err := h(ctx, c, &Request{rc: rc})
		if err != nil {
			s.writeError(rc, string(rc.Path()), err)
			return
		}
		var body []byte
		switch v := out.(type) {
		case written:
			rc.SetStatusCode(fasthttp.StatusOK)
			rc.SetContentType("application/json")
			return
		case rawJSON:
			body = v
		case nil:
			body = []byte("{}")
		default:
			b, merr := json.Marshal(v)
			if merr != nil {
				s.writeError(rc, string(rc.Path()), fmt.Errorf("api: encode answer: %w", merr))
				return
			}
			body = b
		}
		rc.SetStatusCode(fasthttp.StatusOK)
		rc.SetContentType("application/json")
		rc.SetBody(body)
	}
}

// rawJSON is an answer already encoded.
type rawJSON []byte

// written is the answer of a handler that put its encoded JSON body on the
// response itself (Request.reply): a buffer of its own stack, copied once,
// where a rawJSON answer is a heap slice boxed in an interface.
type written struct{}

// reply puts body, an encoded JSON answer, on the response; the handler
// returns what it returns. body may be reused once reply returns.
func (r *Request) reply(body []byte) written {
	r.rc.Response.SetBody(body)
	return written{}
}

// writeError maps err and logs what the client does not see.
func (s *Server) writeError(rc *fasthttp.RequestCtx, where string, err error) {
	e := classify(err)
	if e.Internal {
		s.log.Error("api: request failed", "where", where, "status", e.Status, "err", err)
	}
	writeAPIError(rc, e)
}

func writeAPIError(rc *fasthttp.RequestCtx, e apiError) {
	if e.Status == fasthttp.StatusTooManyRequests {
		rc.Response.Header.Set(fasthttp.HeaderRetryAfter, strconv.Itoa(retryAfterSeconds(e.RetryAfter)))
	}
	rc.SetStatusCode(e.Status)
	rc.SetContentType("application/json")
	rc.SetBody(appendErrorBody(nil, e))
}

// parseError answers requests fasthttp could not read (too large, broken).
func (s *Server) parseError(rc *fasthttp.RequestCtx, err error) {
	var e apiError
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = apiError{Status: fasthttp.StatusRequestEntityTooLarge, Code: model.ErrTooLarge.Error(),
			Message: "request body larger than " + strconv.Itoa(MaxBodyBytes) + " bytes"}
	case isSmallBuffer(err) && requestLineOverflowed(err):
		e = uriTooLong()
	case isSmallBuffer(err):
		e = apiError{Status: fasthttp.StatusRequestHeaderFieldsTooLarge, Code: model.ErrTooLarge.Error(),
			Message: "request line and header fields larger than " + strconv.Itoa(MaxHeaderBytes) + " bytes"}
	default:
		e = apiError{Status: fasthttp.StatusBadRequest, Code: model.ErrInvalid.Error(), Message: "malformed HTTP request"}
	}
	s.unparsed.count(e.Status)
	writeAPIError(rc, e)
	// Answered before the request was read whole: the connection closes
	// after reading what the client still sends (lingerConn).
	markLinger(rc.Conn())
}

func uriTooLong() apiError {
	return apiError{Status: fasthttp.StatusRequestURITooLong, Code: model.ErrTooLarge.Error(),
		Message: "request target longer than " + strconv.Itoa(MaxRequestURIBytes) + " bytes"}
}

// isSmallBuffer: the request line and headers did not fit the read buffer
// (MaxHeaderBytes).
func isSmallBuffer(err error) bool {
	var sb *fasthttp.ErrSmallBuffer
	return errors.As(err, &sb)
}

// requestLineOverflowed tells whether the request line alone filled the
// read buffer. fasthttp says only that the buffer was too small; its
// message quotes the buffer's first and last 200 bytes ("contents: "),
// and the request line comes first: when neither part holds a line break
// the line is (almost surely) the whole buffer. Without the quote (a
// format fasthttp may change), the answer is 431, which covers the
// request line too.
func requestLineOverflowed(err error) bool {
	_, contents, ok := strings.Cut(err.Error(), "contents: ")
	return ok && !strings.Contains(contents, `\n`) && !strings.Contains(contents, `\r`)
}

func (s *Server) handleMetrics(rc *fasthttp.RequestCtx) {
	s.metrics(rc)
}

func (s *Server) handleHealth(rc *fasthttp.RequestCtx) {
	rc.SetContentType("application/json")
	if s.closing.Load() {
		rc.SetStatusCode(fasthttp.StatusServiceUnavailable)
		rc.SetBodyString(`{"status":"shutting_down"}`)
		return
	}
	rc.SetStatusCode(fasthttp.StatusOK)
	rc.SetBodyString(`{"status":"ok"}`)
}
