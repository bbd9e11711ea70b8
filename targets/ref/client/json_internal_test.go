package client

import (
	"encoding/json"
	"testing"
)

// The send body is valid JSON that decodes to the same strings, whatever
// the content (quotes, backslashes, control characters, non-ASCII; invalid
// UTF-8 becomes U+FFFD).
func TestSendBodyIsJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\back`, "tab\tnl\ncr\r\x00\x01\x1f\x7f", "你好, мир, 🙂", "\u2028\u2029", "bad\xffutf8\xc3"} {
		r := SendReq{ClientMsgID: s, ConvType: 1, ToUID: 7, Content: s}
		b := r.appendJSON(nil)
		var got struct {
			ClientMsgID string `json:"client_msg_id"`
			ConvType    int    `json:"conv_type"`
			ToUID       uint64 `json:"to_uid"`
			Content     string `json:"content"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", s, b, err)
		}
		want := []rune(s) // invalid bytes decode as U+FFFD
		if got.Content != string(want) || got.ClientMsgID != string(want) || got.ToUID != 7 || got.ConvType != 1 {
			t.Fatalf("%q: decoded %+v", s, got)
		}
	}
	g := SendReq{ClientMsgID: "g", ConvType: 2, GroupID: 9, Content: "x"}
	var got map[string]any
	if err := json.Unmarshal(g.appendJSON(nil), &got); err != nil || got["group_id"] != float64(9) || got["to_uid"] != nil {
		t.Fatalf("group body: %v %v", got, err)
	}
}

func TestParseSendAck(t *testing.T) {
	var a SendAck
	if err := parseSendAck([]byte(` {"server_time":-5,"extra":{"x":[1]},"conv_seq":3,"msg_id":18446744073709551615,"conv_id":2} `), &a); err != nil {
		t.Fatal(err)
	}
	if a != (SendAck{MsgID: 18446744073709551615, ConvID: 2, ConvSeq: 3, ServerTime: -5}) {
		t.Fatalf("%+v", a)
	}
	for _, bad := range []string{``, `[]`, `{"msg_id":"1"}`, `{"msg_id":-1}`, `{"conv_seq":1.5}`, `{"msg_id":1`, `{"server_time":true}`} {
		var a SendAck
		if err := parseSendAck([]byte(bad), &a); err == nil {
			t.Fatalf("%s accepted: %+v", bad, a)
		}
	}
}
