package tinode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
)

// APIKeyHeader carries the API key on the WebSocket upgrade.
const APIKeyHeader = "X-Tinode-APIKey"

// CloseFrameTimeout bounds the write of the close frame in Close.
const CloseFrameTimeout = 100 * time.Millisecond

// Session is one WebSocket connection to the server: one Tinode session.
//
// Goroutines: Dial starts one reader goroutine, owned by the Session; it
// reads every frame, matches answers to requests by id and queues the rest
// on Pushes. It ends when the connection does (Close, a read or write
// error, the server closing); Close waits for it. Every method may be
// called from several goroutines at once; writes are serialised.
type Session struct {
	cfg   Config
	conn  *websocket.Conn
	hello Hello

	wmu sync.Mutex // serialises frame writes

	mu      sync.Mutex
	pending map[string]*call
	collect *collector // the {get what="data"} page being read, if any
	// stale is a page whose wait was given up: its frames may still come
	// and are dropped until its {ctrl} does; no page is asked meanwhile.
	stale    *collector
	attached map[string]struct{}
	auth     authState
	readErr  error // why the reader ended

	nextID   atomic.Uint64
	histSem  chan struct{} // one {get what="data"} page in flight
	pushes   chan Push
	done     chan struct{} // closed when the reader ended
	wg       sync.WaitGroup
	closeMu  sync.Once
	counters counters
}

type authState struct {
	userID, token   string
	login, password string // basic credentials, if this session used them
}

// Hello is what the server said in answer to {hi}.
type Hello struct {
	Ver                string // wire protocol version, e.g. "0.25"
	Build              string // server build, e.g. "postgres:undef"
	MaxMessageSize     int64
	MaxSubscriberCount int
	MaxTagCount        int
	Params             json.RawMessage
}

// PushKind says what a Push holds.
type PushKind uint8

const (
	// PushData: a {data} frame not part of a history page.
	PushData PushKind = iota + 1
	// PushNotice: a {ctrl} no request was waiting for and that has no id
	// (for example 205 "evicted": the session was detached from a topic).
	PushNotice
	// PushLate: a {ctrl} answering a request that was already reported
	// with an *UnknownError (Ctrl.ID is that error's ID).
	PushLate
	// PushPres, PushInfo: {pres} and {info}, with Config.Presence only.
	PushPres
	PushInfo
)

// Push is a frame no request was waiting for.
type Push struct {
	Kind PushKind
	Data *Data
	Ctrl *Ctrl
	Pres *Pres
	Info *Info
}

// Data is one message as the server delivers it.
type Data struct {
	Topic string // as this session's user names it (a p2p topic is the peer's user id)
	From  string
	Seq   int64
	TS    time.Time
	// Tag is head[TagHeadKey] when it is a string: the client tag the
	// publisher set (Message.Tag).
	Tag     string
	Head    map[string]json.RawMessage
	Content json.RawMessage
}

// Stats are the session's counters.
type Stats struct {
	Requests      uint64 // frames written that expect an answer
	Answers       uint64 // answers matched to a waiting request
	Late          uint64 // answers to requests already reported unknown
	Notices       uint64 // {ctrl} frames without id
	Pushes        uint64 // frames queued on Pushes
	PushesDropped uint64 // frames dropped because Pushes was full
	Ignored       uint64 // {pres}/{info} without Config.Presence, {meta} nobody waited for
	Malformed     uint64 // frames that were not a server message
}

type counters struct {
	requests, answers, late, notices, pushes, dropped, ignored, malformed atomic.Uint64
}

// answerKind says which frames complete a request.
type answerKind uint8

const (
	wantCtrl     answerKind = iota // a {ctrl}
	wantMeta                       // a {meta}, or a {ctrl} (error, 204)
	wantDataCtrl                   // {data} frames collected, then a {ctrl}
)

type call struct {
	op, topic string
	kind      answerKind
	coll      *collector
	ch        chan answer // buffered 1; the reader sends at most once
}

type answer struct {
	ctrl *Ctrl
	meta *wireMeta
	data []Data
	bad  error // a protocol violation seen while collecting
}

// collector gathers the {data} frames of one history page: the server
// sends them without id, between the request and its {ctrl}.
type collector struct {
	id, topic     string
	since, before int64
	limit         int
	frames        []Data
	bad           error
	answered      chan struct{} // closed when its {ctrl} arrived (for a stale page)
}

func (c *collector) holds(w *wireData) bool {
	return c != nil && c.topic == w.Topic && w.Seq >= c.since && w.Seq < c.before
}

