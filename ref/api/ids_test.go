package api

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"imlab/ref/model"
)

// TestIDStringFormInRequests: a body's conv_id or group_id may be the
// string of its digits, decoded exactly; the double a JavaScript client
// would make of the number is another id (here past the largest group id,
// refused).
func TestIDStringFormInRequests(t *testing.T) {
	conv := bigConv(t)
	fh := &fakeHistory{}
	h := newHarness(t, func(_ *Config, d *Deps) { d.History = HistoryRoutes(fh) })
	tok := h.token(model.MaxUID, "browser")
	group := strconv.FormatUint(bigGroup, 10)
	convStr := strconv.FormatUint(conv, 10)

	ok := []struct{ path, body string }{
		{"/v1/msg/send", `{"client_msg_id":"c-1","conv_type":2,"group_id":"` + group + `","content":"hi"}`},
		{"/v1/group/create", `{"group_id":"` + group + `","members":[1,2]}`},
		{"/v1/group/create", `{"group_id":"\u0037","members":[1]}`}, // escaped digits are digits
		{"/v1/msg/revoke", `{"conv_id":"` + convStr + `","conv_seq":3}`},
		{"/v1/msg/delete", `{"conv_id":"` + convStr + `","conv_seq":3}`},
		{"/v1/conv/clear", `{"conv_id":"` + convStr + `"}`},
	}
	for _, c := range ok {
		if a := h.do("POST", c.path, tok, []byte(c.body)); a.status != 200 {
			t.Fatalf("%s %s: %d %s", c.path, c.body, a.status, a.body)
		}
	}
	if len(h.send.sends) != 1 || h.send.sends[0].GroupID != bigGroup {
		t.Fatalf("send got %+v, want group %d", h.send.sends, uint64(bigGroup))
	}
	if len(h.send.groups) != 2 || h.send.groups[0][0] != bigGroup || h.send.groups[1][0] != 7 {
		t.Fatalf("group create got %v", h.send.groups)
	}
	want := fmt.Sprintf("revoke %d %d 3|delete %d %d 3|clear %d %d", model.MaxUID, conv, model.MaxUID, conv, model.MaxUID, conv)
	if got := strings.Join(fh.calls, "|"); got != want {
		t.Fatalf("history calls %s, want %s", got, want)
	}

	// What a double-only client sends back when it kept the number: the
	// id rounded to the nearest double, another group (here beyond the
	// largest group id, refused).
	rounded := strconv.FormatFloat(float64(bigGroup), 'f', -1, 64)
	if rounded == group {
		t.Fatalf("%s survives a double", group)
	}
	a := h.do("POST", "/v1/msg/send", tok, []byte(`{"client_msg_id":"c-2","conv_type":2,"group_id":`+rounded+`,"content":"hi"}`))
	if a.status != 400 || !strings.Contains(string(a.body), "group_id must be in") {
		t.Fatalf("rounded group_id %s: %d %s", rounded, a.status, a.body)
	}

	// The ws send frame takes the same body.
	c, _, err := h.dial(tok)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-h.hub.got
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"send","client_msg_id":"w-1","conv_type":2,"group_id":"`+group+`","content":"yo"}`)); err != nil {
		t.Fatal(err)
	}
	if f := readFrame(t, c); f["type"] != "send_ack" {
		t.Fatalf("ws send: %v", f)
	}
	if len(h.send.sends) != 2 || h.send.sends[1].GroupID != bigGroup {
		t.Fatalf("ws send got %+v", h.send.sends)
	}
}

// TestIDMalformedRefused: an id that is not a number or a string of
// decimal digits within 64 bits gets 400 invalid_argument naming the
// field, and reaches no service, on every route that takes one.
func TestIDMalformedRefused(t *testing.T) {
	fh := &fakeHistory{}
	h := newHarness(t, func(_ *Config, d *Deps) { d.History = HistoryRoutes(fh) })
	tok := h.token(5, "phone")
	c, _, err := h.dial(tok)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-h.hub.got
	bodies := []struct{ path, field, format string }{
		{"/v1/msg/send", "group_id", `{"client_msg_id":"c","conv_type":2,"group_id":%s,"content":"hi"}`},
		{"ws", "group_id", `{"type":"send","client_msg_id":"c","conv_type":2,"group_id":%s,"content":"hi"}`},
		{"/v1/group/create", "group_id", `{"group_id":%s,"members":[1]}`},
		{"/v1/msg/revoke", "conv_id", `{"conv_id":%s,"conv_seq":1}`},
		{"/v1/msg/delete", "conv_id", `{"conv_id":%s,"conv_seq":1}`},
		{"/v1/conv/clear", "conv_id", `{"conv_id":%s}`},
	}
	strs := []string{`""`, `"12a"`, `"-1"`, `"+1"`, `" 1"`, `"1 "`, `"01"`, `"1e3"`, `"1.5"`, `"0x1f"`,
		`"18446744073709551616"`, `"٣"`, `"1\u0000"`, `"\ud800"`}
	others := []string{`-1`, `1.5`, `1e3`, `18446744073709551616`, `true`, `[1]`, `{"a":1}`}
	for _, b := range bodies {
		for _, v := range append(append([]string{}, strs...), others...) {
			body := fmt.Sprintf(b.format, v)
			var code, msg string
			if b.path == "ws" {
				if err := c.WriteMessage(websocket.TextMessage, []byte(body)); err != nil {
					t.Fatal(err)
				}
				f := readFrame(t, c)
				e, _ := f["error"].(map[string]any)
				if f["type"] != "error" || e == nil {
					t.Fatalf("ws %s: %v", body, f)
				}
				code, msg = fmt.Sprint(e["code"]), fmt.Sprint(e["message"])
			} else {
				a := h.do("POST", b.path, tok, []byte(body))
				var eb errBody
				if a.status != 400 || json.Unmarshal(a.body, &eb) != nil {
					t.Fatalf("%s %s: %d %s", b.path, body, a.status, a.body)
				}
				code, msg = eb.Error.Code, eb.Error.Message
			}
			// (A ws frame's field is named sendBody.group_id, as before.)
			if code != "invalid_argument" || !strings.Contains(msg, b.field+": ") {
				t.Fatalf("%s %s: %s %q", b.path, body, code, msg)
			}
			if strings.HasPrefix(v, `"`) && !strings.Contains(msg, "is not a valid id: as a string, an id is the decimal digits") {
				t.Fatalf("%s %s: %q does not say what an id string holds", b.path, body, msg)
			}
		}
	}
	if n := h.send.calls(); n != 0 || len(fh.calls) != 0 {
		t.Fatalf("malformed ids reached the services: %d sends, history %v", n, fh.calls)
	}
}

