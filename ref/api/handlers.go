package api

import (
	"context"
	"fmt"
	"strconv"

	"imlab/ref/model"
)

// sendBody is the JSON body of POST /v1/msg/send and of a ws "send" frame
// (without "type"). The sender is the token's uid and did, never the body's.
// group_id (62 bits) is a number or a string of its digits; to_uid (31
// bits) a number.
type sendBody struct {
	ClientMsgID string         `json:"client_msg_id"`
	ConvType    model.ConvType `json:"conv_type"`
	ToUID       uint64         `json:"to_uid"`
	GroupID     ID             `json:"group_id"`
	Content     string         `json:"content"`
}

func (b sendBody) request(c Caller) model.SendRequest {
	return model.SendRequest{
		SenderUID:   c.UID,
		DeviceID:    c.DID,
		ClientMsgID: b.ClientMsgID,
		ConvType:    b.ConvType,
		ToUID:       b.ToUID,
		GroupID:     uint64(b.GroupID),
		Content:     b.Content,
	}
}

func (s *Server) handleSend(ctx context.Context, c Caller, r *Request) (any, error) {
	if _, err := r.Query(); err != nil {
		return nil, err
	}
	b, err := decodeSendBody(r.Body())
	if err != nil {
		return nil, err
	}
	req := b.request(c)
	if err := req.Validate(); err != nil {
		return nil, err
	}
	res, err := s.deps.Send.Send(ctx, req)
	if err != nil {
		return nil, err
	}
	var buf [sendResultLen]byte
	return r.reply(appendSendResult(buf[:0], nil, res)), nil
}

func (s *Server) handlePull(ctx context.Context, c Caller, r *Request) (any, error) {
	q, err := r.Query("cursor", "limit", "full")
	if err != nil {
		return nil, err
	}
	var cursor *uint64
	if v, ok, err := q.Uint64("cursor"); err != nil {
		return nil, err
	} else if ok {
		cursor = &v
	}
	limit, err := q.Limit(model.MaxPullLimit)
	if err != nil {
		return nil, err
	}
	full, err := q.Bool("full")
	if err != nil {
		return nil, err
	}
	res, err := s.deps.Pull.Pull(ctx, c.UID, c.DID, cursor, limit, full)
	if err != nil {
		return nil, err
	}
	s.markSource(r, res.Source)
	return rawJSON(appendPull(newPullBuf(len(res.Msgs)), res, s.enc)), nil
}

func (s *Server) handleConvPull(ctx context.Context, c Caller, r *Request) (any, error) {
	q, err := r.Query("conv_id", "cursor", "limit")
	if err != nil {
		return nil, err
	}
	convID, err := q.RequiredUint64("conv_id")
	if err != nil {
		return nil, err
	}
	if _, _, _, err := model.ParseConvID(convID); err != nil {
		return nil, err
	}
	cursor, _, err := q.Uint64("cursor")
	if err != nil {
		return nil, err
	}
	limit, err := q.Limit(model.MaxConvPullLimit)
	if err != nil {
		return nil, err
	}
	res, err := s.deps.Pull.ConvPull(ctx, c.UID, c.DID, convID, cursor, limit)
	if err != nil {
		return nil, err
	}
	s.markSource(r, res.Source)
	return rawJSON(appendPull(newPullBuf(len(res.Msgs)), res, s.enc)), nil
}

// markSource tells where a page came from (cache or mysql) in a header, for
// the lab's eyes; it is not part of the contract.
func (s *Server) markSource(r *Request, source string) {
	if source != "" {
		r.rc.Response.Header.Set("X-Imlab-Source", source)
	}
}

type ackBody struct {
	PullSeq *uint64 `json:"pull_seq"`
}

func (s *Server) handleAck(ctx context.Context, c Caller, r *Request) (any, error) {
	if _, err := r.Query(); err != nil {
		return nil, err
	}
	var b ackBody
	if err := r.DecodeJSON(&b); err != nil {
		return nil, err
	}
	if b.PullSeq == nil {
		return nil, fmt.Errorf("%w: pull_seq is required", model.ErrInvalid)
	}
	cur, err := s.deps.Pull.Ack(ctx, c.UID, c.DID, *b.PullSeq)
	if err != nil {
		return nil, err
	}
	return rawJSON(append(strconv.AppendUint([]byte(`{"pull_seq":`), cur, 10), '}')), nil
}

// groupBody is POST /v1/group/create's body: group_id a number or a
// string of its digits, members (uids, 31 bits) numbers.
type groupBody struct {
	GroupID ID       `json:"group_id"`
	Members []uint64 `json:"members"`
}

func (s *Server) handleGroupCreate(ctx context.Context, c Caller, r *Request) (any, error) {
	if _, err := r.Query(); err != nil {
		return nil, err
	}
	var b groupBody
	if err := r.DecodeJSON(&b); err != nil {
		return nil, err
	}
	if _, err := model.GroupConvID(uint64(b.GroupID)); err != nil {
		return nil, err
	}
	if len(b.Members) == 0 || len(b.Members) > model.MaxGroupMembers {
		return nil, fmt.Errorf("%w: members must list 1..%d uids, got %d", model.ErrInvalid, model.MaxGroupMembers, len(b.Members))
	}
	for _, m := range b.Members {
		if m == 0 || m > model.MaxUID {
			return nil, fmt.Errorf("%w: member uid must be in 1..%d, got %d", model.ErrInvalid, model.MaxUID, m)
		}
	}
	if err := s.deps.Send.CreateGroup(ctx, uint64(b.GroupID), b.Members); err != nil {
		return nil, err
	}
	return nil, nil
}
