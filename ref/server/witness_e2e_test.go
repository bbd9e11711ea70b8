package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"imlab/ref/api"
	"imlab/ref/model"
)

// labWitness is GET /v1/lab/history's answer as a lab client reads it.
type labWitness struct {
	ConvID     uint64 `json:"conv_id"`
	ConvIDStr  string `json:"conv_id_str"`
	FromSeq    uint64 `json:"from_seq"`
	ToSeq      uint64 `json:"to_seq"`
	BucketSize int    `json:"bucket_size"`
	MaxSeq     uint64 `json:"max_seq"`
	TopBucket  *int   `json:"top_bucket"`
	Buckets    []struct {
		Idx    uint64 `json:"idx"`
		Exists bool   `json:"exists"`
		Slots  int    `json:"slots"`
		MaxSeq uint64 `json:"max_seq"`
	} `json:"buckets"`
	Clears []struct {
		UID    uint64 `json:"uid"`
		MinSeq uint64 `json:"min_seq"`
	} `json:"clears"`
	Slots []struct {
		ConvSeq   uint64  `json:"conv_seq"`
		State     string  `json:"state"`
		StoredSeq uint64  `json:"stored_seq"`
		MsgID     uint64  `json:"msg_id"`
		MsgIDStr  string  `json:"msg_id_str"`
		SenderUID uint64  `json:"sender_uid"`
		ConvType  uint8   `json:"conv_type"`
		CreatedAt int64   `json:"created_at"`
		Content   *string `json:"content"`
		Revoke    *struct {
			UID  uint64 `json:"uid"`
			Role string `json:"role"`
			At   int64  `json:"at"`
		} `json:"revoke"`
		DelList    []uint64 `json:"del_list"`
		DelRecords []uint64 `json:"del_records"`
		IsRead     bool     `json:"is_read"`
		V          int64    `json:"v"`
		Detail     string   `json:"detail"`
	} `json:"slots"`
}

