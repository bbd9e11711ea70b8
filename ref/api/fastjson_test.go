package api

import (
	"bytes"
	"testing"
)

var sendBodySeeds = []string{
	`{"client_msg_id":"c-1","conv_type":1,"to_uid":2,"content":"hi"}`,
	`{"client_msg_id":"c-2","conv_type":2,"group_id":7,"content":"hi"}`,
	" \t\r\n{ \"client_msg_id\" : \"c\" , \"conv_type\" : 1 , \"to_uid\" : 2 } \n",
	`{}`,
	`{"content":"héllo ✓"}`,
	`{"content":"a\"b"}`,
	`{"content":"a\u0041"}`,
	`{"content":"\xff"}`,
	`{"content":"a` + "\x01" + `"}`,
	`{"content":null}`,
	`{"Content":"x"}`,
	`{"CONV_TYPE":1}`,
	`{"x":1}`,
	`{"to_uid":1,"to_uid":2}`,
	`{"to_uid":01}`,
	`{"to_uid":0}`,
	`{"to_uid":-1}`,
	`{"to_uid":1.0}`,
	`{"to_uid":1e3}`,
	`{"to_uid":"1"}`,
	`{"to_uid":18446744073709551615}`,
	`{"to_uid":18446744073709551616}`,
	`{"conv_type":255}`,
	`{"conv_type":256}`,
	`{"to_uid":1,}`,
	`{"to_uid":1 "content":"x"}`,
	`{"to_uid":1} {}`,
	`{"to_uid":1}x`,
	`{"to_uid":1`,
	`[1]`,
	`"x"`,
	`{"to_uid"1}`,
	`{"to_uid":true}`,
	`{"group_id":"7"}`,
	`{"group_id":"18446744073709551615"}`,
	`{"group_id":"18446744073709551616"}`,
	`{"group_id":"07"}`,
	`{"group_id":"0"}`,
	`{"group_id":""}`,
	`{"group_id":"\u0037"}`,
	`{"group_id":"-1"}`,
	`{"group_id":" 7"}`,
	`{"group_id":"7 "}`,
	`{"group_id":"7x"}`,
	`{"group_id":"1e3"}`,
	"{\"group_id\":\"\xff\"}",
	`{"group_id":null}`,
	`{"group_id":"7","group_id":8}`,
	`{"group_id":"7"`,
	`{"group_id":7}`,
}

// TestSendBodyFast: the fast path takes the plain form and decodes it as
// encoding/json does; every other form is left to encoding/json.
func TestSendBodyFast(t *testing.T) {
	plain := map[string]sendBody{
		sendBodySeeds[0]:                  {ClientMsgID: "c-1", ConvType: 1, ToUID: 2, Content: "hi"},
		sendBodySeeds[1]:                  {ClientMsgID: "c-2", ConvType: 2, GroupID: 7, Content: "hi"},
		sendBodySeeds[2]:                  {ClientMsgID: "c", ConvType: 1, ToUID: 2},
		sendBodySeeds[3]:                  {},
		sendBodySeeds[4]:                  {Content: "héllo ✓"},
		`{"to_uid":0}`:                    {},
		`{"to_uid":18446744073709551615}`: {ToUID: ^uint64(0)},
		`{"conv_type":255}`:               {ConvType: 255},
		// group_id as the string of its digits (ID) is plain too.
		`{"group_id":"7"}`:                    {GroupID: 7},
		`{"group_id":"0"}`:                    {},
		`{"group_id":"18446744073709551615"}`: {GroupID: ^ID(0)},
		`{"group_id":7}`:                      {GroupID: 7},
	}
	for _, in := range sendBodySeeds {
		var fast sendBody
		ok := fast.decodeFast([]byte(in))
		want, isPlain := plain[in]
		if ok != isPlain {
			t.Errorf("%q: fast path took it %v, want %v", in, ok, isPlain)
			continue
		}
		if ok && fast != want {
			t.Errorf("%q: fast %+v, want %+v", in, fast, want)
		}
		checkSendBodyFast(t, []byte(in))
	}
	// Members absent from the body keep what the value held, as with
	// encoding/json.
	b := sendBody{Content: "kept"}
	if !b.decodeFast([]byte(`{"to_uid":3}`)) || b.Content != "kept" || b.ToUID != 3 {
		t.Fatalf("absent member: %+v", b)
	}
	// A refused body leaves the value untouched.
	b = sendBody{Content: "kept"}
	if b.decodeFast([]byte(`{"to_uid":3,"x":1}`)) || b != (sendBody{Content: "kept"}) {
		t.Fatalf("refused body changed the value: %+v", b)
	}
}

// checkSendBodyFast fails if the fast path accepts body differently from
// encoding/json (decodeJSON), and checks decodeStrict and decodeSendBody
// answer what decodeJSON does.
func checkSendBodyFast(t *testing.T, body []byte) {
	t.Helper()
	var fast, slow, strict sendBody
	ok := fast.decodeFast(body)
	slowErr := decodeJSON(body, &slow)
	if ok && (slowErr != nil || fast != slow) {
		t.Fatalf("%q: fast path %+v, encoding/json %+v (err %v)", body, fast, slow, slowErr)
	}
	strictErr := decodeStrict(body, &strict)
	byValue, byValueErr := decodeSendBody(body)
	if (byValueErr == nil) != (strictErr == nil) || (strictErr == nil && byValue != strict) ||
		(strictErr != nil && strictErr.Error() != byValueErr.Error()) {
		t.Fatalf("%q: decodeSendBody %+v (err %v), decodeStrict %+v (err %v)", body, byValue, byValueErr, strict, strictErr)
	}
	if len(bytes.TrimSpace(body)) == 0 || len(body) > MaxBodyBytes {
		return
	}
	if (strictErr == nil) != (slowErr == nil) || (strictErr == nil && strict != slow) ||
		(strictErr != nil && strictErr.Error() != slowErr.Error()) {
		t.Fatalf("%q: decodeStrict %+v (err %v), encoding/json %+v (err %v)", body, strict, strictErr, slow, slowErr)
	}
}

func FuzzSendBodyFast(f *testing.F) {
	for _, s := range sendBodySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkSendBodyFast(t, body) })
}

// TestSendBodyFastErrors: bodies the fast path leaves alone get
// encoding/json's words, as before.
func TestSendBodyFastErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"client_msg_id":"c","x":1}`: `invalid_argument: unknown field "x"`,
		`{"to_uid":"1"}`:              "invalid_argument: field to_uid: string is not a valid unsigned integer",
		`{"to_uid":1} {}`:             "invalid_argument: unexpected data after the JSON object",
		`{"to_uid":1,}`:               "invalid_argument: malformed JSON at byte 13",
		`{"conv_type":256}`:           "invalid_argument: field conv_type: number 256 is not a valid unsigned integer",
		`{"group_id":-1}`:             "invalid_argument: field group_id: number -1 is not a valid unsigned integer",
		`{"group_id":"07"}`: "invalid_argument: field group_id: string \"07\" is not a valid id: as a string, an id is the decimal digits " +
			"of 0..18446744073709551615 alone (no sign, space or leading zero)",
	} {
		var b sendBody
		err := decodeStrict([]byte(in), &b)
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}
