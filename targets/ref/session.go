package ref

import (
	"context"
	"time"
	"unsafe"

	"imlab/targets"
	"imlab/targets/ref/client"
)

// Session is one device: its lab token. Every method is one exchange
// bounded by the driver's timeout.
type Session struct {
	d     *Driver
	uid   uint64
	did   string
	token string
}

// UID of the device.
func (s *Session) UID() uint64 { return s.uid }

// DID of the device.
func (s *Session) DID() string { return s.did }

// Send posts /v1/msg/send on the sends' pool.
func (s *Session) Send(_ context.Context, r *targets.SendReq) (targets.SendAck, error) {
	req := client.SendReq{ClientMsgID: r.ClientMsgID, ConvType: r.ConvType, ToUID: r.ToUID, GroupID: r.GroupID, Content: r.Content}
	ack, err := s.d.sendCl.Send(s.token, &req)
	if err != nil {
		return targets.SendAck{}, wrap(err)
	}
	return targets.SendAck(ack), nil
}

// Pull reads GET /v1/sync/pull.
func (s *Session) Pull(_ context.Context, o targets.PullOpts) (targets.PullPage, error) {
	pr, err := s.d.cl.Pull(s.token, client.PullOpts(o))
	if err != nil {
		return targets.PullPage{}, wrap(err)
	}
	return page(pr), nil
}

// page converts a pull answer. Its items are not copied: targets.Msg and
// client.Msg have the same fields in the same order (the conversion
// targets.Msg(client.Msg{}) compiles only while that holds), so the page
// takes the answer's array as it is.
func page(pr client.PullResp) targets.PullPage {
	p := targets.PullPage{HasMore: pr.HasMore, NextCursor: pr.NextCursor, Truncated: pr.Truncated}
	if len(pr.Msgs) > 0 {
		_ = targets.Msg(client.Msg{})
		p.Msgs = unsafe.Slice((*targets.Msg)(unsafe.Pointer(&pr.Msgs[0])), len(pr.Msgs))
	}
	return p
}

// Ack posts /v1/sync/ack.
func (s *Session) Ack(_ context.Context, seq uint64) (uint64, error) {
	c, err := s.d.cl.Ack(s.token, seq)
	return c, wrap(err)
}

// Connect opens /v1/ws.
func (s *Session) Connect(ctx context.Context) (targets.Conn, error) {
	ws, err := s.d.cl.DialWS(ctx, s.token)
	if err != nil {
		return nil, wrap(err)
	}
	return &conn{ws: ws}, nil
}

// DialSender opens /v1/ws for sends.
func (s *Session) DialSender(ctx context.Context) (targets.Sender, error) {
	snd, err := s.d.cl.DialSender(ctx, s.token)
	if err != nil {
		return nil, wrap(err)
	}
	return &sender{s: snd}, nil
}

// ConvPull reads GET /v1/conv/pull.
func (s *Session) ConvPull(_ context.Context, o targets.ConvPullOpts) (targets.PullPage, error) {
	pr, err := s.d.cl.ConvPull(s.token, o.ConvID, o.Cursor, o.Limit)
	if err != nil {
		return targets.PullPage{}, wrap(err)
	}
	return page(pr), nil
}

// History reads GET /v1/history.
func (s *Session) History(_ context.Context, o targets.HistoryOpts) ([]targets.HistoryItem, error) {
	items, err := s.d.cl.History(s.token, o.ConvID, o.From, o.To)
	if err != nil {
		return nil, wrap(err)
	}
	out := make([]targets.HistoryItem, len(items))
	for i, it := range items {
		out[i] = targets.HistoryItem{ConvSeq: it.ConvSeq, MsgID: it.MsgID, SenderUID: it.SenderUID, CreatedAt: it.CreatedAt,
			Content: it.Content, Revoked: it.Revoked, Tombstone: it.Tombstone, Read: it.IsRead}
	}
	return out, nil
}

// Revoke posts /v1/msg/revoke.
func (s *Session) Revoke(_ context.Context, convID, convSeq uint64) error {
	return wrap(s.d.cl.Revoke(s.token, convID, convSeq))
}

