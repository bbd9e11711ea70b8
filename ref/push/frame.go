package push

import (
	"strconv"
	"unicode/utf8"

	"imlab/ref/model"
)

// Item is the JSON shape of one inbox entry as the contract shows it in a
// pull answer ({"seq","msg_id","msg_id_str","conv_id","conv_id_str",
// "conv_type","conv_seq","sender_uid","created_at","content"}; created_at
// in unix milliseconds; "missing":true only when the body is gone). A push
// frame is the same object with "type":"msg" and "prev_seq" added. msg_id
// and conv_id pass 2^53, so each comes twice (AppendID): as a number and as
// a string of the same digits. Item is for decoding (tests, clients);
// encoding uses AppendItem / EncodeEntry, which write the same bytes faster.
type Item struct {
	Type      string `json:"type,omitempty"`
	Seq       uint64 `json:"seq"`
	PrevSeq   uint64 `json:"prev_seq,omitempty"`
	MsgID     uint64 `json:"msg_id"`
	MsgIDStr  string `json:"msg_id_str"`
	ConvID    uint64 `json:"conv_id"`
	ConvIDStr string `json:"conv_id_str"`
	ConvType  uint8  `json:"conv_type"`
	ConvSeq   uint64 `json:"conv_seq"`
	SenderUID uint64 `json:"sender_uid"`
	CreatedAt int64  `json:"created_at"`
	Content   string `json:"content"`
	Missing   bool   `json:"missing,omitempty"`
}

// AppendItem appends e as a pull item JSON object to dst.
func AppendItem(dst []byte, e model.InboxEntry) []byte {
	dst = append(dst, '{')
	return appendFields(dst, e)
}

// maxFrameLen is the longest push frame with an empty content: the members'
// names and nine decimal numbers of at most 20 bytes (msg_id and conv_id
// twice, created_at with its sign) and a conv_type of at most 3.
const maxFrameLen = len(`{"type":"msg","prev_seq":,"seq":,"msg_id":,"msg_id_str":"","conv_id":,"conv_id_str":"",`+
	`"conv_type":,"conv_seq":,"sender_uid":,"created_at":,"content":"","missing":true}`) + 9*20 + 3

// EncodeEntry returns e as a push frame: {"type":"msg","prev_seq":...,
// then the pull item fields}.
func EncodeEntry(e model.InboxEntry) []byte {
	dst := make([]byte, 0, maxFrameLen+len(e.Content))
	dst = append(dst, `{"type":"msg","prev_seq":`...)
	dst = strconv.AppendUint(dst, e.PrevSeq, 10)
	dst = append(dst, ',')
	return appendFields(dst, e)
}

func appendFields(dst []byte, e model.InboxEntry) []byte {
	dst = append(dst, `"seq":`...)
	dst = strconv.AppendUint(dst, e.Seq, 10)
	dst = append(dst, ',')
	dst = AppendID(dst, "msg_id", e.MsgID)
	dst = append(dst, ',')
	dst = AppendID(dst, "conv_id", e.ConvID)
	dst = append(dst, `,"conv_type":`...)
	dst = strconv.AppendUint(dst, uint64(e.ConvType), 10)
	dst = append(dst, `,"conv_seq":`...)
	dst = strconv.AppendUint(dst, e.ConvSeq, 10)
	dst = append(dst, `,"sender_uid":`...)
	dst = strconv.AppendUint(dst, e.SenderUID, 10)
	dst = append(dst, `,"created_at":`...)
	dst = strconv.AppendInt(dst, e.CreatedAt.UnixMilli(), 10)
	dst = append(dst, `,"content":`...)
	dst = AppendJSONString(dst, e.Content)
	if e.Missing {
		dst = append(dst, `,"missing":true`...)
	}
	return append(dst, '}')
}

// AppendID appends the members "name":v,"name_str":"v": an id of 64 bits
// as a JSON number, exact for a client that reads 64-bit integers, and as
// a string of the same decimal digits, exact for one whose numbers are
// IEEE doubles (JavaScript's JSON.parse rounds integers above 2^53: every
// msg_id minted after 2024-01-25, every 1:1 conv_id, large group ids).
func AppendID(dst []byte, name string, v uint64) []byte {
	dst = append(dst, '"')
	dst = append(dst, name...)
	dst = append(dst, `":`...)
	start := len(dst)
	dst = strconv.AppendUint(dst, v, 10)
	end := len(dst)
	dst = append(dst, `,"`...)
	dst = append(dst, name...)
	dst = append(dst, `_str":"`...)
	dst = append(dst, dst[start:end]...) // the digits again, not formatted twice
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a JSON string literal. Invalid UTF-8 becomes
// U+FFFD (as encoding/json does); <, >, & and U+2028/2029 are escaped so the
// output is safe to embed anywhere.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