// Dial opens a session: the WebSocket upgrade with the API key, then {hi}.
func Dial(ctx context.Context, cfg Config) (*Session, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	d := websocket.Dialer{HandshakeTimeout: cfg.DialTimeout, ReadBufferSize: 16 << 10, WriteBufferSize: 16 << 10}
	h := http.Header{}
	if cfg.APIKey != "" {
		h.Set(APIKeyHeader, cfg.APIKey)
	}
	conn, resp, err := d.DialContext(dctx, cfg.URL, h)
	if err != nil {
		st := ""
		if resp != nil {
			st = " (HTTP " + strconv.Itoa(resp.StatusCode) + ")"
			resp.Body.Close()
		}
		return nil, fmt.Errorf("%w: %s%s: %w", ErrDial, cfg.URL, st, err)
	}
	conn.SetReadLimit(cfg.MaxFrameBytes)
	s := &Session{
		cfg: cfg, conn: conn,
		pending:  map[string]*call{},
		attached: map[string]struct{}{},
		histSem:  make(chan struct{}, 1),
		pushes:   make(chan Push, cfg.PushQueue),
		done:     make(chan struct{}),
	}
	s.wg.Go(s.readLoop)
	if err := s.handshake(dctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Session) handshake(ctx context.Context) error {
	id := s.newID()
	f := &clientFrame{Hi: &hiMsg{ID: id, Ver: s.cfg.ProtocolVersion, UA: s.cfg.UserAgent, Dev: s.cfg.DeviceID}}
	a, err := s.roundTrip(ctx, "hi", "", id, f, wantCtrl, nil)
	if err != nil {
		return err
	}
	var p struct {
		Ver                string `json:"ver"`
		Build              string `json:"build"`
		MaxMessageSize     int64  `json:"maxMessageSize"`
		MaxSubscriberCount int    `json:"maxSubscriberCount"`
		MaxTagCount        int    `json:"maxTagCount"`
	}
	if err := decodeParams(a.ctrl, &p); err != nil {
		return err
	}
	if p.Ver == "" {
		return protocolf("hi: answer without params.ver")
	}
	s.hello = Hello{Ver: p.Ver, Build: p.Build, MaxMessageSize: p.MaxMessageSize,
		MaxSubscriberCount: p.MaxSubscriberCount, MaxTagCount: p.MaxTagCount, Params: a.ctrl.Params}
	return nil
}

// Hello is the server's answer to this session's {hi}.
func (s *Session) Hello() Hello { return s.hello }

// UserID is the authenticated user ("" before a login).
func (s *Session) UserID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.auth.userID
}

// Token is the last authentication token the server issued ("" if none).
func (s *Session) Token() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.auth.token
}