// Delete posts /v1/msg/delete.
func (s *Session) Delete(_ context.Context, convID, convSeq uint64) error {
	return wrap(s.d.cl.Delete(s.token, convID, convSeq))
}

// Clear posts /v1/conv/clear.
func (s *Session) Clear(_ context.Context, convID uint64) (uint64, error) {
	m, err := s.d.cl.Clear(s.token, convID)
	return m, wrap(err)
}

// MarkRead posts /v1/msg/read.
func (s *Session) MarkRead(_ context.Context, convID, from, to uint64) error {
	return wrap(s.d.cl.MarkRead(s.token, convID, from, to))
}

// StoredInbox reads GET /v1/lab/inbox.
func (s *Session) StoredInbox(_ context.Context, after uint64, limit int) (targets.StoredPage, error) {
	p, err := s.d.cl.StoredInbox(s.token, after, limit)
	if err != nil {
		return targets.StoredPage{}, wrap(err)
	}
	out := targets.StoredPage{Policy: p.Policy, HasMore: p.HasMore, NextCursor: p.NextCursor}
	if len(p.Msgs) > 0 {
		out.Msgs = make([]targets.Msg, len(p.Msgs))
		for i := range p.Msgs {
			out.Msgs[i] = targets.Msg(p.Msgs[i])
		}
	}
	return out, nil
}

// Stored reads GET /v1/lab/stored.
func (s *Session) Stored(_ context.Context, msgID uint64) (targets.StoredMsg, error) {
	m, err := s.d.cl.Stored(s.token, msgID)
	if err != nil {
		return targets.StoredMsg{}, wrap(err)
	}
	return targets.StoredMsg(m), nil
}

// conn is a device's /v1/ws.
type conn struct{ ws *client.WS }

func (c *conn) Recv(deadline time.Time) (targets.Push, error) {
	f, err := c.ws.Read(deadline)
	if err != nil {
		return targets.Push{}, err
	}
	return targets.Push{Type: f.Type, PrevSeq: f.PrevSeq, Msg: targets.Msg(f.Msg)}, nil
}

func (c *conn) Ack(seq uint64) error { return c.ws.Ack(seq) }

func (c *conn) Close() error { return c.ws.Close() }

// sender carries sends on a /v1/ws of their own.
type sender struct{ s *client.Sender }

func (x *sender) Send(_ context.Context, r *targets.SendReq, timeout time.Duration) (targets.SendAck, error) {
	req := client.SendReq{ClientMsgID: r.ClientMsgID, ConvType: r.ConvType, ToUID: r.ToUID, GroupID: r.GroupID, Content: r.Content}
	ack, err := x.s.Send(&req, timeout)
	if err != nil {
		return targets.SendAck{}, wrap(err)
	}
	return targets.SendAck(ack), nil
}

func (x *sender) Done() <-chan struct{} { return x.s.Done() }

func (x *sender) Close() error { return x.s.Close() }

var (
	_ targets.Session    = (*Session)(nil)
	_ targets.LabSession = (*Session)(nil)
)

// LabHistory reads GET /v1/lab/history.
func (s *Session) LabHistory(_ context.Context, o targets.HistoryOpts) (targets.StoredHistory, error) {
	h, err := s.d.cl.LabHistory(s.token, o.ConvID, o.From, o.To)
	if err != nil {
		return targets.StoredHistory{}, wrap(err)
	}
	out := targets.StoredHistory{MaxSeq: h.MaxSeq, Clears: map[uint64]uint64{}}
	for _, c := range h.Clears {
		out.Clears[c.UID] = c.MinSeq
	}
	for _, sl := range h.Slots {
		x := targets.StoredSlot{ConvSeq: sl.ConvSeq, StoredSeq: sl.StoredSeq, MsgID: sl.MsgID, SenderUID: sl.SenderUID,
			Content: sl.Content, Revoked: sl.Revoke != nil, IsRead: sl.IsRead, Detail: sl.Detail}
		switch sl.State {
		case "":
			continue
		case "filled":
		case "purged":
			x.Purged = true
		default:
			x.Invalid = true
		}
		x.DelList = append(append(x.DelList, sl.DelList...), sl.DelRecords...)
		out.Slots = append(out.Slots, x)
	}
	return out, nil
}

var _ targets.LabHistoryReader = (*Session)(nil)
