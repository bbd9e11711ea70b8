package api

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"imlab/ref/model"
)

// WebSocket close codes the server sends.
const (
	// CloseDropped: the hub dropped the subscription (slow consumer, a
	// newer connection of the same device, ...); the reason text says why.
	CloseDropped = websocket.ClosePolicyViolation // 1008
	// CloseShutdown: the server is shutting down.
	CloseShutdown = websocket.CloseGoingAway // 1001
)

// handleWS authenticates (done by serve), registers the device with the
// read path, subscribes it to the hub before upgrading (so a message
// committed after the client's 101 cannot fall between its catch-up pull
// and its first push), then upgrades.
func (s *Server) handleWS(rc *fasthttp.RequestCtx, c Caller) {
	if s.deps.Hub == nil {
		s.writeError(rc, "ws", fmt.Errorf("%w: push is not served by this process", errNotImplemented))
		return
	}
	if !websocket.FastHTTPIsWebSocketUpgrade(rc) {
		s.writeError(rc, "ws", fmt.Errorf("%w: /v1/ws needs a WebSocket upgrade request", model.ErrInvalid))
		return
	}
	if len(rc.QueryArgs().QueryString()) > 0 {
		s.writeError(rc, "ws", fmt.Errorf("%w: /v1/ws takes no query parameters", model.ErrInvalid))
		return
	}
	if s.closing.Load() {
		s.writeError(rc, "ws", fmt.Errorf("%w: server shutting down", model.ErrUnavailable))
		return
	}
	// The device is known to the store before anything is pushed to it:
	// retention then waits for its cursor (ref/pull Register).
	rctx, cancel := context.WithTimeout(s.baseCtx, s.cfg.RequestTimeout)
	err := s.deps.Pull.Register(rctx, c.UID, c.DID)
	cancel()
	if err != nil {
		s.writeError(rc, "ws", err)
		return
	}
	sub, err := s.deps.Hub.Subscribe(c.UID, c.DID)
	if err != nil {
		s.writeError(rc, "ws", err)
		return
	}
	// The hijack callback may never run (the 101 could not be written):
	// whoever claims the subscription first owns closing it.
	var claimed atomic.Bool
	timer := time.AfterFunc(s.cfg.WS.HandshakeTimeout, func() {
		if claimed.CompareAndSwap(false, true) {
			sub.Close()
		}
	})
	err = s.upgrader.Upgrade(rc, func(conn *websocket.Conn) {
		if !claimed.CompareAndSwap(false, true) {
			_ = conn.Close()
			return
		}
		timer.Stop()
		s.runWS(conn, c, sub)
	})
	if err != nil && claimed.CompareAndSwap(false, true) {
		timer.Stop()
		sub.Close()
	}
}

// wsSession is one connection: the reader is the hijack goroutine, the
// writer a goroutine it starts and waits for. Only the writer writes data
// frames; the reader hands it replies through a bounded queue.
type wsSession struct {
	s       *Server
	conn    *websocket.Conn
	caller  Caller
	sub     Subscription
	replies chan []byte
	// writerDone is closed when the writer returns; readerDone when the
	// reader does.
	writerDone chan struct{}
	readerDone chan struct{}
	// closing stops the pong handler from pushing the read deadline out
	// once the writer has sent a close frame.
	closing atomic.Bool
}

func (s *Server) runWS(conn *websocket.Conn, c Caller, sub Subscription) {
	s.wsMu.Lock()
	if s.wsClosing {
		s.wsMu.Unlock()
		sub.Close()
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(CloseShutdown, "server shutting down"), time.Now().Add(s.cfg.WS.WriteWait))
		_ = conn.Close()
		return
	}
	s.wsWG.Add(1)
	s.wsMu.Unlock()
	// Deferred in reverse: the subscription is closed before Shutdown's
	// wait for this connection ends.
	defer s.wsWG.Done()
	defer sub.Close()
	defer func() {
		if p := recover(); p != nil {
			s.m.panics.Inc()
			s.log.Error("api: ws panic", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		}
	}()
	ws := &wsSession{
		s: s, conn: conn, caller: c, sub: sub,
		replies:    make(chan []byte, s.cfg.WS.ReplyQueue),
		writerDone: make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	conn.SetReadLimit(MaxBodyBytes)
	_ = conn.SetReadDeadline(time.Now().Add(s.cfg.WS.PongWait))
	conn.SetPongHandler(func(string) error {
		if !ws.closing.Load() {
			_ = conn.SetReadDeadline(time.Now().Add(s.cfg.WS.PongWait))
		}
		return nil
	})
	go ws.writer()
	ws.reader()
	close(ws.readerDone)
	<-ws.writerDone
	_ = conn.Close()
}

func (ws *wsSession) reader() {
	for {
		_, data, err := ws.conn.ReadMessage()
		if err != nil {
			return
		}
		if !ws.closing.Load() {
			_ = ws.conn.SetReadDeadline(time.Now().Add(ws.s.cfg.WS.PongWait))
		}
		reply := ws.handleFrame(data)
		if reply == nil {
			continue
		}
		select {
		case ws.replies <- reply:
		case <-ws.writerDone:
			return
		}
	}
}

func (ws *wsSession) writer() {
	defer close(ws.writerDone)
	s := ws.s
	ping := time.NewTicker(s.cfg.WS.PingInterval)
	defer ping.Stop()
	frames := ws.sub.Frames()
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				ws.closeWith(CloseDropped, ws.sub.Reason())
				return
			}
			if !ws.write(f) {
				return
			}
		case r := <-ws.replies:
			if !ws.write(r) {
				return
			}
		case <-ping.C:
			if err := ws.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(s.cfg.WS.WriteWait)); err != nil {
				ws.abort()
				return
			}
		case <-s.wsShutdown:
			ws.closeWith(CloseShutdown, "server shutting down")
			return
		case <-ws.readerDone:
			// The client went away or sent close: answer the close
			// handshake if possible; the connection is closed by runWS.
			_ = ws.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(s.cfg.WS.WriteWait))
			return
		}
	}
}