// Attached lists the topics this session attached to ({sub}) and has not
// left, sorted.
func (s *Session) Attached() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.attached))
	for t := range s.attached {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Pushes delivers the frames no request waited for, in arrival order. The
// channel is closed when the session ends. Nobody has to read it: frames
// past Config.PushQueue are dropped and counted.
func (s *Session) Pushes() <-chan Push { return s.pushes }

// Done is closed when the session ended (Close, or the connection broke).
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended (nil while it runs).
func (s *Session) Err() error {
	select {
	case <-s.done:
	default:
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readErr
}

// Stats returns the session's counters.
func (s *Session) Stats() Stats {
	c := &s.counters
	return Stats{Requests: c.requests.Load(), Answers: c.answers.Load(), Late: c.late.Load(),
		Notices: c.notices.Load(), Pushes: c.pushes.Load(), PushesDropped: c.dropped.Load(),
		Ignored: c.ignored.Load(), Malformed: c.malformed.Load()}
}

// Close ends the session and waits for its reader. Requests in flight end
// with an *UnknownError. It is safe to call more than once.
func (s *Session) Close() error {
	s.closeMu.Do(func() {
		s.wmu.Lock()
		_ = s.conn.SetWriteDeadline(time.Now().Add(CloseFrameTimeout))
		_ = s.conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		s.wmu.Unlock()
		_ = s.conn.Close()
	})
	s.wg.Wait()
	return nil
}

func (s *Session) newID() string { return strconv.FormatUint(s.nextID.Add(1), 10) }

// readLoop is the session's reader goroutine.
func (s *Session) readLoop() {
	defer func() {
		s.mu.Lock()
		s.collect = nil
		if s.stale != nil {
			close(s.stale.answered)
			s.stale = nil
		}
		s.mu.Unlock()
		close(s.done)
		close(s.pushes)
	}()
	for {
		_, b, err := s.conn.ReadMessage()
		if err != nil {
			s.mu.Lock()
			s.readErr = fmt.Errorf("tinode: connection ended: %w", err)
			s.mu.Unlock()
			_ = s.conn.Close()
			return
		}
		var f serverFrame
		if err := json.Unmarshal(b, &f); err != nil {
			s.counters.malformed.Add(1)
			continue
		}
		s.dispatch(&f)
	}
}

func (s *Session) dispatch(f *serverFrame) {
	switch {
	case f.Ctrl != nil:
		s.onCtrl(f.Ctrl)
	case f.Meta != nil:
		s.onMeta(f.Meta)
	case f.Data != nil:
		s.onData(f.Data)
	case f.Pres != nil:
		if !s.cfg.Presence {
			s.counters.ignored.Add(1)
			return
		}
		s.push(Push{Kind: PushPres, Pres: f.Pres})
	case f.Info != nil:
		if !s.cfg.Presence {
			s.counters.ignored.Add(1)
			return
		}
		s.push(Push{Kind: PushInfo, Info: f.Info})
	default:
		s.counters.malformed.Add(1)
	}
}

func (s *Session) onCtrl(c *Ctrl) {
	if c.ID == "" {
		s.counters.notices.Add(1)
		s.push(Push{Kind: PushNotice, Ctrl: c})
		return
	}
	s.mu.Lock()
	if s.stale != nil && s.stale.id == c.ID {
		close(s.stale.answered)
		s.stale = nil
	}
	cl := s.pending[c.ID]
	var a answer
	if cl != nil {
		delete(s.pending, c.ID)
		a.ctrl = c
		if cl.coll != nil {
			a.data, a.bad = cl.coll.frames, cl.coll.bad
			if s.collect == cl.coll {
				s.collect = nil
			}
		}
	}
	s.mu.Unlock()
	if cl == nil {
		s.counters.late.Add(1)
		s.push(Push{Kind: PushLate, Ctrl: c})
		return
	}
	s.counters.answers.Add(1)
	cl.ch <- a
}

func (s *Session) onMeta(m *wireMeta) {
	s.mu.Lock()
	cl := s.pending[m.ID]
	if cl != nil && cl.kind == wantMeta {
		delete(s.pending, m.ID)
	} else {
		cl = nil
	}
	s.mu.Unlock()
	if cl == nil {
		s.counters.ignored.Add(1)
		return
	}
	s.counters.answers.Add(1)
	cl.ch <- answer{meta: m}
}

func (s *Session) onData(w *wireData) {
	d := Data{Topic: w.Topic, From: w.From, Seq: w.Seq, TS: w.TS, Head: w.Head, Content: w.Content}
	if raw, ok := w.Head[TagHeadKey]; ok {
		var tag string
		if json.Unmarshal(raw, &tag) == nil {
			d.Tag = tag
		}
	}
	s.mu.Lock()
	if s.stale.holds(w) {
		s.mu.Unlock()
		s.counters.ignored.Add(1)
		return
	}
	c := s.collect
	if c.holds(w) {
		switch {
		case c.bad != nil:
		case len(c.frames) >= c.limit:
			c.bad = protocolf("get data %s: more than the %d messages asked for", c.topic, c.limit)
		case len(c.frames) > 0 && w.Seq >= c.frames[len(c.frames)-1].Seq:
			c.bad = protocolf("get data %s: seq %d after seq %d (pages come newest first)",
				c.topic, w.Seq, c.frames[len(c.frames)-1].Seq)
		default:
			c.frames = append(c.frames, d)
		}
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.push(Push{Kind: PushData, Data: &d})
}

// push queues p without blocking the reader.
func (s *Session) push(p Push) {
	select {
	case s.pushes <- p:
		s.counters.pushes.Add(1)
	default:
		s.counters.dropped.Add(1)
	}
}

// roundTrip writes frame f carrying request id and waits for its answer.
// A {ctrl} with code >= 300 is returned as a *ServerError.
func (s *Session) roundTrip(ctx context.Context, op, topic, id string, f *clientFrame, kind answerKind, coll *collector) (answer, error) {
	if err := ctx.Err(); err != nil {
		return answer{}, fmt.Errorf("%w: %s %s: %w", ErrNotSent, op, topic, err)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return answer{}, invalidf("%s %s: %v", op, topic, err)
	}
	cl := &call{op: op, topic: topic, kind: kind, coll: coll, ch: make(chan answer, 1)}
	if err := s.register(id, cl); err != nil {
		return answer{}, err
	}
	s.counters.requests.Add(1)
	if err := s.write(b); err != nil {
		s.abandon(id, cl, !errors.Is(err, errNotWritten))
		if errors.Is(err, errNotWritten) {
			return answer{}, fmt.Errorf("%w: %s %s: %w", ErrClosed, op, topic, err)
		}
		return answer{}, &UnknownError{Op: op, Topic: topic, ID: id, Cause: err}
	}
	a, err := s.wait(ctx, id, cl)
	if err != nil {
		return a, err
	}
	if a.ctrl != nil && a.ctrl.Code >= 300 {
		return a, &ServerError{Op: op, Topic: topic, Code: a.ctrl.Code, Text: a.ctrl.Text, Params: a.ctrl.Params}
	}
	return a, nil
}

func (s *Session) register(id string, cl *call) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return fmt.Errorf("%w: %s %s", ErrClosed, cl.op, cl.topic)
	default:
	}
	if len(s.pending) >= s.cfg.MaxPending {
		return fmt.Errorf("%w: %s %s: %d pending", ErrTooManyPending, cl.op, cl.topic, len(s.pending))
	}
	s.pending[id] = cl
	if cl.coll != nil {
		s.collect = cl.coll
	}
	return nil
}

// abandon forgets a request whose answer will not be waited for; a late
// answer then goes to Pushes as PushLate. A history page that may have
// been written becomes the stale page.
func (s *Session) abandon(id string, cl *call, written bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[id] == cl {
		delete(s.pending, id)
	}
	if cl.coll != nil && s.collect == cl.coll {
		s.collect = nil
		select {
		case <-s.done:
		default:
			if written {
				s.stale = cl.coll
			}
		}
	}
}

func (s *Session) wait(ctx context.Context, id string, cl *call) (answer, error) {
	t := time.NewTimer(s.cfg.RequestTimeout)
	defer t.Stop()
	var cause error
	select {
	case a := <-cl.ch:
		return a, nil
	case <-ctx.Done():
		cause = ctx.Err()
	case <-t.C:
		cause = fmt.Errorf("no answer within %v: %w", s.cfg.RequestTimeout, context.DeadlineExceeded)
	case <-s.done:
		cause = s.Err()
	}
	s.abandon(id, cl, true)
	select { // the answer may have raced in
	case a := <-cl.ch:
		return a, nil
	default:
	}
	return answer{}, &UnknownError{Op: cl.op, Topic: cl.topic, ID: id, Cause: cause}
}

// errNotWritten: the session had ended before the frame was written.
var errNotWritten = errors.New("tinode: not written: the session had ended")

// write sends one text frame. A failed write closes the connection: the
// stream may hold part of the frame.
func (s *Session) write(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	select {
	case <-s.done:
		return fmt.Errorf("%w: %w", errNotWritten, s.Err())
	default:
	}
	if err := s.conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)); err != nil {
		_ = s.conn.Close()
		return fmt.Errorf("tinode: write: %w", err)
	}
	if err := s.conn.WriteMessage(websocket.TextMessage, b); err != nil {
		_ = s.conn.Close()
		return fmt.Errorf("tinode: write: %w", err)
	}
	return nil
}

