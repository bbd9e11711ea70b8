package api

import (
	"context"
	"fmt"
	"testing"
	"time"

	"imlab/ref/history"
	"imlab/ref/model"
)

type fakeLab struct{ inboxCalls []uint64 }

func (*fakeLab) Policy() string { return "strict" }

func (f *fakeLab) Inbox(_ context.Context, uid, after uint64, limit int) (model.PullResult, error) {
	f.inboxCalls = append(f.inboxCalls, uid, after, uint64(limit))
	return model.PullResult{Msgs: []model.InboxEntry{{UID: uid, Seq: after + 1, MsgID: 9, ConvID: 5, ConvType: 1, ConvSeq: 2, SenderUID: 3, Content: "x"}},
		HasMore: true, NextCursor: after + 1}, nil
}

func (*fakeLab) Message(_ context.Context, uid, msgID uint64) (model.StoredMessage, error) {
	if msgID == 404 {
		return model.StoredMessage{MsgID: msgID, UID: uid, Outbox: model.OutboxNone}, nil
	}
	return model.StoredMessage{MsgID: msgID, UID: uid, Content: true, ConvID: 5, ConvSeq: 2, InInbox: true, InboxSeq: 7, Outbox: model.OutboxConfirmed}, nil
}

// TestLabRoutes: the lab routes are mounted only with Deps.Lab, read the
// token's uid, take strict queries, and carry the policy.
func TestLabRoutes(t *testing.T) {
	off := newHarness(t, nil)
	tok := off.token(4, "lab")
	for _, p := range []string{LabInboxPath, LabStoredPath + "?msg_id=1"} {
		if a := off.do("GET", p, tok, nil); a.status != 404 {
			t.Fatalf("%s without Deps.Lab: %d %s", p, a.status, a.body)
		}
	}
	lab := &fakeLab{}
	h := newHarness(t, func(_ *Config, d *Deps) { d.Lab = lab })
	tok = h.token(4, "lab")
	if a := h.do("GET", LabInboxPath+"?after=10&limit=2", "", nil); a.status != 401 {
		t.Fatalf("no token: %d", a.status)
	}
	a := h.do("GET", LabInboxPath+"?after=10&limit=2", tok, nil)
	want := `{"policy":"strict","msgs":[{"seq":11,"msg_id":9,"msg_id_str":"9","conv_id":5,"conv_id_str":"5","conv_type":1,"conv_seq":2,"sender_uid":3,"created_at":-62135596800000,"content":"x"}],"has_more":true,"next_cursor":11}`
	if a.status != 200 || string(a.body) != want {
		t.Fatalf("inbox: %d %s\nwant %s", a.status, a.body, want)
	}
	if len(lab.inboxCalls) != 3 || lab.inboxCalls[0] != 4 || lab.inboxCalls[1] != 10 || lab.inboxCalls[2] != 2 {
		t.Fatalf("inbox calls %v", lab.inboxCalls)
	}
	if a := h.do("GET", LabInboxPath, tok, nil); a.status != 200 || lab.inboxCalls[5] != model.MaxPullLimit {
		t.Fatalf("default limit: %d %v", a.status, lab.inboxCalls)
	}
	for _, q := range []string{"?uid=5", "?limit=501", "?after=x", "?after=1&after=2"} {
		if a := h.do("GET", LabInboxPath+q, tok, nil); a.status != 400 {
			t.Fatalf("inbox %s: %d %s", q, a.status, a.body)
		}
	}
	a = h.do("GET", LabStoredPath+"?msg_id=9", tok, nil)
	if want := `{"policy":"strict","msg_id":9,"msg_id_str":"9","uid":4,"content":true,"conv_id":5,"conv_id_str":"5","conv_seq":2,"inbox":true,"seq":7,"outbox":"confirmed"}`; a.status != 200 || string(a.body) != want {
		t.Fatalf("stored: %d %s\nwant %s", a.status, a.body, want)
	}
	a = h.do("GET", LabStoredPath+"?msg_id=404", tok, nil)
	if want := `{"policy":"strict","msg_id":404,"msg_id_str":"404","uid":4,"content":false,"inbox":false,"outbox":"none"}`; a.status != 200 || string(a.body) != want {
		t.Fatalf("stored nothing: %d %s", a.status, a.body)
	}
	if a := h.do("GET", LabStoredPath, tok, nil); a.status != 400 {
		t.Fatalf("stored without msg_id: %d", a.status)
	}
}

type fakeLabHistory struct{ calls [][4]uint64 }

