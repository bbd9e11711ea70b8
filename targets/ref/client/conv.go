package client

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/valyala/fasthttp"
)

// This file holds the conversation routes: the per-conversation pull, the
// history by conv_seq, and the actions on messages (revoke, delete for
// me, clear, mark read).

// Limits of the conversation routes.
const (
	// MaxConvPullLimit bounds a conversation pull page (the contract's 50).
	MaxConvPullLimit = 50
	// MaxHistoryRange bounds to_seq-from_seq+1 of a history page.
	MaxHistoryRange = 1000
)

// Conversation route paths.
const (
	ConvPullPath = "/v1/conv/pull"
	HistoryPath  = "/v1/history"
	RevokePath   = "/v1/msg/revoke"
	DeletePath   = "/v1/msg/delete"
	ClearPath    = "/v1/conv/clear"
	ReadPath     = "/v1/msg/read"
)

// ConvPull fetches one page of conversation convID's entries of the
// token's inbox above cursor (limit 1..MaxConvPullLimit). The answer has
// the shape of a sync pull.
func (c *Client) ConvPull(token string, convID, cursor uint64, limit int) (PullResp, error) {
	if convID == 0 || limit < 1 || limit > MaxConvPullLimit {
		return PullResp{}, fmt.Errorf("%w: conv pull conv_id %d limit %d (conv_id > 0, limit 1..%d)", ErrInvalid, convID, limit, MaxConvPullLimit)
	}
	b := make([]byte, 0, 80)
	b = strconv.AppendUint(append(b, ConvPullPath+"?conv_id="...), convID, 10)
	b = strconv.AppendUint(append(b, "&cursor="...), cursor, 10)
	b = strconv.AppendInt(append(b, "&limit="...), int64(limit), 10)
	var pr PullResp
	err := c.do(fasthttp.MethodGet, string(b), token, nil, &pr)
	return pr, err
}

// HistoryItem is one item of GET /v1/history, projected for the caller.
type HistoryItem struct {
	ConvSeq   uint64 `json:"conv_seq"`
	MsgID     uint64 `json:"msg_id"`
	SenderUID uint64 `json:"sender_uid"`
	CreatedAt int64  `json:"created_at"`
	Content   string `json:"content"`
	Revoked   bool   `json:"revoked"`
	Tombstone bool   `json:"tombstone"`
	IsRead    *bool  `json:"is_read"`
}

// History fetches conversation convID's history from..to by conv_seq.
func (c *Client) History(token string, convID, from, to uint64) ([]HistoryItem, error) {
	if convID == 0 || from == 0 || to < from || to-from+1 > MaxHistoryRange {
		return nil, fmt.Errorf("%w: history conv_id %d from %d to %d (conv_id > 0, 1 <= from <= to, at most %d)", ErrInvalid, convID, from, to, MaxHistoryRange)
	}
	b := make([]byte, 0, 96)
	b = strconv.AppendUint(append(b, HistoryPath+"?conv_id="...), convID, 10)
	b = strconv.AppendUint(append(b, "&from_seq="...), from, 10)
	b = strconv.AppendUint(append(b, "&to_seq="...), to, 10)
	var out struct {
		Msgs []HistoryItem `json:"msgs"`
	}
	err := c.do(fasthttp.MethodGet, string(b), token, nil, &out)
	return out.Msgs, err
}

// msgRef is the body of revoke and delete.
type msgRef struct {
	ConvID  uint64 `json:"conv_id"`
	ConvSeq uint64 `json:"conv_seq"`
}

// Revoke revokes the token's uid's message at (convID, convSeq) for
// everyone.
func (c *Client) Revoke(token string, convID, convSeq uint64) error {
	return c.msgAction(RevokePath, token, convID, convSeq)
}

// Delete deletes the message at (convID, convSeq) for the token's uid.
func (c *Client) Delete(token string, convID, convSeq uint64) error {
	return c.msgAction(DeletePath, token, convID, convSeq)
}

func (c *Client) msgAction(path, token string, convID, convSeq uint64) error {
	if convID == 0 || convSeq == 0 {
		return fmt.Errorf("%w: %s conv_id %d conv_seq %d must be > 0", ErrInvalid, path, convID, convSeq)
	}
	body, err := json.Marshal(msgRef{convID, convSeq})
	if err != nil {
		return fmt.Errorf("client: %s: %w", path, err)
	}
	return c.do(fasthttp.MethodPost, path, token, body, nil)
}

// Clear clears conversation convID for the token's uid and returns the
// watermark in force.
func (c *Client) Clear(token string, convID uint64) (uint64, error) {
	if convID == 0 {
		return 0, fmt.Errorf("%w: clear conv_id must be > 0", ErrInvalid)
	}
	body := strconv.AppendUint([]byte(`{"conv_id":`), convID, 10)
	var out struct {
		MinSeq uint64 `json:"min_seq"`
	}
	err := c.do(fasthttp.MethodPost, ClearPath, token, append(body, '}'), &out)
	return out.MinSeq, err
}

// MarkRead marks conversation convID's conv_seqs from..to read by the
// token's uid (one to one conversations).
func (c *Client) MarkRead(token string, convID, from, to uint64) error {
	if convID == 0 || from == 0 || to < from || to-from+1 > MaxHistoryRange {
		return fmt.Errorf("%w: read conv_id %d from %d to %d (conv_id > 0, 1 <= from <= to, at most %d)", ErrInvalid, convID, from, to, MaxHistoryRange)
	}
	body, err := json.Marshal(struct {
		ConvID  uint64 `json:"conv_id"`
		FromSeq uint64 `json:"from_seq"`
		ToSeq   uint64 `json:"to_seq"`
	}{convID, from, to})
	if err != nil {
		return fmt.Errorf("client: read: %w", err)
	}
	return c.do(fasthttp.MethodPost, ReadPath, token, body, nil)
}