// TestIDUnmarshal: the forms of ID on their own: number, string, escaped
// string, null (unchanged), and the words of a refusal.
func TestIDUnmarshal(t *testing.T) {
	for in, want := range map[string]ID{
		`0`: 0, `7`: 7, `"7"`: 7, `"0"`: 0, `"\u0037\u0038"`: 78,
		`18446744073709551615`: ^ID(0), `"18446744073709551615"`: ^ID(0), `"9223372039002259465"`: 9223372039002259465,
	} {
		var v struct {
			ID ID `json:"id"`
		}
		if err := decodeJSON([]byte(`{"id":`+in+`}`), &v); err != nil || v.ID != want {
			t.Errorf("%s: %d %v, want %d", in, v.ID, err, want)
		}
	}
	v := struct {
		ID ID `json:"id"`
	}{ID: 42}
	if err := decodeJSON([]byte(`{"id":null}`), &v); err != nil || v.ID != 42 {
		t.Fatalf("null: %d %v", v.ID, err)
	}
	for in, want := range map[string]string{
		`"12a"`:                "invalid_argument: field id: string \"12a\" is not a valid id: as a string, an id is the decimal digits of 0..18446744073709551615 alone (no sign, space or leading zero)",
		`-1`:                   "invalid_argument: field id: number -1 is not a valid unsigned integer",
		`18446744073709551616`: "invalid_argument: field id: number 18446744073709551616 is not a valid unsigned integer",
		`true`:                 "invalid_argument: field id: bool is not a valid unsigned integer",
	} {
		err := decodeJSON([]byte(`{"id":`+in+`}`), &v)
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v\nwant %s", in, err, want)
		}
	}
}

// TestSendGroupIDStringAllocations: a send body whose group_id is a string
// takes the fast path: the handler allocates no more than for the number.
func TestSendGroupIDStringAllocations(t *testing.T) {
	h, tok := nopHandler(t)
	allocs := func(body string) float64 {
		var rc fasthttp.RequestCtx
		sendRequest(&rc, tok, []byte(body))
		h(&rc)
		if rc.Response.StatusCode() != 200 {
			t.Fatalf("%s: %d %s", body, rc.Response.StatusCode(), rc.Response.Body())
		}
		return testing.AllocsPerRun(200, func() { rc.Response.Reset(); h(&rc) })
	}
	num := allocs(`{"client_msg_id":"c-1","conv_type":2,"group_id":4611686018427387903,"content":"hi"}`)
	str := allocs(`{"client_msg_id":"c-1","conv_type":2,"group_id":"4611686018427387903","content":"hi"}`)
	if str > num {
		t.Fatalf("send with a string group_id: %v allocs, with a number %v", str, num)
	}
}