func (f *fakeLabHistory) Witness(_ context.Context, uid, conv, from, to uint64) (history.Witness, error) {
	f.calls = append(f.calls, [4]uint64{uid, conv, from, to})
	if uid == 9 {
		return history.Witness{}, fmt.Errorf("%w: not a member", model.ErrForbidden)
	}
	at := time.UnixMilli(1_700_000_000_000).UTC()
	return history.Witness{ConvID: conv, FromSeq: from, ToSeq: to, BucketSize: 100, MaxSeq: 3, TopBucket: 0, TopBucketCounted: true,
		Buckets: []history.WitnessBucket{{Idx: 0, Exists: true, Slots: 100, MaxSeq: 3}},
		Clears:  []history.Clear{{UID: 4, MinSeq: 2}},
		Slots: []history.WitnessSlot{
			{ConvSeq: 1, State: history.WitnessFilled, StoredSeq: 1, MsgID: 1 << 60, SenderUID: 4, ConvType: model.ConvGroup, Content: "", CreatedAt: at,
				Revoke: &history.Revoke{UserID: 4, Role: "sender", At: at.Add(time.Second)}, DelList: []uint64{5}, DelRecords: []uint64{6}, Version: 2},
			{ConvSeq: 2, State: history.WitnessEmpty},
			{ConvSeq: 3, State: history.WitnessPurged},
			{ConvSeq: 4, State: history.WitnessInvalid, Detail: "bson type 32-bit integer"},
		}}, nil
}

// TestLabHistoryRoute: GET /v1/lab/history exists only with the lab routes,
// answers 501 without a history store, reads the token's uid, parses its
// query strictly, and encodes the witness as documented.
func TestLabHistoryRoute(t *testing.T) {
	off := newHarness(t, func(_ *Config, d *Deps) { d.LabHistory = &fakeLabHistory{} })
	if a := off.do("GET", LabHistoryPath+"?conv_id=7&from_seq=1&to_seq=4", off.token(4, "lab"), nil); a.status != 404 {
		t.Fatalf("without Deps.Lab: %d %s", a.status, a.body)
	}
	noHist := newHarness(t, func(_ *Config, d *Deps) { d.Lab = &fakeLab{} })
	if a := noHist.do("GET", LabHistoryPath+"?conv_id=7&from_seq=1&to_seq=4", noHist.token(4, "lab"), nil); a.status != 501 {
		t.Fatalf("without a history store: %d %s", a.status, a.body)
	}
	lh := &fakeLabHistory{}
	h := newHarness(t, func(_ *Config, d *Deps) { d.Lab, d.LabHistory = &fakeLab{}, lh })
	tok := h.token(4, "lab")
	if a := h.do("GET", LabHistoryPath+"?conv_id=7&from_seq=1&to_seq=4", "", nil); a.status != 401 {
		t.Fatalf("no token: %d", a.status)
	}
	a := h.do("GET", LabHistoryPath+"?conv_id=7&from_seq=1&to_seq=4", tok, nil)
	want := `{"conv_id":7,"conv_id_str":"7","from_seq":1,"to_seq":4,"bucket_size":100,"max_seq":3,"top_bucket":0,` +
		`"buckets":[{"idx":0,"exists":true,"slots":100,"max_seq":3}],"clears":[{"uid":4,"min_seq":2}],"slots":[` +
		`{"conv_seq":1,"state":"filled","stored_seq":1,"msg_id":1152921504606846976,"msg_id_str":"1152921504606846976","sender_uid":4,"conv_type":2,` +
		`"created_at":1700000000000,"content":"","revoke":{"uid":4,"role":"sender","at":1700000001000},"del_list":[5],"del_records":[6],"is_read":false,"v":2},` +
		`{"conv_seq":2,"state":"empty","is_read":false,"v":0},{"conv_seq":3,"state":"purged","is_read":false,"v":0},` +
		`{"conv_seq":4,"state":"invalid","is_read":false,"v":0,"detail":"bson type 32-bit integer"}]}`
	if a.status != 200 || string(a.body) != want {
		t.Fatalf("witness: %d %s\nwant %s", a.status, a.body, want)
	}
	if len(lh.calls) != 1 || lh.calls[0] != [4]uint64{4, 7, 1, 4} {
		t.Fatalf("calls %v", lh.calls)
	}
	if a := h.do("GET", LabHistoryPath+"?conv_id=7&from_seq=1&to_seq=4", h.token(9, "lab"), nil); a.status != 403 {
		t.Fatalf("not a member: %d %s", a.status, a.body)
	}
	for _, q := range []string{"", "?conv_id=7&from_seq=1", "?conv_id=7&to_seq=1", "?from_seq=1&to_seq=2", "?conv_id=7&from_seq=1&to_seq=2&uid=5",
		"?conv_id=x&from_seq=1&to_seq=2", "?conv_id=7&from_seq=1&from_seq=1&to_seq=2"} {
		if a := h.do("GET", LabHistoryPath+q, tok, nil); a.status != 400 {
			t.Fatalf("query %q: %d %s", q, a.status, a.body)
		}
	}
	if len(lh.calls) != 2 {
		t.Fatalf("bad queries reached the store: %v", lh.calls)
	}
}
