package fanout

import (
	"strings"
	"testing"
	"time"

	"imlab/ref/model"
)

// The stored-body event round-trips, the largest one fits mq_outbox's
// payload, and the flag combinations that make no sense are refused.
func TestStoredEventCodec(t *testing.T) {
	conv, _ := model.SingleConvID(5, 6)
	m := model.Message{MsgID: 42, ConvID: conv, ConvType: model.ConvSingle, ConvSeq: 3, SenderUID: 5,
		ClientMsgID: strings.Repeat("c", model.MaxClientMsgIDLen), Content: strings.Repeat("x", model.MaxContentLen),
		CreatedAt: time.UnixMilli(1_700_000_000_123).UTC()}
	b, err := StoredEvent(m).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != MaxStoredEventBytes || len(b) > MaxEventBytes {
		t.Fatalf("largest stored event is %d bytes, want %d (max %d)", len(b), MaxStoredEventBytes, MaxEventBytes)
	}
	back, err := UnmarshalEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if !back.HasBody || !back.Stored || back.InboxDone || back.Message() != m {
		t.Fatalf("round trip: %+v", back)
	}
	loc, err := UnmarshalEvent(mustMarshal(t, EventOf(m, false)))
	if err != nil || loc.HasBody || loc.Stored {
		t.Fatalf("locator event: %+v %v", loc, err)
	}
	bad := StoredEvent(m)
	bad.HasBody = false
	if _, err := bad.Marshal(); err == nil {
		t.Fatal("stored without a body was encoded")
	}
	b[1] = flagStored // the flag alone, body bytes still there
	if _, err := UnmarshalEvent(b); err == nil {
		t.Fatal("stored flag without the body flag was decoded")
	}
}

func mustMarshal(t *testing.T, e Event) []byte {
	t.Helper()
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A record's key and value share one buffer: the key is the conversation's
// shard key, the value decodes to the event, and appending to the key
// cannot overwrite the value.
func TestRecordOfSharesOneBuffer(t *testing.T) {
	conv, _ := model.SingleConvID(5, 6)
	m := model.Message{MsgID: 42, ConvID: conv, ConvType: model.ConvSingle, ConvSeq: 3, SenderUID: 5,
		ClientMsgID: "c1", Content: "hello", CreatedAt: time.UnixMilli(1_700_000_000_123).UTC()}
	r, err := recordOf("t", StoredEvent(m), m)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Key) != string(ShardKey(conv)) || cap(r.Key) != 8 {
		t.Fatalf("key %x (cap %d), want %x (cap 8)", r.Key, cap(r.Key), ShardKey(conv))
	}
	want, err := StoredEvent(m).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	_ = append(r.Key, 0xff, 0xff, 0xff)
	if string(r.Value) != string(want) {
		t.Fatalf("value %x, want %x", r.Value, want)
	}
	got, err := UnmarshalEvent(r.Value)
	if err != nil || got.MsgID != 42 || got.Content != "hello" {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if _, err := recordOf("t", Event{}, m); err == nil {
		t.Fatal("an invalid event made a record")
	}
}
