package server

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"imlab/ref/fanout"
	"imlab/ref/model"
)

// TestLabTransientWindow: below fanout.MinTransientWindow the consumers'
// transient window is refused unless set through the lab switch, which
// allows it down to fanout.MinLabTransientWindow; a refused value changes
// nothing and the error names the setting.
func TestLabTransientWindow(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Auth.Secret = e2eSecret
	cfg.Fanout.Consumer.TransientWindow = 2 * time.Second
	if err := cfg.Validate(); !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "transient window") {
		t.Fatalf("a 2s window without the lab switch: %v; want refused, naming the transient window", err)
	}
	cfg = DefaultConfig()
	cfg.Auth.Secret = e2eSecret
	if err := LabTransientWindow(&cfg, 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "transient window") {
		t.Fatalf("a 100ms lab window: %v; want refused below %s", err, fanout.MinLabTransientWindow)
	}
	if cfg.Fanout.Consumer.LabShortWindow || cfg.Fanout.Consumer.TransientWindow != fanout.DefaultConsumerConfig().TransientWindow {
		t.Fatalf("a refused lab window changed the config: %+v", cfg.Fanout.Consumer)
	}
	if err := LabTransientWindow(&cfg, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil || !cfg.Fanout.Consumer.LabShortWindow || cfg.Fanout.Consumer.TransientWindow != 2*time.Second {
		t.Fatalf("a 2s lab window: %v, %+v", err, cfg.Fanout.Consumer)
	}
}

// TestDeadLettersLabRoute: GET /v1/lab/deadletters lists the dead-letter
// topic's records as the consumer writes them (headers included), with
// whether each inbox-tier letter's message is now in every recipient's
// inbox; it is served only with the lab routes.
func TestDeadLettersLabRoute(t *testing.T) {
	fb := startFullBackends(t, false)
	cfg := fullConfig(fb, "store", RoleAll)
	cfg.LabRoutes = true
	if err := LabTransientWindow(&cfg, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	p := startProcess(t, cfg, fb.b)
	e := clientFor(t, p, fb.my)
	get := func() DeadLettersAnswer {
		t.Helper()
		r := e.call("GET", DeadLettersPath, "", "")
		if r.status != 200 {
			t.Fatalf("dead letters: %d %s", r.status, r.body)
		}
		var a DeadLettersAnswer
		if err := json.Unmarshal(r.body, &a); err != nil {
			t.Fatalf("dead letters answer %s: %v", r.body, err)
		}
		return a
	}
	if a := get(); a.Records != 0 || len(a.Letters) != 0 || a.TransientWindowMS != 2000 || !a.LabShortWindow ||
		a.Topic != cfg.Fanout.Topics.DLQ || a.FanoutTopic != cfg.Fanout.Topics.Fanout || a.InboxGroup != cfg.Fanout.Consumer.Group {
		t.Fatalf("before any dead letter: %+v", a)
	}
	if r := e.call("POST", "/v1/group/create", e.tok(1, "phone"), `{"group_id":7,"members":[1,2,3]}`); r.status != 200 {
		t.Fatalf("group: %d %s", r.status, r.body)
	}
	msgs := e.traffic("dl", 2)
	e.waitInboxes(msgs, 20*time.Second)
	delivered := msgs[0].a
	lost, _ := model.SingleConvID(1, 2)
	// Two letters as the inbox tier writes them: one whose message is in
	// its inboxes (repaired since), one whose message never reached them.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(fb.b.KafkaBrokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	letter := func(ev fanout.Event, reason string) *kgo.Record {
		b, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		h := func(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }
		return &kgo.Record{Topic: cfg.Fanout.Topics.DLQ, Value: b, Headers: []kgo.RecordHeader{
			h(fanout.HeaderDLQReason, reason), h(fanout.HeaderDLQGroup, cfg.Fanout.Consumer.Group),
			h(fanout.HeaderDLQClass, fanout.DLQClassTransient), h(fanout.HeaderDLQAttempts, "7"),
			h(fanout.HeaderDLQRetriedMS, "2100"), h(fanout.HeaderDLQWindowMS, "2000"),
			h(fanout.HeaderDLQTopic, cfg.Fanout.Topics.Fanout), h(fanout.HeaderDLQPartition, "3"), h(fanout.HeaderDLQOffset, "41"),
		}}
	}
	recs := []*kgo.Record{
		letter(fanout.Event{MsgID: delivered.MsgID, ConvID: delivered.ConvID, ConvSeq: delivered.ConvSeq, SenderUID: 1, SentAt: time.Now()}, "store down"),
		letter(fanout.Event{MsgID: 1<<60 + 5, ConvID: lost, ConvSeq: 999, SenderUID: 1, SentAt: time.Now()}, "store down for good"),
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	a := get()
	if a.Records != 2 || len(a.Letters) != 2 || a.Repaired != 1 || a.Truncated {
		t.Fatalf("after two letters: %+v", a)
	}
	byMsg := map[uint64]DeadLetterAnswer{}
	for _, l := range a.Letters {
		if l.Tier != "inbox" || l.Class != fanout.DLQClassTransient || l.Attempts != 7 || l.RetriedMS != 2100 || l.WindowMS != 2000 ||
			l.SourcePartition != 3 || l.SourceOffset != 41 || l.Repaired == nil || l.MsgIDStr != strconv.FormatUint(l.MsgID, 10) {
			t.Fatalf("letter %+v", l)
		}
		byMsg[l.MsgID] = l
	}
	if l := byMsg[delivered.MsgID]; !*l.Repaired || l.Reason != "store down" {
		t.Fatalf("delivered message's letter: %+v", l)
	}
	if l := byMsg[1<<60+5]; *l.Repaired || l.ConvIDStr != strconv.FormatUint(lost, 10) {
		t.Fatalf("lost message's letter: %+v", l)
	}

	cfg2 := fullConfig(fb, "store", RoleAPI)
	cfg2.Redis.KeyPrefix += "other:"
	p2 := startProcess(t, cfg2, fb.b)
	if r := clientFor(t, p2, fb.my).call("GET", DeadLettersPath, "", ""); r.status != 404 {
		t.Fatalf("without the lab routes: %d %s", r.status, r.body)
	}
}
