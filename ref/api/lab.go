package api

import (
	"context"
	"encoding/json"
	"strconv"

	"imlab/ref/model"
	"imlab/ref/push"
)

// Lab route paths (mounted only with Deps.Lab).
const (
	LabInboxPath  = "/v1/lab/inbox"
	LabStoredPath = "/v1/lab/stored"
)

// appendPolicy opens a lab answer: {"policy":"...",
func (s *Server) appendPolicy(dst []byte) []byte {
	p, _ := json.Marshal(s.deps.Lab.Policy())
	dst = append(dst, `{"policy":`...)
	dst = append(dst, p...)
	return append(dst, ',')
}

// handleLabInbox is GET /v1/lab/inbox?after=&limit=: the caller's inbox as
// the store of record holds it.
func (s *Server) handleLabInbox(ctx context.Context, c Caller, r *Request) (any, error) {
	q, err := r.Query("after", "limit")
	if err != nil {
		return nil, err
	}
	after, _, err := q.Uint64("after")
	if err != nil {
		return nil, err
	}
	limit, err := q.Limit(model.MaxPullLimit)
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = model.MaxPullLimit
	}
	res, err := s.deps.Lab.Inbox(ctx, c.UID, after, limit)
	if err != nil {
		return nil, err
	}
	page := appendPull(newPullBuf(len(res.Msgs)), res, s.enc)
	return rawJSON(append(s.appendPolicy(nil), page[1:]...)), nil
}

// handleLabStored is GET /v1/lab/stored?msg_id=: what the store holds of
// one message for the caller's uid.
func (s *Server) handleLabStored(ctx context.Context, c Caller, r *Request) (any, error) {
	q, err := r.Query("msg_id")
	if err != nil {
		return nil, err
	}
	id, err := q.RequiredUint64("msg_id")
	if err != nil {
		return nil, err
	}
	m, err := s.deps.Lab.Message(ctx, c.UID, id)
	if err != nil {
		return nil, err
	}
	dst := s.appendPolicy(make([]byte, 0, 256))
	dst = push.AppendID(dst, "msg_id", m.MsgID)
	dst = append(dst, `,"uid":`...)
	dst = strconv.AppendUint(dst, m.UID, 10)
	dst = append(dst, `,"content":`...)
	dst = strconv.AppendBool(dst, m.Content)
	if m.Content {
		dst = append(dst, ',')
		dst = push.AppendID(dst, "conv_id", m.ConvID)
		dst = append(dst, `,"conv_seq":`...)
		dst = strconv.AppendUint(dst, m.ConvSeq, 10)
	}
	dst = append(dst, `,"inbox":`...)
	dst = strconv.AppendBool(dst, m.InInbox)
	if m.InInbox {
		dst = append(dst, `,"seq":`...)
		dst = strconv.AppendUint(dst, m.InboxSeq, 10)
	}
	dst = append(dst, `,"outbox":"`...)
	dst = append(dst, outboxState(m.Outbox)...)
	return rawJSON(append(dst, `"}`...)), nil
}

func outboxState(s int) string {
	switch s {
	case model.OutboxNone:
		return "none"
	case model.OutboxPending:
		return "pending"
	case model.OutboxPublished:
		return "published"
	case model.OutboxConfirmed:
		return "confirmed"
	}
	return "status-" + strconv.Itoa(s)
}
