package server

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func (e *e2e) retention() RetentionAnswer {
	e.t.Helper()
	r := e.call("GET", RetentionPath, "", "") // no token: like the repairs
	if r.status != 200 {
		e.t.Fatalf("retention: %d %s", r.status, r.body)
	}
	var a RetentionAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		e.t.Fatalf("retention answer %s: %v", r.body, err)
	}
	return a
}

// pullAck pulls the device's whole inbox from its stored cursor and acks
// the end; it returns how many rows it got.
func (e *e2e) pullAck(tok string) int {
	e.t.Helper()
	n := 0
	for {
		a := e.pull(tok, "")
		n += len(a.Msgs)
		if len(a.Msgs) > 0 {
			if r := e.call("POST", "/v1/sync/ack", tok, fmt.Sprintf(`{"pull_seq":%d}`, a.NextCursor)); r.status != 200 {
				e.t.Fatalf("ack: %d %s", r.status, r.body)
			}
		}
		if !a.HasMore {
			return n
		}
	}
}

// TestRetentionLabRoute runs retention with lab short ages in the real
// server (MariaDB, Redis): a device that only connected over WebSocket
// holds back its uid's early deletion; a uid whose every device pulled
// loses its rows at the next pass; GET /v1/lab/retention lists exactly
// those rows with the settings in force, without a token.
func TestRetentionLabRoute(t *testing.T) {
	e := startE2E(t, func(c *Config) {
		c.Retention.LabShortAges = true
		c.Retention.MaxAge, c.Retention.PulledMinAge, c.Retention.Interval = time.Hour, 0, 100*time.Millisecond
	})
	if a := e.retention(); !a.Active || !a.Settings.LabShortAges || a.Settings.MaxAgeMS != 3_600_000 || a.Settings.IntervalMS != 100 ||
		a.Settings.PulledMinAgeMS != 0 || a.Settings.DeleteBatch != 500 || a.Settings.ScanPage != 1000 {
		t.Fatalf("settings %+v", a)
	}
	ws := e.dial(e.tok(2, "ws")) // known to the server, never acknowledges
	defer ws.Close()
	a1, p2, p3 := e.tok(1, "phone"), e.tok(2, "phone"), e.tok(3, "phone")
	var want []sendAnswer
	for i := 0; i < 3; i++ {
		e.send(a1, fmt.Sprintf(`{"client_msg_id":"a%d","conv_type":1,"to_uid":2,"content":"x"}`, i))
		want = append(want, e.send(a1, fmt.Sprintf(`{"client_msg_id":"b%d","conv_type":1,"to_uid":3,"content":"y"}`, i)))
	}
	if n2, n3 := e.pullAck(p2), e.pullAck(p3); n2 != 3 || n3 != 3 {
		t.Fatalf("pulled %d and %d", n2, n3)
	}
	end := time.Now().Add(10 * time.Second)
	var a RetentionAnswer
	for {
		a = e.retention()
		if a.Deleted >= 3 || time.Now().After(end) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a.Deleted != 3 || a.Pulled != 3 || a.Expired != 0 || len(a.Rows) != 3 || a.Truncated || a.Passes == 0 || a.LastPassAt == nil {
		t.Fatalf("retention after the pass: %+v", a)
	}
	for i, r := range a.Rows {
		if r.UID != 3 || r.Seq != uint64(i+1) || r.MsgID != want[i].MsgID || r.MsgIDStr != want[i].MsgIDStr || r.ConvID != want[i].ConvID ||
			r.ConvIDStr != want[i].ConvIDStr || r.Reason != "pulled" || r.CreatedAt != want[i].ServerTime || r.DeletedAt < r.CreatedAt {
			t.Fatalf("row %d: %+v, sent %+v", i, r, want[i])
		}
	}
	// More passes run; nothing else goes while the ws device has not acked.
	passes := a.Passes
	for e.retention().Passes < passes+3 {
		time.Sleep(50 * time.Millisecond)
	}
	if n := e.count("offline_msg"); n != 9 { // uid 1's own copies (no device) and uid 2's
		t.Fatalf("%d rows left, want 9", n)
	}
	if r := e.call("GET", RetentionPath+"?x=1", "", ""); r.status != 400 {
		t.Fatalf("query on the open route: %d", r.status)
	}
}
