package api

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// ID is a 64-bit id in a request body (conv_id, group_id): a JSON number,
// as before, or a JSON string of the same decimal digits. Ids pass 2^53
// (every 1:1 conv_id, group ids up to 2^62), which a client whose numbers
// are IEEE doubles (JavaScript's JSON.parse) cannot hold as a number: it
// keeps the "<name>_str" twin of an answer and sends that string back.
//
// The string holds only the digits of 0..18446744073709551615: no sign,
// no space, no leading zero, no fraction or exponent. Anything else is
// refused (400, naming the field); null leaves the value as it was, as it
// does for a uint64. Uids stay numbers only: they have 31 bits.
type ID uint64

// idType names ID in the decoder's type errors (describeJSONError words
// a refused id string for it).
func idType() reflect.Type { return reflect.TypeFor[ID]() }

// UnmarshalJSON reads a number or a string of decimal digits.
func (id *ID) UnmarshalJSON(b []byte) error {
	if len(b) == 0 {
		return &json.UnmarshalTypeError{Value: "empty value", Type: idType()}
	}
	switch c := b[0]; {
	case c == 'n': // null (the decoder passes only valid JSON)
		return nil
	case c == '"':
		digits := b[1 : len(b)-1]
		if _, _, ok := plainString(b, 0); !ok {
			// Escapes, or bytes encoding/json would replace: decode the
			// string first (rare: digits need no escape).
			var s string
			if err := json.Unmarshal(b, &s); err != nil {
				return &json.UnmarshalTypeError{Value: "string", Type: idType()}
			}
			digits = []byte(s)
		}
		v, ok := decimalID(digits)
		if !ok {
			return &json.UnmarshalTypeError{Value: fmt.Sprintf("string %q", truncate(string(digits), 32)), Type: idType()}
		}
		*id = v
		return nil
	case c == '-' || (c >= '0' && c <= '9'):
		v, ok := decimalID(b)
		if !ok {
			return &json.UnmarshalTypeError{Value: "number " + truncate(string(b), 32), Type: idType()}
		}
		*id = v
		return nil
	case c == 't' || c == 'f':
		return &json.UnmarshalTypeError{Value: "bool", Type: idType()}
	case c == '[':
		return &json.UnmarshalTypeError{Value: "array", Type: idType()}
	default:
		return &json.UnmarshalTypeError{Value: "object", Type: idType()}
	}
}

// decimalID reads s as the decimal digits of an unsigned 64-bit integer,
// the whole of s: no sign, no leading zero, no overflow.
func decimalID(s []byte) (ID, bool) {
	v, n, ok := plainUint(s, 0, ^uint64(0))
	if !ok || n != len(s) {
		return 0, false
	}
	return ID(v), true
}
