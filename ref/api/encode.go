package api

import (
	"strconv"

	"imlab/ref/model"
	"imlab/ref/push"
)

// EncodeItem is the default ItemEncoder: one pull item of the contract, with
// created_at in unix milliseconds and "missing":true (content empty) when
// the inbox row's message body is gone.
func EncodeItem(dst []byte, e model.InboxEntry) []byte {
	return push.AppendItem(dst, e)
}

// appendString appends s as a JSON string literal (push owns the encoding,
// so a pulled item and a pushed frame can never differ).
func appendString(dst []byte, s string) []byte {
	return push.AppendJSONString(dst, s)
}

// pullItemBytes is what a pull answer reserves per item: a short message's
// item (its ids with their string twins) fits, so that a page's buffer is
// made once.
const pullItemBytes = 256

// newPullBuf is the buffer of a pull answer of n items.
func newPullBuf(n int) []byte { return make([]byte, 0, 64+n*pullItemBytes) }

// appendPull appends a pull answer: {"msgs":[...],"has_more":..,
// "next_cursor":..} and, past the unread threshold, "truncated":true and
// "summary":[{"conv_id","conv_id_str","conv_type","unread","min_seq",
// "max_seq"}].
func appendPull(dst []byte, r model.PullResult, enc ItemEncoder) []byte {
	dst = append(dst, `{"msgs":[`...)
	for i, e := range r.Msgs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = enc(dst, e)
	}
	dst = append(dst, `],"has_more":`...)
	dst = strconv.AppendBool(dst, r.HasMore)
	dst = append(dst, `,"next_cursor":`...)
	dst = strconv.AppendUint(dst, r.NextCursor, 10)
	if r.Truncated {
		dst = append(dst, `,"truncated":true,"summary":[`...)
		for i, s := range r.Summary {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '{')
			dst = push.AppendID(dst, "conv_id", s.ConvID)
			dst = append(dst, `,"conv_type":`...)
			dst = strconv.AppendUint(dst, uint64(s.ConvType), 10)
			dst = append(dst, `,"unread":`...)
			dst = strconv.AppendUint(dst, s.Unread, 10)
			dst = append(dst, `,"min_seq":`...)
			dst = strconv.AppendUint(dst, s.MinSeq, 10)
			dst = append(dst, `,"max_seq":`...)
			dst = strconv.AppendUint(dst, s.MaxSeq, 10)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// sendResultLen is the longest send answer without prefix: six members of
// at most 20 digits (server_time may carry a sign) and their names.
const sendResultLen = len(`{"msg_id":,"msg_id_str":"","conv_id":,"conv_id_str":"","conv_seq":,"server_time":-}`) + 6*20

// appendSendResult appends {"msg_id","msg_id_str","conv_id","conv_id_str",
// "conv_seq","server_time"} (server_time in unix ms), optionally prefixed
// by extra members such as `"type":"send_ack","client_msg_id":"..."` for
// the ws reply.
func appendSendResult(dst []byte, prefix []byte, r model.SendResult) []byte {
	dst = append(dst, '{')
	if len(prefix) > 0 {
		dst = append(dst, prefix...)
		dst = append(dst, ',')
	}
	dst = push.AppendID(dst, "msg_id", r.MsgID)
	dst = append(dst, ',')
	dst = push.AppendID(dst, "conv_id", r.ConvID)
	dst = append(dst, `,"conv_seq":`...)
	dst = strconv.AppendUint(dst, r.ConvSeq, 10)
	dst = append(dst, `,"server_time":`...)
	dst = strconv.AppendInt(dst, r.ServerTime.UnixMilli(), 10)
	return append(dst, '}')
}
