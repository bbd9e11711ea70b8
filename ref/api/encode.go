package api

import (
	"strconv"
	"unicode/utf8"

	"imlab/ref/model"
)

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD and
// control characters are escaped, as encoding/json does.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// EncodeItem is the default ItemEncoder: one pull item of the contract, with
// created_at in unix milliseconds and "missing":true (content empty) when
// the inbox row's message body is gone.
func EncodeItem(dst []byte, e model.InboxEntry) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, e.Seq, 10)
	dst = append(dst, `,"msg_id":`...)
	dst = strconv.AppendUint(dst, e.MsgID, 10)
	dst = append(dst, `,"conv_id":`...)
	dst = strconv.AppendUint(dst, e.ConvID, 10)
	dst = append(dst, `,"conv_type":`...)
	dst = strconv.AppendUint(dst, uint64(e.ConvType), 10)
	dst = append(dst, `,"conv_seq":`...)
	dst = strconv.AppendUint(dst, e.ConvSeq, 10)
	dst = append(dst, `,"sender_uid":`...)
	dst = strconv.AppendUint(dst, e.SenderUID, 10)
	dst = append(dst, `,"created_at":`...)
	dst = strconv.AppendInt(dst, e.CreatedAt.UnixMilli(), 10)
	dst = append(dst, `,"content":`...)
	dst = appendString(dst, e.Content)
	if e.Missing {
		dst = append(dst, `,"missing":true`...)
	}
	return append(dst, '}')
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
