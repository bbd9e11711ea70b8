package api

import (
	"context"
	"testing"

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
