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
