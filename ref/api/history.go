package api

import (
	"context"
	"fmt"
	"strconv"

	"imlab/ref/history"
	"imlab/ref/model"
)

// HistoryService is what the history routes call (ref/history.Service).
type HistoryService interface {
	History(ctx context.Context, uid, convID, fromSeq, toSeq uint64) ([]history.HistoryItem, error)
	Revoke(ctx context.Context, uid, convID, convSeq uint64) error
	Delete(ctx context.Context, uid, convID, convSeq uint64) error
	Clear(ctx context.Context, uid, convID uint64) (uint64, error)
}

// HistoryRoutes adapts a HistoryService to the four history routes:
//
//	GET  /v1/history?conv_id=&from_seq=&to_seq=  -> {"msgs":[{"conv_seq","msg_id",
//	     "sender_uid","created_at","content"[,"revoked"][,"tombstone"][,"is_read"],
//	     "msg_id_str"}]}
//	     (the range is bounded by the service; to_seq defaults to from_seq)
//	POST /v1/msg/revoke {"conv_id","conv_seq"} -> {}
//	POST /v1/msg/delete {"conv_id","conv_seq"} -> {}
//	POST /v1/conv/clear {"conv_id"}            -> {"min_seq"}
//
// A body's conv_id is a number or a string of its digits (ID). The caller
// is always the token's uid.
func HistoryRoutes(h HistoryService) History {
	return History{
		Get: func(ctx context.Context, c Caller, r *Request) (any, error) {
			conv, from, to, err := seqRange(r, false)
			if err != nil {
				return nil, err
			}
			items, err := h.History(ctx, c.UID, conv, from, to)
			if err != nil {
				return nil, err
			}
			out := make([]historyItem, len(items))
			for i, it := range items {
				out[i] = historyItem{HistoryItem: it, MsgIDStr: strconv.FormatUint(it.MsgID, 10)}
			}
			return struct {
				Msgs []historyItem `json:"msgs"`
			}{out}, nil
		},
		Revoke: func(ctx context.Context, c Caller, r *Request) (any, error) {
			b, err := decodeMsgRef(r)
			if err != nil {
				return nil, err
			}
			return struct{}{}, h.Revoke(ctx, c.UID, uint64(b.ConvID), *b.ConvSeq)
		},
		Delete: func(ctx context.Context, c Caller, r *Request) (any, error) {
			b, err := decodeMsgRef(r)
			if err != nil {
				return nil, err
			}
			return struct{}{}, h.Delete(ctx, c.UID, uint64(b.ConvID), *b.ConvSeq)
		},
		Clear: func(ctx context.Context, c Caller, r *Request) (any, error) {
			if _, err := r.Query(); err != nil {
				return nil, err
			}
			var b struct {
				ConvID ID `json:"conv_id"`
			}
			if err := r.DecodeJSON(&b); err != nil {
				return nil, err
			}
			if _, _, _, err := model.ParseConvID(uint64(b.ConvID)); err != nil {
				return nil, err
			}
			min, err := h.Clear(ctx, c.UID, uint64(b.ConvID))
			if err != nil {
				return nil, err
			}
			return struct {
				MinSeq uint64 `json:"min_seq"`
			}{min}, nil
		},
	}
}

// seqRange reads the query of a read of one conversation's seqs,
// ?conv_id=&from_seq=&to_seq=: conv_id and from_seq are required, to_seq
// too when toRequired (else it is from_seq when absent); a to_seq below
// from_seq is ErrInvalid.
func seqRange(r *Request, toRequired bool) (conv, from, to uint64, err error) {
	q, err := r.Query("conv_id", "from_seq", "to_seq")
	if err != nil {
		return 0, 0, 0, err
	}
	if conv, err = q.RequiredUint64("conv_id"); err != nil {
		return 0, 0, 0, err
	}
	if from, err = q.RequiredUint64("from_seq"); err != nil {
		return 0, 0, 0, err
	}
	if toRequired {
		to, err = q.RequiredUint64("to_seq")
	} else {
		var ok bool
		if to, ok, err = q.Uint64("to_seq"); !ok {
			to = from
		}
	}
	if err != nil {
		return 0, 0, 0, err
	}
	if to < from {
		return 0, 0, 0, fmt.Errorf("%w: to_seq %d below from_seq %d", model.ErrInvalid, to, from)
	}
	return conv, from, to, nil
}

// historyItem is one item of the history answer: the service's item and
// the string twin of its msg_id (a tombstone's is "0", as its msg_id is 0).
type historyItem struct {
	history.HistoryItem
	MsgIDStr string `json:"msg_id_str"`
}

// msgRef is a revoke or delete body; conv_id is a number or its string.
type msgRef struct {
	ConvID  ID      `json:"conv_id"`
	ConvSeq *uint64 `json:"conv_seq"`
}

func decodeMsgRef(r *Request) (msgRef, error) {
	var b msgRef
	if _, err := r.Query(); err != nil {
		return b, err
	}
	if err := r.DecodeJSON(&b); err != nil {
		return b, err
	}
	if _, _, _, err := model.ParseConvID(uint64(b.ConvID)); err != nil {
		return b, err
	}
	if b.ConvSeq == nil || *b.ConvSeq == 0 {
		return b, fmt.Errorf("%w: conv_seq (>= 1) is required", model.ErrInvalid)
	}
	return b, nil
}
