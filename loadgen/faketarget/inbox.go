package faketarget

import (
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"
)

type ack struct {
	MsgID      uint64 `json:"msg_id"`
	ConvID     uint64 `json:"conv_id"`
	ConvSeq    uint64 `json:"conv_seq"`
	ServerTime int64  `json:"server_time"`
}

// append stores m in uid's inbox and pushes it to the uid's connections.
func (s *Server) append(uid uint64, m msg) {
	ib := s.inboxes[uid]
	if ib == nil {
		ib = &inbox{}
		s.inboxes[uid] = ib
	}
	ib.appends++
	var seq, prev uint64
	if n := s.cfg.Faults.ReuseSeqEvery; n > 0 && ib.appends%n == 0 && len(ib.entries) > 0 {
		seq = ib.last
		ib.entries[len(ib.entries)-1] = entry{seq: seq, m: m}
		if len(ib.entries) > 1 {
			prev = ib.entries[len(ib.entries)-2].seq
		}
		s.c.Reused++
	} else {
		prev = ib.last
		ib.last++
		seq = ib.last
		ib.entries = append(ib.entries, entry{seq: seq, m: m})
	}
	if len(s.conns[uid]) == 0 {
		return
	}
	frame, _ := json.Marshal(struct {
		Type    string `json:"type"`
		Seq     uint64 `json:"seq"`
		PrevSeq uint64 `json:"prev_seq"`
		msg
	}{"msg", seq, prev, m})
	for c := range s.conns[uid] {
		select {
		case c.out <- frame:
			if seq > s.served[c.dev] {
				s.served[c.dev] = seq
			}
		default:
			s.c.SlowClosed++
			delete(s.conns[uid], c)
			c.close()
		}
	}
}

type pullItem struct {
	Seq uint64 `json:"seq"`
	msg
}

func (s *Server) pull(ctx *fasthttp.RequestCtx, dev devKey) {
	args := ctx.QueryArgs()
	limit := 100
	if v := args.Peek("limit"); len(v) > 0 {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > 500 {
			jsonErr(ctx, 400, "invalid", "limit must be in 1..500")
			return
		}
		limit = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.PullPerSec > 0 {
		now := time.Now().Unix()
		r := s.rate[dev.uid]
		if r[0] != now {
			r = [2]int64{now, 0}
		}
		if r[1] >= int64(s.cfg.PullPerSec) {
			s.c.Throttled++
			ctx.Response.Header.Set("Retry-After", "0.2")
			jsonErr(ctx, 429, "rate_limited", "pull rate limit")
			return
		}
		r[1]++
		s.rate[dev.uid] = r
	}
	s.c.Pulls++
	cursor := s.cursor[dev]
	if v := args.Peek("cursor"); len(v) > 0 {
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			jsonErr(ctx, 400, "invalid", "bad cursor")
			return
		}
		cursor = n
	}
	var items []pullItem
	next := cursor
	hasMore := false
	if ib := s.inboxes[dev.uid]; ib != nil {
		i := sort.Search(len(ib.entries), func(i int) bool { return ib.entries[i].seq > cursor })
		for ; i < len(ib.entries); i++ {
			if len(items) == limit {
				hasMore = true
				break
			}
			e := ib.entries[i]
			items = append(items, pullItem{Seq: e.seq, msg: e.m})
			next = e.seq
		}
	}
	if next > s.served[dev] {
		s.served[dev] = next
	}
	if s.cfg.Faults.AdvanceCursorOnPull && next > s.cursor[dev] {
		s.cursor[dev] = next
	}
	if items == nil {
		items = []pullItem{}
	}
	jsonOK(ctx, map[string]any{"msgs": items, "has_more": hasMore, "next_cursor": next})
}

func (s *Server) ack(dev devKey, seq uint64) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq > s.served[dev] {
		return s.cursor[dev], false
	}
	if seq > s.cursor[dev] {
		s.cursor[dev] = seq
	}
	return s.cursor[dev], true
}

func (s *Server) serveWS(dev devKey, ws *websocket.Conn) {
	c := &conn{dev: dev, out: make(chan []byte, s.cfg.PushQueue), done: make(chan struct{})}
	s.mu.Lock()
	if s.conns[dev.uid] == nil {
		s.conns[dev.uid] = map[*conn]bool{}
	}
	s.conns[dev.uid][c] = true
	s.mu.Unlock()
	readErr := make(chan struct{})
	defer func() {
		s.mu.Lock()
		delete(s.conns[dev.uid], c)
		s.mu.Unlock()
		c.close()
		ws.Close()
		// The reader must end before the handler returns: fasthttp
		// releases the hijacked connection then, and a Read on it after
		// that dereferences nil (seen as a panic of the whole test binary).
		<-readErr
	}()
	go func() {
		defer close(readErr)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			var f struct {
				Type    string `json:"type"`
				PullSeq uint64 `json:"pull_seq"`
				sendReq
			}
			if json.Unmarshal(b, &f) != nil {
				continue
			}
			switch f.Type {
			case "ack":
				s.ack(dev, f.PullSeq)
			case "send":
				a, _, slow, err := s.send(dev.uid, f.sendReq)
				if slow {
					time.Sleep(s.cfg.Faults.SlowFor)
				}
				var out []byte
				if err != nil {
					out, _ = json.Marshal(map[string]any{"type": "error", "client_msg_id": f.ClientMsgID, "error": map[string]string{"code": "invalid", "message": err.Error()}})
				} else {
					out, _ = json.Marshal(struct {
						Type        string `json:"type"`
						ClientMsgID string `json:"client_msg_id"`
						ack
					}{"send_ack", f.ClientMsgID, a})
				}
				select {
				case c.out <- out:
				case <-c.done:
					return
				}
			}
		}
	}()
	for {
		select {
		case b := <-c.out:
			ws.SetWriteDeadline(time.Now().Add(2 * time.Minute))
			if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
				return
			}
		case <-c.done:
			msg := websocket.FormatCloseMessage(websocket.ClosePolicyViolation, "slow consumer")
			ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
			return
		case <-readErr:
			return
		}
	}
}
