package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"imlab/ref/history"
	"imlab/ref/model"
	"imlab/ref/push"
)

// Ids above 2^53 as the server makes them: a msg_id of late 2026 (41 bits
// of milliseconds since 2024, node 3, sequence 7) and the largest group
// id; bigConv gives a 1:1 conv_id (bit 63 set).
const (
	bigMsgID = 92_016_000_000<<22 | 3<<12 | 7
	bigGroup = model.MaxGroupID
)

func bigConv(t *testing.T) uint64 {
	t.Helper()
	c, err := model.SingleConvID(model.MaxUID-1, model.MaxUID)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// idTwin is one id member found in an answer: its number's text and its
// string twin.
type idTwin struct {
	key, number, str string
}

// findIDs walks a JSON answer and returns every msg_id and conv_id member
// with its "_str" twin; it fails on one without its twin or whose twin
// differs from the number.
func findIDs(t *testing.T, body []byte) []idTwin {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	var out []idTwin
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range []string{"msg_id", "conv_id"} {
				n, ok := x[k]
				if !ok {
					continue
				}
				num, _ := n.(json.Number)
				str, _ := x[k+"_str"].(string)
				if num == "" || str != string(num) {
					t.Fatalf("%s: %s %v has the twin %v", body, k, n, x[k+"_str"])
				}
				out = append(out, idTwin{k, string(num), str})
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// requireExact fails unless the answer carries id as key: the string twin
// reads back exactly, and a parse of the number as an IEEE double (what
// JavaScript's JSON.parse keeps) would have given another id.
func requireExact(t *testing.T, what string, found []idTwin, key string, id uint64) {
	t.Helper()
	want := strconv.FormatUint(id, 10)
	for _, f := range found {
		if f.key != key || f.str != want {
			continue
		}
		if got, err := strconv.ParseUint(f.str, 10, 64); err != nil || got != id {
			t.Fatalf("%s: %s_str %q reads %d (%v), want %d", what, key, f.str, got, err, id)
		}
		d, err := strconv.ParseFloat(f.number, 64)
		if err != nil {
			t.Fatalf("%s: %s %s: %v", what, key, f.number, err)
		}
		if js := strconv.FormatFloat(d, 'f', -1, 64); js == want {
			t.Fatalf("%s: %s %d survives a double (%s): not a test of the twin", what, key, id, js)
		}
		return
	}
	t.Fatalf("%s: no %s %d with its twin among %+v", what, key, id, found)
}

type bigLab struct{ conv uint64 }

func (bigLab) Policy() string { return "strict" }
func (l bigLab) Inbox(_ context.Context, uid, after uint64, _ int) (model.PullResult, error) {
	return model.PullResult{Msgs: []model.InboxEntry{{UID: uid, Seq: after + 1, MsgID: bigMsgID, ConvID: l.conv, ConvType: 1, ConvSeq: 1, SenderUID: 1}},
		NextCursor: after + 1}, nil
}
func (l bigLab) Message(_ context.Context, uid, msgID uint64) (model.StoredMessage, error) {
	return model.StoredMessage{MsgID: msgID, UID: uid, Content: true, ConvID: l.conv, ConvSeq: 1, Outbox: model.OutboxNone}, nil
}

type bigHistory struct{ fakeHistory }

func (*bigHistory) History(_ context.Context, _, _, from, _ uint64) ([]history.HistoryItem, error) {
	return []history.HistoryItem{{ConvSeq: from, MsgID: bigMsgID, SenderUID: 1, CreatedAt: 5, Content: "x"}}, nil
}

// TestIDTwinsSurviveDoubles: every answer that carries a msg_id or conv_id
// carries its string twin beside it, and for ids above 2^53 the twin is
// exact where the number read as a double is not: the send answer (HTTP
// and ws), pull items and the truncated pull's summary, conv/pull, a push
// frame as the ws hands it on, the history answer and the lab routes.
func TestIDTwinsSurviveDoubles(t *testing.T) {
	conv := bigConv(t)
	h := newHarness(t, func(_ *Config, d *Deps) {
		d.Lab = bigLab{conv}
		d.History = HistoryRoutes(&bigHistory{})
	})
	h.send.res.MsgID = bigMsgID
	entry := model.InboxEntry{UID: model.MaxUID, Seq: 4, PrevSeq: 3, MsgID: bigMsgID, ConvID: conv, ConvType: 1, ConvSeq: 2, SenderUID: 1,
		CreatedAt: time.UnixMilli(1_790_000_000_000), Content: "hi"}
	h.pull.res = model.PullResult{Msgs: []model.InboxEntry{entry}, HasMore: true, NextCursor: 4, Truncated: true,
		Summary: []model.ConvSummary{{ConvID: conv, ConvType: 1, Unread: 100_001, MinSeq: 4, MaxSeq: 100_004}}}
	tok := h.token(model.MaxUID, "browser")

	a := h.do("POST", "/v1/msg/send", tok, []byte(fmt.Sprintf(`{"client_msg_id":"c-1","conv_type":1,"to_uid":%d,"content":"hi"}`, model.MaxUID-1)))
	if a.status != 200 {
		t.Fatalf("send: %d %s", a.status, a.body)
	}
	ids := findIDs(t, a.body)
	requireExact(t, "send", ids, "msg_id", bigMsgID)
	requireExact(t, "send", ids, "conv_id", conv)

	for _, path := range []string{"/v1/sync/pull", "/v1/conv/pull?conv_id=" + strconv.FormatUint(conv, 10)} {
		a = h.do("GET", path, tok, nil)
		if a.status != 200 {
			t.Fatalf("%s: %d %s", path, a.status, a.body)
		}
		ids = findIDs(t, a.body)
		requireExact(t, path, ids, "msg_id", bigMsgID)
		requireExact(t, path, ids, "conv_id", conv)
		if len(ids) != 3 { // the item's two ids and the summary's conv_id
			t.Fatalf("%s: ids %+v", path, ids)
		}
	}

	a = h.do("GET", "/v1/history?conv_id="+strconv.FormatUint(conv, 10)+"&from_seq=1", tok, nil)
	if a.status != 200 {
		t.Fatalf("history: %d %s", a.status, a.body)
	}
	requireExact(t, "history", findIDs(t, a.body), "msg_id", bigMsgID)

	a = h.do("GET", LabInboxPath, tok, nil)
	ids = findIDs(t, a.body)
	requireExact(t, "lab inbox", ids, "msg_id", bigMsgID)
	requireExact(t, "lab inbox", ids, "conv_id", conv)
	a = h.do("GET", LabStoredPath+"?msg_id="+strconv.FormatUint(bigMsgID, 10), tok, nil)
	ids = findIDs(t, a.body)
	requireExact(t, "lab stored", ids, "msg_id", bigMsgID)
	requireExact(t, "lab stored", ids, "conv_id", conv)

	c, _, err := h.dial(tok)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub := <-h.hub.got
	sub.push(entry.Seq, string(push.EncodeEntry(entry)))
	for _, frame := range []string{"", fmt.Sprintf(`{"type":"send","client_msg_id":"w-1","conv_type":1,"to_uid":%d,"content":"yo"}`, model.MaxUID-1)} {
		if frame != "" {
			if err := c.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
				t.Fatal(err)
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, b, err := c.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		ids = findIDs(t, b)
		requireExact(t, "ws frame "+string(b), ids, "msg_id", bigMsgID)
		requireExact(t, "ws frame "+string(b), ids, "conv_id", conv)
	}
}
