package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"imlab/ref/history"
	"imlab/ref/model"
	"imlab/ref/push"
)

// Lab route paths (mounted only with Deps.Lab).
const (
	LabInboxPath   = "/v1/lab/inbox"
	LabStoredPath  = "/v1/lab/stored"
	LabHistoryPath = "/v1/lab/history"
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

// handleLabHistory is GET /v1/lab/history?conv_id=&from_seq=&to_seq=: one
// conversation's history as MongoDB stores it, for a party or member.
func (s *Server) handleLabHistory(ctx context.Context, c Caller, r *Request) (any, error) {
	conv, from, to, err := seqRange(r, true)
	if err != nil {
		return nil, err
	}
	if s.deps.LabHistory == nil {
		return nil, fmt.Errorf("%w: GET %s: this process has no history store (MongoDB is not configured)", errNotImplemented, LabHistoryPath)
	}
	w, err := s.deps.LabHistory.Witness(ctx, c.UID, conv, from, to)
	if err != nil {
		return nil, err
	}
	return labWitnessOf(w), nil
}

// labWitness is the JSON answer of GET /v1/lab/history (see the package
// doc).
type labWitness struct {
	ConvID     uint64           `json:"conv_id"`
	ConvIDStr  string           `json:"conv_id_str"`
	FromSeq    uint64           `json:"from_seq"`
	ToSeq      uint64           `json:"to_seq"`
	BucketSize int              `json:"bucket_size"`
	MaxSeq     uint64           `json:"max_seq"`
	TopBucket  *uint64          `json:"top_bucket,omitempty"`
	Buckets    []labBucket      `json:"buckets"`
	Clears     []labClear       `json:"clears"`
	Slots      []labWitnessSlot `json:"slots"`
}

type labBucket struct {
	Idx    uint64 `json:"idx"`
	Exists bool   `json:"exists"`
	Slots  int    `json:"slots"`
	MaxSeq uint64 `json:"max_seq"`
}

type labClear struct {
	UID    uint64 `json:"uid"`
	MinSeq uint64 `json:"min_seq"`
}

type labRevoke struct {
	UID  uint64 `json:"uid"`
	Role string `json:"role"`
	At   int64  `json:"at"` // unix ms
}

type labWitnessSlot struct {
	ConvSeq    uint64     `json:"conv_seq"`
	State      string     `json:"state"`
	StoredSeq  uint64     `json:"stored_seq,omitempty"`
	MsgID      uint64     `json:"msg_id,omitempty"`
	MsgIDStr   string     `json:"msg_id_str,omitempty"`
	SenderUID  uint64     `json:"sender_uid,omitempty"`
	ConvType   uint8      `json:"conv_type,omitempty"`
	CreatedAt  int64      `json:"created_at,omitempty"` // unix ms
	Content    *string    `json:"content,omitempty"`
	Revoke     *labRevoke `json:"revoke,omitempty"`
	DelList    []uint64   `json:"del_list,omitempty"`
	DelRecords []uint64   `json:"del_records,omitempty"`
	IsRead     bool       `json:"is_read"`
	Version    int64      `json:"v"`
	Detail     string     `json:"detail,omitempty"`
}

func labWitnessOf(w history.Witness) labWitness {
	out := labWitness{ConvID: w.ConvID, ConvIDStr: strconv.FormatUint(w.ConvID, 10), FromSeq: w.FromSeq, ToSeq: w.ToSeq,
		BucketSize: w.BucketSize, MaxSeq: w.MaxSeq, Buckets: []labBucket{}, Clears: []labClear{}, Slots: []labWitnessSlot{}}
	if w.TopBucketCounted {
		top := w.TopBucket
		out.TopBucket = &top
	}
	for _, b := range w.Buckets {
		out.Buckets = append(out.Buckets, labBucket(b))
	}
	for _, c := range w.Clears {
		out.Clears = append(out.Clears, labClear(c))
	}
	for _, sl := range w.Slots {
		o := labWitnessSlot{ConvSeq: sl.ConvSeq, State: sl.State, DelList: sl.DelList, DelRecords: sl.DelRecords,
			IsRead: sl.IsRead, Version: sl.Version, Detail: sl.Detail}
		if sl.State == history.WitnessFilled {
			content := sl.Content
			o.StoredSeq, o.MsgID, o.MsgIDStr, o.SenderUID = sl.StoredSeq, sl.MsgID, strconv.FormatUint(sl.MsgID, 10), sl.SenderUID
			o.ConvType, o.CreatedAt, o.Content = uint8(sl.ConvType), sl.CreatedAt.UnixMilli(), &content
		}
		if sl.Revoke != nil {
			o.Revoke = &labRevoke{UID: sl.Revoke.UserID, Role: sl.Revoke.Role, At: sl.Revoke.At.UnixMilli()}
		}
		out.Slots = append(out.Slots, o)
	}
	return out
}