// TestLabHistoryWitness runs the history witness through the real server
// (MariaDB, Redis, kfake, FerretDB): after sends, a revoke, a delete for
// one member, a clear and a read mark, GET /v1/lab/history shows the store
// as it is, unprojected, to any member; an outsider is refused; a process
// without the lab routes does not serve it.
func TestLabHistoryWitness(t *testing.T) {
	fb := startFullBackends(t, true)
	cfg := fullConfig(fb, "strict", RoleAll)
	cfg.LabRoutes = true
	p := startProcess(t, cfg, fb.b)
	e := clientFor(t, p, fb.my)
	if r := e.call("POST", "/v1/group/create", e.tok(1, "phone"), `{"group_id":7,"members":[1,2,3]}`); r.status != 200 {
		t.Fatalf("group: %d %s", r.status, r.body)
	}
	a1, a2, a3 := e.tok(1, "phone"), e.tok(2, "phone"), e.tok(3, "phone")
	grp, _ := model.GroupConvID(7)
	one, _ := model.SingleConvID(1, 2)
	var grpMsgs, oneMsgs []sendAnswer
	for i := 0; i < 5; i++ {
		grpMsgs = append(grpMsgs, e.send([]string{a1, a2, a3}[i%3], fmt.Sprintf(`{"client_msg_id":"g%d","conv_type":2,"group_id":7,"content":"g%d"}`, i, i)))
		oneMsgs = append(oneMsgs, e.send(a1, fmt.Sprintf(`{"client_msg_id":"o%d","conv_type":1,"to_uid":2,"content":"o%d"}`, i, i)))
	}
	e.waitHistory(a1, grp, 5, 20*time.Second)
	e.waitHistory(a1, one, 5, 20*time.Second)
	post := func(tok, path, body string) {
		t.Helper()
		if r := e.call("POST", path, tok, body); r.status != 200 {
			t.Fatalf("%s %s: %d %s", path, body, r.status, r.body)
		}
	}
	post(a1, "/v1/msg/revoke", fmt.Sprintf(`{"conv_id":%d,"conv_seq":1}`, grp))
	post(a3, "/v1/msg/delete", fmt.Sprintf(`{"conv_id":%d,"conv_seq":2}`, grp))
	post(a2, "/v1/conv/clear", fmt.Sprintf(`{"conv_id":%d}`, grp))
	post(a2, ReadPath, fmt.Sprintf(`{"conv_id":"%d","from_seq":1,"to_seq":3}`, one))

	witness := func(tok string, conv, from, to uint64) labWitness {
		t.Helper()
		r := e.call("GET", fmt.Sprintf("%s?conv_id=%d&from_seq=%d&to_seq=%d", api.LabHistoryPath, conv, from, to), tok, "")
		if r.status != 200 {
			t.Fatalf("witness %d: %d %s", conv, r.status, r.body)
		}
		var w labWitness
		if err := json.Unmarshal(r.body, &w); err != nil {
			t.Fatalf("witness answer %s: %v", r.body, err)
		}
		return w
	}
	// uid 2 cleared the group and uid 3 deleted seq 2: uid 2 and uid 3 see
	// the same stored facts as uid 1.
	for _, tok := range []string{a1, a2, a3} {
		w := witness(tok, grp, 1, 8)
		if w.ConvID != grp || w.ConvIDStr != strconv.FormatUint(grp, 10) || w.BucketSize != 100 || w.MaxSeq != 5 || w.TopBucket == nil || *w.TopBucket != 0 || len(w.Slots) != 8 {
			t.Fatalf("group witness header %+v", w)
		}
		if len(w.Buckets) != 1 || !w.Buckets[0].Exists || w.Buckets[0].Slots != 100 || w.Buckets[0].MaxSeq != 5 {
			t.Fatalf("buckets %+v", w.Buckets)
		}
		if len(w.Clears) != 1 || w.Clears[0].UID != 2 || w.Clears[0].MinSeq != 5 {
			t.Fatalf("clears %+v", w.Clears)
		}
		for i, s := range w.Slots {
			seq := uint64(i + 1)
			if seq > 5 {
				if s.State != "empty" || s.MsgID != 0 || s.Content != nil {
					t.Fatalf("seq %d past the end: %+v", seq, s)
				}
				continue
			}
			m := grpMsgs[seq-1]
			if s.State != "filled" || s.ConvSeq != seq || s.StoredSeq != seq || s.MsgID != m.MsgID || s.MsgIDStr != m.MsgIDStr ||
				s.SenderUID != uint64(1+i%3) || s.ConvType != 2 || s.Content == nil || *s.Content != fmt.Sprintf("g%d", i) || s.CreatedAt != m.ServerTime {
				t.Fatalf("group seq %d: %+v, sent %+v", seq, s, m)
			}
			switch {
			case seq == 1 && (s.Revoke == nil || s.Revoke.UID != 1 || s.Revoke.Role != "sender" || s.Revoke.At < m.ServerTime || s.V != 1):
				t.Fatalf("revoked seq 1: %+v", s)
			case seq == 2 && (len(s.DelList) != 1 || s.DelList[0] != 3 || s.Revoke != nil):
				t.Fatalf("deleted seq 2: %+v", s)
			case seq > 2 && (s.Revoke != nil || len(s.DelList) != 0 || s.IsRead):
				t.Fatalf("untouched seq %d: %+v", seq, s)
			}
		}
	}
	w := witness(a1, one, 1, 5)
	for i, s := range w.Slots {
		if want := i < 3; s.IsRead != want || s.MsgID != oneMsgs[i].MsgID {
			t.Fatalf("1:1 seq %d: %+v (read: %v)", i+1, s, want)
		}
	}
	if len(w.Clears) != 0 {
		t.Fatalf("1:1 clears %+v", w.Clears)
	}
	for _, c := range []struct {
		tok, query string
		status     int
	}{
		{a3, fmt.Sprintf("?conv_id=%d&from_seq=1&to_seq=5", one), 403},
		{e.tok(9, "x"), fmt.Sprintf("?conv_id=%d&from_seq=1&to_seq=5", grp), 403},
		{a1, fmt.Sprintf("?conv_id=%d&from_seq=1&to_seq=1001", grp), 400},
		{a1, fmt.Sprintf("?conv_id=%d&from_seq=1", grp), 400},
		{"", fmt.Sprintf("?conv_id=%d&from_seq=1&to_seq=5", grp), 401},
	} {
		if r := e.call("GET", api.LabHistoryPath+c.query, c.tok, ""); r.status != c.status {
			t.Fatalf("%s: %d %s, want %d", c.query, r.status, r.body, c.status)
		}
	}

	off := fullConfig(fb, "strict", RoleAPI)
	off.Migrate = false
	q := clientFor(t, startProcess(t, off, fb.b), fb.my)
	if r := q.call("GET", fmt.Sprintf("%s?conv_id=%d&from_seq=1&to_seq=5", api.LabHistoryPath, grp), a1, ""); r.status != 404 {
		t.Fatalf("without the lab routes: %d %s", r.status, r.body)
	}
}
