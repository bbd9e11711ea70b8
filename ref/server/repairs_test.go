package server

import (
	"context"
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
