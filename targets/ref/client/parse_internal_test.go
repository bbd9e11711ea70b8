package client

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"

	"imlab/ref/model"
	"imlab/ref/push"
)

// parseEntries are inbox entries as the reference server writes them
// (ref/push's encoders, which its pull answers and push frames use).
func parseEntries() []model.InboxEntry {
	var es []model.InboxEntry
	for i, c := range []string{"", "plain", `q"uote\back`, "tab\tnl\n\x01", "你好, мир, 🙂", "\u2028", "lab|r1|42|123456789"} {
		es = append(es, model.InboxEntry{UID: 7, Seq: uint64(i + 1), MsgID: 1<<60 + uint64(i), ConvID: 1<<54 + 3, ConvType: model.ConvType(1 + i%2),
			ConvSeq: uint64(10 + i), SenderUID: 9, CreatedAt: time.UnixMilli(1_700_000_000_000 + int64(i)), Content: c, PrevSeq: uint64(i), Missing: c == ""})
	}
	return es
}

// A pull page decodes as encoding/json decodes it, from what the server
// writes: items, has_more, next_cursor, and the truncated page's summary.
func TestParsePullAsEncodingJSON(t *testing.T) {
	es := parseEntries()
	for n := 0; n <= len(es); n++ {
		for _, tail := range []string{`,"has_more":true,"next_cursor":12`, `,"has_more":false,"next_cursor":0,"truncated":true,"summary":[{"conv_id":3,"conv_id_str":"3","unread":2}]`} {
			body := []byte(`{"msgs":[`)
			for i, e := range es[:n] {
				if i > 0 {
					body = append(body, ',')
				}
				body = push.AppendItem(body, e)
			}
			body = append(append(body, ']'), tail...)
			body = append(body, '}')
			var want, got PullResp
			if err := json.Unmarshal(body, &want); err != nil {
				t.Fatal(err)
			}
			if err := parsePull(body, &got); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			if len(want.Msgs) == 0 {
				want.Msgs = nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s:\ngot  %+v\nwant %+v", body, got, want)
			}
		}
	}
	var null PullResp
	if err := parsePull([]byte(`{"msgs":null,"has_more":null,"summary":null}`), &null); err != nil || !reflect.DeepEqual(null, PullResp{}) {
		t.Fatalf("nulls: %+v %v", null, err)
	}
	for _, bad := range []string{``, `[]`, `{"msgs":{}}`, `{"msgs":[1]}`, `{"msgs":[{"seq":-1}]}`, `{"msgs":[{"conv_type":300}]}`,
		`{"msgs":[{"content":5}]}`, `{"has_more":1}`, `{"next_cursor":"1"}`, `{"msgs":[`} {
		var pr PullResp
		if err := parsePull([]byte(bad), &pr); err == nil {
			t.Fatalf("%s accepted: %+v", bad, pr)
		}
	}
}

// A push frame decodes as encoding/json decodes it: the server's msg frames,
// and its send_ack, error and close frames.
func TestParseFrameAsEncodingJSON(t *testing.T) {
	var bodies [][]byte
	for _, e := range parseEntries() {
		bodies = append(bodies, push.EncodeEntry(e))
	}
	bodies = append(bodies,
		[]byte(`{"type":"send_ack","client_msg_id":"c-`+strconv.Itoa(5)+`","msg_id":1152921504606846976,"msg_id_str":"1152921504606846976","conv_id":3,"conv_id_str":"3","conv_seq":4,"server_time":-5}`),
		[]byte(`{"type":"error","client_msg_id":"c-1","error":{"code":"rate_limited","message":"slow down","retry_after_ms":250}}`),
		[]byte(`{"type":"close","reason":"slow consumer"}`),
		[]byte(`{"type":"ack","pull_seq":99}`),
		[]byte(`{"type":"acked","pull_seq":99}`),
		[]byte(`{"type":"later","error":null}`))
	var p WS
	for _, b := range bodies {
		var want, got Frame
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if err := parseFrame(&p.fp, b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\ngot  %+v\nwant %+v", b, got, want)
		}
	}
	for _, bad := range []string{``, `[]`, `{"type":1}`, `{"prev_seq":-2}`, `{"error":"x"}`, `{"content":[]}`} {
		var f Frame
		if err := parseFrame(&p.fp, []byte(bad), &f); err == nil {
			t.Fatalf("%s accepted: %+v", bad, f)
		}
	}
}

// BenchmarkParseFrame: what decoding one frame costs a receiving device,
// a pushed message and the server's answer to its acknowledgement:
//
//	go test -run '^$' -bench BenchmarkParseFrame -benchmem ./targets/ref/client/
func BenchmarkParseFrame(b *testing.B) {
	e := model.InboxEntry{UID: 7, Seq: 12345, MsgID: 1<<60 + 77, ConvID: 1<<54 + 3, ConvType: 1, ConvSeq: 6789,
		SenderUID: 9, CreatedAt: time.UnixMilli(1_700_000_000_000), Content: "lab|r1|42|123456789", PrevSeq: 12344}
	for _, c := range []struct {
		name string
		body []byte
	}{{"msg", push.EncodeEntry(e)}, {"acked", []byte(`{"type":"acked","pull_seq":12345}`)}} {
		b.Run(c.name, func(b *testing.B) {
			var p WS
			b.ReportAllocs()
			for range b.N {
				var f Frame
				if err := parseFrame(&p.fp, c.body, &f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