func (ws *wsSession) write(b []byte) bool {
	_ = ws.conn.SetWriteDeadline(time.Now().Add(ws.s.cfg.WS.WriteWait))
	if err := ws.conn.WriteMessage(websocket.TextMessage, b); err != nil {
		ws.abort()
		return false
	}
	return true
}

// closeWith sends a close frame and gives the client CloseGrace to answer
// before the reader stops.
func (ws *wsSession) closeWith(code int, reason string) {
	if reason == "" {
		reason = "closed by server"
	}
	if len(reason) > 120 { // a close frame's payload is at most 125 bytes
		reason = reason[:120]
	}
	ws.closing.Store(true)
	_ = ws.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(ws.s.cfg.WS.WriteWait))
	_ = ws.conn.SetReadDeadline(time.Now().Add(ws.s.cfg.WS.CloseGrace))
}

// abort stops the reader at once after a failed write.
func (ws *wsSession) abort() {
	ws.closing.Store(true)
	_ = ws.conn.SetReadDeadline(time.Now())
}

// Client frames.
type frameHead struct {
	Type string `json:"type"`
}

type ackFrame struct {
	Type    string  `json:"type"`
	PullSeq *uint64 `json:"pull_seq"`
}

type sendFrame struct {
	Type string `json:"type"`
	sendBody
}

// handleFrame serves one client frame and returns the reply (nil: none).
// A panic in it is recovered and answered with an error frame.
func (ws *wsSession) handleFrame(data []byte) (reply []byte) {
	s := ws.s
	var head frameHead
	var kind = "unknown"
	defer func() {
		if p := recover(); p != nil {
			s.m.panics.Inc()
			s.log.Error("api: ws frame panic", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			s.m.wsFrames.WithLabelValues(kind, "panic").Inc()
			reply = errorFrame(nil, "", apiError{Code: codeInternal, Message: "internal error"})
		}
	}()
	if err := json.Unmarshal(data, &head); err != nil {
		s.m.wsFrames.WithLabelValues(kind, "invalid").Inc()
		return errorFrame(nil, "", classify(fmt.Errorf("%w: frame must be a JSON object with a string \"type\"", model.ErrInvalid)))
	}
	ctx, cancel := context.WithTimeout(s.baseCtx, s.cfg.RequestTimeout)
	defer cancel()
	switch head.Type {
	case "ack":
		kind = "ack"
		var f ackFrame
		err := decodeStrict(data, &f)
		if err == nil && f.PullSeq == nil {
			err = fmt.Errorf("%w: pull_seq is required", model.ErrInvalid)
		}
		var cur uint64
		if err == nil {
			cur, err = ws.ack(ctx, *f.PullSeq)
		}
		if err != nil {
			return ws.fail(kind, "", err)
		}
		s.m.wsFrames.WithLabelValues(kind, "ok").Inc()
		return append(strconv.AppendUint([]byte(`{"type":"acked","pull_seq":`), cur, 10), '}')
	case "send":
		kind = "send"
		var f sendFrame
		if err := decodeStrict(data, &f); err != nil {
			return ws.fail(kind, "", err)
		}
		req := f.sendBody.request(ws.caller)
		if err := req.Validate(); err != nil {
			return ws.fail(kind, f.ClientMsgID, err)
		}
		res, err := s.deps.Send.Send(ctx, req)
		if err != nil {
			return ws.fail(kind, f.ClientMsgID, err)
		}
		s.m.wsFrames.WithLabelValues(kind, "ok").Inc()
		prefix := appendString([]byte(`"type":"send_ack","client_msg_id":`), f.ClientMsgID)
		return appendSendResult(nil, prefix, res)
	default:
		s.m.wsFrames.WithLabelValues(kind, "invalid").Inc()
		return errorFrame(nil, "", classify(fmt.Errorf("%w: unknown frame type %q (ack, send)", model.ErrInvalid, truncate(head.Type, 32))))
	}
}

// ack acknowledges pull_seq n for the device. Pushed messages were not
// served by a pull, so when n is within what this subscription pushed the
// served high-water is raised to n first; beyond it the ack stands or falls
// on what pulls served.
func (ws *wsSession) ack(ctx context.Context, n uint64) (uint64, error) {
	if n <= ws.sub.MaxPushed() {
		return ws.s.deps.Pull.MarkServedAck(ctx, ws.caller.UID, ws.caller.DID, n)
	}
	return ws.s.deps.Pull.Ack(ctx, ws.caller.UID, ws.caller.DID, n)
}

func (ws *wsSession) fail(kind, clientMsgID string, err error) []byte {
	e := classify(err)
	if e.Internal {
		ws.s.log.Error("api: ws frame failed", "type", kind, "err", err)
	}
	ws.s.m.wsFrames.WithLabelValues(kind, e.Code).Inc()
	return errorFrame(nil, clientMsgID, e)
}

// errorFrame is {"type":"error"[,"client_msg_id":..],"error":{...}}.
func errorFrame(dst []byte, clientMsgID string, e apiError) []byte {
	dst = append(dst, `{"type":"error",`...)
	if clientMsgID != "" {
		dst = append(dst, `"client_msg_id":`...)
		dst = appendString(dst, clientMsgID)
		dst = append(dst, ',')
	}
	body := appendErrorBody(nil, e)
	// appendErrorBody writes {"error":{...}}: splice its members in.
	dst = append(dst, body[1:]...)
	return dst
}