// writeOnly sends a frame that has no answer ({note}).
func (s *Session) writeOnly(ctx context.Context, op, topic string, f *clientFrame) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrNotSent, op, topic, err)
	}
	select {
	case <-s.done:
		return fmt.Errorf("%w: %s %s", ErrClosed, op, topic)
	default:
	}
	b, err := json.Marshal(f)
	if err != nil {
		return invalidf("%s %s: %v", op, topic, err)
	}
	if err := s.write(b); err != nil {
		if errors.Is(err, errNotWritten) {
			return fmt.Errorf("%w: %s %s: %w", ErrClosed, op, topic, err)
		}
		return &UnknownError{Op: op, Topic: topic, Cause: err}
	}
	return nil
}

func decodeParams(c *Ctrl, v any) error {
	if c == nil {
		return protocolf("answer without ctrl")
	}
	if len(c.Params) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.Params, v); err != nil {
		return protocolf("ctrl %d params: %v", c.Code, err)
	}
	return nil
}

// errUnknownAnswer turns an answer this client cannot use into an unknown
// outcome for the request that got it.
func errUnknownAnswer(op, topic, id string, err error) error {
	var ue *UnknownError
	if errors.As(err, &ue) {
		return err
	}
	return &UnknownError{Op: op, Topic: topic, ID: id, Cause: err}
}
