package client

import (
	"fmt"
	"strconv"

	"github.com/valyala/fasthttp"
)

// Lab routes of the conversation history and of retention (mounted only
// when the server enables its lab routes; 404 otherwise).
const (
	LabHistoryPath   = "/v1/lab/history"
	LabRetentionPath = "/v1/lab/retention"
	// MaxLabHistoryRange bounds to_seq-from_seq+1 of one lab history read.
	MaxLabHistoryRange = 1000
)

// LabSlot is one conv_seq of GET /v1/lab/history: State is "" (nothing
// written), "filled", "purged" or "invalid" (Detail says what is there).
type LabSlot struct {
	ConvSeq    uint64    `json:"conv_seq"`
	State      string    `json:"state"`
	StoredSeq  uint64    `json:"stored_seq"`
	MsgID      uint64    `json:"msg_id"`
	SenderUID  uint64    `json:"sender_uid"`
	ConvType   uint8     `json:"conv_type"`
	CreatedAt  int64     `json:"created_at"`
	Content    string    `json:"content"`
	Revoke     *struct{} `json:"revoke"`
	DelList    []uint64  `json:"del_list"`
	DelRecords []uint64  `json:"del_records"`
	IsRead     bool      `json:"is_read"`
	Detail     string    `json:"detail"`
}

// LabHistory is the answer of GET /v1/lab/history.
type LabHistory struct {
	ConvID  uint64    `json:"conv_id"`
	FromSeq uint64    `json:"from_seq"`
	ToSeq   uint64    `json:"to_seq"`
	MaxSeq  uint64    `json:"max_seq"`
	Slots   []LabSlot `json:"slots"`
	Clears  []struct {
		UID    uint64 `json:"uid"`
		MinSeq uint64 `json:"min_seq"`
	} `json:"clears"`
}

// LabHistory reads conversation convID's history from..to as stored
// (no projection) with the token of a party or member.
func (c *Client) LabHistory(token string, convID, from, to uint64) (LabHistory, error) {
	if convID == 0 || from == 0 || to < from || to-from+1 > MaxLabHistoryRange {
		return LabHistory{}, fmt.Errorf("%w: lab history conv_id %d from %d to %d (conv_id > 0, 1 <= from <= to, at most %d)", ErrInvalid, convID, from, to, MaxLabHistoryRange)
	}
	b := make([]byte, 0, 96)
	b = strconv.AppendUint(append(b, LabHistoryPath+"?conv_id="...), convID, 10)
	b = strconv.AppendUint(append(b, "&from_seq="...), from, 10)
	b = strconv.AppendUint(append(b, "&to_seq="...), to, 10)
	var h LabHistory
	err := c.do(fasthttp.MethodGet, string(b), token, nil, &h)
	return h, err
}

// LabRetention is the answer of GET /v1/lab/retention (times unix ms).
type LabRetention struct {
	Active   bool `json:"active"`
	Settings struct {
		LabShortAges   bool  `json:"lab_short_ages"`
		MaxAgeMS       int64 `json:"max_age_ms"`
		PulledMinAgeMS int64 `json:"pulled_min_age_ms"`
		IntervalMS     int64 `json:"interval_ms"`
	} `json:"settings"`
	Passes    uint64 `json:"passes"`
	Truncated bool   `json:"truncated"`
	Rows      []struct {
		UID       uint64 `json:"uid"`
		Seq       uint64 `json:"seq"`
		MsgID     uint64 `json:"msg_id"`
		ConvID    uint64 `json:"conv_id"`
		CreatedAt int64  `json:"created_at"`
		DeletedAt int64  `json:"deleted_at"`
		Reason    string `json:"reason"`
	} `json:"rows"`
}

// LabRetention reads what the server's retention deleted and its settings.
func (c *Client) LabRetention() (LabRetention, error) {
	var r LabRetention
	err := c.do(fasthttp.MethodGet, LabRetentionPath, "", nil, &r)
	return r, err
}
