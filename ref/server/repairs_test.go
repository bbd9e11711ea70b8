package server

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"imlab/ref/model"
)

// TestRepairLog: rows are counted, messages listed once each, in the
// order first repaired, and the list is bounded.
func TestRepairLog(t *testing.T) {
	var l repairLog
	l.Committed(context.Background(), []model.InboxEntry{{UID: 1, MsgID: 10}, {UID: 2, MsgID: 10}, {UID: 1, MsgID: 11}})
	r := l.snapshot()
	if r.Rows != 3 || len(r.MsgIDs) != 2 || r.MsgIDs[0] != 10 || r.MsgIDs[1] != 11 || r.Truncated {
		t.Fatalf("repairs %+v", r)
	}
	r.MsgIDs[0] = 99 // a copy
	if l.snapshot().MsgIDs[0] != 10 {
		t.Fatal("snapshot shares the log's slice")
	}
	var many []model.InboxEntry
	for i := 0; i < MaxRepairsListed+5; i++ {
		many = append(many, model.InboxEntry{UID: 1, MsgID: uint64(1000 + i)})
	}
	l.Committed(context.Background(), many)
	if r := l.snapshot(); len(r.MsgIDs) != MaxRepairsListed || !r.Truncated || r.Rows != uint64(3+len(many)) {
		t.Fatalf("bounded: %d listed, truncated %v, rows %d", len(r.MsgIDs), r.Truncated, r.Rows)
	}
}

// TestRepairsAnswerIDTwins: the answer lists every msg_id also as a string
// of the same digits, in the same order: exact where a double (what
// JavaScript's JSON.parse keeps of the number) is not.
func TestRepairsAnswerIDTwins(t *testing.T) {
	var l repairLog
	ids := []uint64{1<<53 + 1, 92_016_000_000<<22 | 3<<12 | 7, math.MaxUint64, 5}
	for _, id := range ids {
		l.Committed(context.Background(), []model.InboxEntry{{UID: 1, MsgID: id}})
	}
	b, err := json.Marshal(l.snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var exact struct {
		MsgIDs    []uint64 `json:"msg_ids"`
		MsgIDsStr []string `json:"msg_ids_str"`
	}
	var js struct {
		MsgIDs []float64 `json:"msg_ids"`
	}
	if err := json.Unmarshal(b, &exact); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	if len(exact.MsgIDsStr) != len(ids) || len(js.MsgIDs) != len(ids) {
		t.Fatalf("answer %s", b)
	}
	for i, id := range ids {
		if got, err := strconv.ParseUint(exact.MsgIDsStr[i], 10, 64); err != nil || got != id || exact.MsgIDs[i] != id {
			t.Fatalf("msg_ids_str[%d] %q (%v), want %d: %s", i, exact.MsgIDsStr[i], err, id, b)
		}
		if lossy := strconv.FormatFloat(js.MsgIDs[i], 'f', -1, 64); (lossy == exact.MsgIDsStr[i]) != (id <= 1<<53) {
			t.Fatalf("%d: the double reads %s", id, lossy)
		}
	}
	// An empty log answers empty lists, not null.
	var empty repairLog
	if b, _ := json.Marshal(empty.snapshot()); string(b) != `{"rows":0,"msg_ids":[],"msg_ids_str":[]}` {
		t.Fatalf("empty answer %s", b)
	}
}
