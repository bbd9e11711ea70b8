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

// appendPull appends a pull answer: {"msgs":[...],"has_more":..,
// "next_cursor":..} and, past the unread threshold, "truncated":true and
// "summary":[{"conv_id","conv_type","unread","min_seq","max_seq"}].
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
			dst = append(dst, `{"conv_id":`...)
			dst = strconv.AppendUint(dst, s.ConvID, 10)
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

// sendResultLen is the longest send answer without prefix: four members of
// at most 20 digits (server_time may carry a sign) and their names.
const sendResultLen = len(`{"msg_id":,"conv_id":,"conv_seq":,"server_time":-}`) + 4*20

// appendSendResult appends {"msg_id","conv_id","conv_seq","server_time"}
// (server_time in unix ms), optionally prefixed by extra members such as
// `"type":"send_ack","client_msg_id":"..."` for the ws reply.
func appendSendResult(dst []byte, prefix []byte, r model.SendResult) []byte {
	dst = append(dst, '{')
	if len(prefix) > 0 {
		dst = append(dst, prefix...)
		dst = append(dst, ',')
	}
	dst = append(dst, `"msg_id":`...)
	dst = strconv.AppendUint(dst, r.MsgID, 10)
	dst = append(dst, `,"conv_id":`...)
	dst = strconv.AppendUint(dst, r.ConvID, 10)
	dst = append(dst, `,"conv_seq":`...)
	dst = strconv.AppendUint(dst, r.ConvSeq, 10)
	dst = append(dst, `,"server_time":`...)
	dst = strconv.AppendInt(dst, r.ServerTime.UnixMilli(), 10)
	return append(dst, '}')
}
