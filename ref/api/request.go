package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"imlab/ref/model"
)

// Request gives a handler strict access to its input: query parameters
// from an allowed set, at most once each, and a JSON body decoded with
// unknown fields and trailing data refused. Every parse error wraps
// model.ErrInvalid (400).
type Request struct {
	rc *fasthttp.RequestCtx
}

// Method is the HTTP method.
func (r *Request) Method() string { return string(r.rc.Method()) }

// Body is the raw request body (at most MaxBodyBytes). Valid only during
// the handler.
func (r *Request) Body() []byte { return r.rc.PostBody() }

// Query returns the query parameters, refusing names outside allowed and
// repeated names. The answer is for reading: nil when the request has no
// parameters.
func (r *Request) Query(allowed ...string) (Query, error) {
	args := r.rc.QueryArgs()
	if args.Len() == 0 {
		return nil, nil // most routes take none: no map to make
	}
	q := Query{}
	var err error
	args.VisitAll(func(k, v []byte) {
		if err != nil {
			return
		}
		name := string(k)
		ok := false
		for _, a := range allowed {
			if a == name {
				ok = true
				break
			}
		}
		switch {
		case !ok:
			err = fmt.Errorf("%w: unknown query parameter %q (allowed: %s)", model.ErrInvalid, truncate(name, 32), strings.Join(allowed, ", "))
		case q.has(name):
			err = fmt.Errorf("%w: query parameter %q given twice", model.ErrInvalid, name)
		default:
			q[name] = string(v)
		}
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}

// Query is a parsed query string, to be read (a nil Query reads as
// empty).
type Query map[string]string

func (q Query) has(name string) bool { _, ok := q[name]; return ok }

// Uint64 parses an optional unsigned decimal parameter; ok is false when it
// is absent. An empty value counts as absent.
func (q Query) Uint64(name string) (v uint64, ok bool, err error) {
	s, present := q[name]
	if !present || s == "" {
		return 0, false, nil
	}
	v, perr := strconv.ParseUint(s, 10, 64)
	if perr != nil {
		return 0, false, fmt.Errorf("%w: %s must be an unsigned decimal integer, got %q", model.ErrInvalid, name, truncate(s, 32))
	}
	return v, true, nil
}

// RequiredUint64 parses a required unsigned decimal parameter.
func (q Query) RequiredUint64(name string) (uint64, error) {
	v, ok, err := q.Uint64(name)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("%w: query parameter %s is required", model.ErrInvalid, name)
	}
	return v, nil
}

// Limit parses limit= in 1..max; absent is 0, which the services read as
// their configured default page size.
func (q Query) Limit(max int) (int, error) {
	v, ok, err := q.Uint64("limit")
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, nil
	}
	if v < 1 || v > uint64(max) {
		return 0, fmt.Errorf("%w: limit must be in 1..%d, got %d", model.ErrInvalid, max, v)
	}
	return int(v), nil
}

// Bool parses an optional flag: 1/true or 0/false.
func (q Query) Bool(name string) (bool, error) {
	switch s := q[name]; s {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, fmt.Errorf("%w: %s must be 1, true, 0 or false, got %q", model.ErrInvalid, name, truncate(s, 32))
	}
}

// DecodeJSON decodes the body into v strictly: one JSON value, no unknown
// fields, no wrong types, nothing after it.
func (r *Request) DecodeJSON(v any) error {
	return decodeStrict(r.rc.PostBody(), v)
}

// decodeSendBody is decodeStrict of a send body, answered by value: the
// plain form (decodeFast) then costs no allocation beyond its strings.
func decodeSendBody(body []byte) (sendBody, error) {
	var b sendBody
	if len(body) <= MaxBodyBytes && b.decodeFast(body) {
		return b, nil // a plain body is an object: not empty
	}
	slow := new(sendBody)
	err := decodeStrict(body, slow)
	return *slow, err
}

func decodeStrict(body []byte, v any) error {
	if len(body) > MaxBodyBytes {
		return fmt.Errorf("%w: body larger than %d bytes", model.ErrTooLarge, MaxBodyBytes)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return fmt.Errorf("%w: request body must be a JSON object", model.ErrInvalid)
	}
	if b, ok := v.(*sendBody); ok && b.decodeFast(body) {
		return nil
	}
	return decodeJSON(body, v)
}

// decodeJSON is the strict decode by encoding/json: every form of body,
// and the words of every error.
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s", model.ErrInvalid, describeJSONError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: unexpected data after the JSON object", model.ErrInvalid)
	}
	return nil
}

func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Sprintf("body must be a JSON object, not %s", typ.Value)
		}
		// encoding/json names a field of an embedded struct by its Go
		// path (a ws send frame embeds the send body); the client knows
		// the JSON name alone.
		typ.Field = strings.TrimPrefix(typ.Field, "sendBody.")
		if typ.Type == idType() && strings.HasPrefix(typ.Value, "string") {
			return fmt.Sprintf("field %s: %s is not a valid id: as a string, an id is the decimal digits of 0..%d alone (no sign, space or leading zero)",
				typ.Field, typ.Value, uint64(math.MaxUint64))
		}
		return fmt.Sprintf("field %s: %s is not a valid %s", typ.Field, typ.Value, typeName(typ.Type.Kind().String()))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "truncated JSON"
	default:
		// encoding/json words unknown fields as `json: unknown field "x"`.
		return truncate(strings.TrimPrefix(err.Error(), "json: "), 200)
	}
}

func typeName(kind string) string {
	switch {
	case strings.HasPrefix(kind, "uint"):
		return "unsigned integer"
	case strings.HasPrefix(kind, "int"):
		return "integer"
	case kind == "slice":
		return "array"
	case kind == "struct", kind == "map":
		return "object"
	default:
		return kind
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
