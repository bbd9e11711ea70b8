package api

import (
	"unicode/utf8"

	"imlab/ref/model"
)

// The send body is decoded by hand when it is in the plain form every
// client sends: one object, members named exactly as the contract spells
// them, each at most once, strings without escapes, numbers as unsigned
// decimal integers (group_id also as a string of such digits, the form of
// a client whose numbers are doubles: ID). That subset decodes to exactly what encoding/json
// would make of it; anything else (an escape, null, a fraction, a
// differently cased name, an unknown or repeated member, malformed or
// trailing data) is left to encoding/json, which decodes it or words the
// error as before. So the fast path can only ever answer what the strict
// decoder answers, at a fraction of its cost (FuzzSendBodyFast checks
// this).

// Member bits of sendBody, to refuse a repeated member in the fast path.
const (
	memberClientMsgID = 1 << iota
	memberConvType
	memberToUID
	memberGroupID
	memberContent
)

// decodeFast decodes body into b when body is in the plain form; false
// leaves b as it was and means "ask encoding/json".
func (b *sendBody) decodeFast(body []byte) bool {
	out := *b // absent members keep their values, as with encoding/json
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		i++
	} else {
		var seen int
		for {
			name, j, ok := plainString(body, i)
			if !ok {
				return false
			}
			j = skipSpace(body, j)
			if j >= len(body) || body[j] != ':' {
				return false
			}
			j = skipSpace(body, j+1)
			var bit int
			switch string(name) {
			case "client_msg_id":
				bit = memberClientMsgID
				var v []byte
				if v, j, ok = plainString(body, j); ok {
					out.ClientMsgID = string(v)
				}
			case "content":
				bit = memberContent
				var v []byte
				if v, j, ok = plainString(body, j); ok {
					out.Content = string(v)
				}
			case "conv_type":
				bit = memberConvType
				var v uint64
				if v, j, ok = plainUint(body, j, 0xff); ok {
					out.ConvType = model.ConvType(v)
				}
			case "to_uid":
				bit = memberToUID
				out.ToUID, j, ok = plainUint(body, j, ^uint64(0))
			case "group_id":
				bit = memberGroupID
				if j < len(body) && body[j] == '"' {
					var v []byte
					if v, j, ok = plainString(body, j); ok {
						out.GroupID, ok = decimalID(v)
					}
				} else {
					var v uint64
					v, j, ok = plainUint(body, j, ^uint64(0))
					out.GroupID = ID(v)
				}
			default:
				return false
			}
			if !ok || seen&bit != 0 {
				return false
			}
			seen |= bit
			j = skipSpace(body, j)
			if j >= len(body) {
				return false
			}
			if body[j] == '}' {
				i = j + 1
				break
			}
			if body[j] != ',' {
				return false
			}
			i = skipSpace(body, j+1)
		}
	}
	if skipSpace(body, i) != len(body) {
		return false
	}
	*b = out
	return true
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(s []byte, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// plainString reads a JSON string at s[i] that needs no decoding: no
// escape, no control byte, valid UTF-8 (encoding/json would replace
// invalid bytes). It returns the bytes between the quotes and the index
// after the closing quote.
func plainString(s []byte, i int) ([]byte, int, bool) {
	if i >= len(s) || s[i] != '"' {
		return nil, i, false
	}
	start := i + 1
	ascii := true
	for j := start; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '"':
			v := s[start:j]
			if !ascii && !utf8.Valid(v) {
				return nil, i, false
			}
			return v, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, i, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, i, false
}

// plainUint reads an unsigned decimal JSON integer at s[i] (no sign, no
// fraction, no exponent, no leading zero) of at most max.
func plainUint(s []byte, i int, max uint64) (uint64, int, bool) {
	j := i
	var v uint64
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		d := uint64(s[j] - '0')
		if v > (max-d)/10 {
			return 0, i, false
		}
		v = v*10 + d
		j++
	}
	switch {
	case j == i, s[i] == '0' && j-i > 1:
		return 0, i, false
	case j < len(s) && (s[j] == '.' || s[j] == 'e' || s[j] == 'E'):
		return 0, i, false
	}
	return v, j, true
}
