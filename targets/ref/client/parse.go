package client

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/valyala/fastjson"
)

// The generator's read paths (a pull page, a pushed frame) decode without
// reflection, as encoding/json would: unknown members are skipped, null
// leaves a field zero, a member of the wrong type is an error naming it.
// A page's contents share one string (one allocation per page, not one per
// item).

// pullParsers decode pull pages (any goroutine).
var pullParsers fastjson.ParserPool

// fieldErr names the member that could not be read.
func fieldErr(k []byte, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("field %s: %w", k, err)
}

// visitObject parses body with p and calls field with each member of the
// object it must hold, in order, until one fails; the error names that
// member. The values are p's: field must not keep them past p's next use.
func visitObject(p *fastjson.Parser, body []byte, field func(k []byte, v *fastjson.Value) error) error {
	v, err := p.ParseBytes(body)
	if err != nil {
		return err
	}
	o, err := v.Object()
	if err != nil {
		return err
	}
	o.Visit(func(k []byte, v *fastjson.Value) {
		if err == nil {
			err = fieldErr(k, field(k, v))
		}
	})
	return err
}

// getUint64 reads v into *dst; null leaves it unchanged.
func getUint64(v *fastjson.Value, dst *uint64) error {
	if v.Type() == fastjson.TypeNull {
		return nil
	}
	n, err := v.Uint64()
	if err == nil {
		*dst = n
	}
	return err
}

func getInt64(v *fastjson.Value, dst *int64) error {
	if v.Type() == fastjson.TypeNull {
		return nil
	}
	n, err := v.Int64()
	if err == nil {
		*dst = n
	}
	return err
}

func getUint8(v *fastjson.Value, dst *uint8) error {
	if v.Type() == fastjson.TypeNull {
		return nil
	}
	n, err := v.Uint64()
	if err == nil && n > math.MaxUint8 {
		err = fmt.Errorf("%d overflows uint8", n)
	}
	if err == nil {
		*dst = uint8(n)
	}
	return err
}

func getBool(v *fastjson.Value, dst *bool) error {
	if v.Type() == fastjson.TypeNull {
		return nil
	}
	b, err := v.Bool()
	if err == nil {
		*dst = b
	}
	return err
}

// getStringBytes returns a string member's unescaped bytes (valid until
// the parser's next use); null is empty.
func getStringBytes(v *fastjson.Value) ([]byte, error) {
	if v.Type() == fastjson.TypeNull {
		return nil, nil
	}
	return v.StringBytes()
}

// msgFields reads the members of an inbox entry into m, except content,
// which it returns (its bytes are the parser's).
func msgFields(o *fastjson.Object, m *Msg) (content []byte, err error) {
	o.Visit(func(k []byte, v *fastjson.Value) {
		if err != nil {
			return
		}
		err = fieldErr(k, msgField(k, v, m, &content))
	})
	return content, err
}

// msgField reads one member of an inbox entry (another member: nothing).
func msgField(k []byte, v *fastjson.Value, m *Msg, content *[]byte) error {
	switch string(k) {
	case "seq":
		return getUint64(v, &m.Seq)
	case "msg_id":
		return getUint64(v, &m.MsgID)
	case "conv_id":
		return getUint64(v, &m.ConvID)
	case "conv_type":
		return getUint8(v, &m.ConvType)
	case "conv_seq":
		return getUint64(v, &m.ConvSeq)
	case "sender_uid":
		return getUint64(v, &m.SenderUID)
	case "created_at":
		return getInt64(v, &m.CreatedAt)
	case "content":
		b, err := getStringBytes(v)
		*content = b
		return err
	}
	return nil
}

// parsePull decodes a pull page into pr.
func parsePull(body []byte, pr *PullResp) error {
	p := pullParsers.Get()
	defer pullParsers.Put(p)
	var items []*fastjson.Value
	err := visitObject(p, body, func(k []byte, v *fastjson.Value) (err error) {
		switch string(k) {
		case "msgs":
			if v.Type() != fastjson.TypeNull {
				items, err = v.Array()
			}
		case "has_more":
			err = getBool(v, &pr.HasMore)
		case "next_cursor":
			err = getUint64(v, &pr.NextCursor)
		case "truncated":
			err = getBool(v, &pr.Truncated)
		case "summary":
			if v.Type() != fastjson.TypeNull {
				pr.Summary = json.RawMessage(v.MarshalTo(nil))
			}
		}
		return err
	})
	if err != nil || len(items) == 0 {
		return err
	}
	return pullItems(items, pr)
}

// pullItems decodes a page's items; their contents share one string.
func pullItems(items []*fastjson.Value, pr *PullResp) error {
	pr.Msgs = make([]Msg, len(items))
	contents := make([][]byte, len(items))
	total := 0
	for i, it := range items {
		o, err := it.Object()
		if err != nil {
			return fmt.Errorf("msgs[%d]: %w", i, err)
		}
		c, err := msgFields(o, &pr.Msgs[i])
		if err != nil {
			return fmt.Errorf("msgs[%d]: %w", i, err)
		}
		contents[i] = c
		total += len(c)
	}
	var sb strings.Builder
	sb.Grow(total)
	for _, c := range contents {
		sb.Write(c)
	}
	all := sb.String()
	off := 0
	for i, c := range contents {
		pr.Msgs[i].Content = all[off : off+len(c)]
		off += len(c)
	}
	return nil
}

// parseFrame decodes a /v1/ws frame into f with p (the reading goroutine's).
func parseFrame(p *fastjson.Parser, b []byte, f *Frame) error {
	var content []byte
	if err := visitObject(p, b, func(k []byte, v *fastjson.Value) error { return frameField(k, v, f, &content) }); err != nil {
		return err
	}
	if len(content) > 0 {
		f.Content = string(content)
	}
	return nil
}

// frameField reads one member of a frame.
func frameField(k []byte, v *fastjson.Value, f *Frame, content *[]byte) error {
	switch string(k) {
	case "type":
		b, err := getStringBytes(v)
		f.Type = frameType(b)
		return err
	case "prev_seq":
		return getUint64(v, &f.PrevSeq)
	case "pull_seq":
		return getUint64(v, &f.PullSeq)
	case "client_msg_id":
		b, err := getStringBytes(v)
		f.ClientMsgID = string(b)
		return err
	case "server_time":
		return getInt64(v, &f.ServerTime)
	case "reason":
		b, err := getStringBytes(v)
		f.Reason = string(b)
		return err
	case "error":
		if v.Type() == fastjson.TypeNull {
			return nil
		}
		var fe FrameError
		if err := json.Unmarshal(v.MarshalTo(nil), &fe); err != nil {
			return err
		}
		f.Error = &fe
		return nil
	}
	return msgField(k, v, &f.Msg, content)
}

// frameType returns the frame's type, the known ones without allocating.
func frameType(b []byte) string {
	for _, t := range [...]string{"msg", "acked", "ack", "send_ack", "error", "close", "send"} {
		if string(b) == t {
			return t
		}
	}
	return string(b)
}
