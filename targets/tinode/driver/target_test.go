package driver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"imlab/targets"
)

func openTarget(t *testing.T, url string, opts map[string]string) *Target {
	t.Helper()
	tg, err := Open(targets.Config{Target: "tinode+" + strings.TrimSuffix(url, "/v0/channels"), Conns: 1, Timeout: 2 * time.Second, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tg.Close() })
	return tg
}

// TestTargetOptions: the options are checked by name.
func TestTargetOptions(t *testing.T) {
	t.Setenv(EnvAPIKey, "")
	for _, c := range []struct {
		opts map[string]string
		want string
	}{
		{nil, "option apikey"},
		{map[string]string{OptAPIKey: "k", "pipeline": "2"}, `option "pipeline"`},
		{map[string]string{OptAPIKey: "k", OptSenders: "0"}, "option senders"},
	} {
		_, err := Open(targets.Config{Target: "tinode+ws://127.0.0.1:1", Conns: 1, Timeout: time.Second, Options: c.opts})
		if !errors.Is(err, targets.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v", c.opts, err)
		}
	}
	if _, err := Open(targets.Config{Target: "ref+http://127.0.0.1:1", Conns: 1, Timeout: time.Second}); !errors.Is(err, targets.ErrInvalid) {
		t.Errorf("ref target: %v", err)
	}
}

// TestTargetSessions: through the targets interface a device connects,
// reads what it missed, then receives pushes; sends are ACKed with the
// lab's names and a 500 is a definite failure; what Tinode lacks is
// refused as not offered.
func TestTargetSessions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := fakeServer(t)
	tg := openTarget(t, srv.URL(), map[string]string{OptAPIKey: fakeKey})
	if err := tg.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	pop := targets.Population{Prefix: "run-x", Users: []uint64{7, 8, 9}, Groups: []targets.Group{{ID: 50, Members: []uint64{7, 8, 9}}}}
	if err := tg.Provision(ctx, pop); err != nil {
		t.Fatal(err)
	}
	if err := tg.Provision(ctx, pop); err != nil {
		t.Fatalf("again: %v", err)
	}
	s7, _ := tg.Session(ctx, 7, "d0")
	s8, _ := tg.Session(ctx, 8, "d0")
	ack, err := s7.Send(ctx, &targets.SendReq{ClientMsgID: "run-x-1", ConvType: targets.ConvSingle, ToUID: 8, Content: "one"})
	if err != nil || ack.ConvSeq != 1 || ack.MsgID != MsgID(ack.ConvID, 1) {
		t.Fatalf("ack %+v, %v", ack, err)
	}
	c8, err := s8.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c8.Close()
	p, err := c8.Recv(time.Now().Add(2 * time.Second))
	if err != nil || p.Msg.MsgID != ack.MsgID || p.Msg.Content != "one" || p.Msg.SenderUID != 7 || p.Msg.ConvType != targets.ConvSingle {
		t.Fatalf("caught up: %+v, %v", p, err)
	}
	g, err := s7.Send(ctx, &targets.SendReq{ClientMsgID: "run-x-2", ConvType: targets.ConvGroup, GroupID: 50, Content: "all"})
	if err != nil {
		t.Fatal(err)
	}
	if p, err = c8.Recv(time.Now().Add(2 * time.Second)); err != nil || p.Msg.MsgID != g.MsgID || p.Msg.ConvType != targets.ConvGroup {
		t.Fatalf("push: %+v, %v", p, err)
	}
	srv.ErrorButStore(tg.Driver().groups[0].name, 1)
	_, err = s7.Send(ctx, &targets.SendReq{ClientMsgID: "run-x-3", ConvType: targets.ConvGroup, GroupID: 50, Content: "x"})
	if targets.Classify(err) != targets.Failed || targets.StatusOf(err) != 500 {
		t.Fatalf("500: class %v status %d (%v)", targets.Classify(err), targets.StatusOf(err), err)
	}
	if _, err := s8.Pull(ctx, targets.PullOpts{Limit: 10}); targets.Classify(err) != targets.Failed || !strings.Contains(err.Error(), "no per-user inbox") {
		t.Errorf("pull: %v", err)
	}
	if _, err := c8.Recv(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatalf("the stored copy of the refused send: %v", err)
	}
	if _, err := c8.Recv(time.Now().Add(50 * time.Millisecond)); targets.Classify(err) != targets.Unknown {
		t.Fatalf("nothing more: %v", err)
	}
	// A publish whose connection drops before the answer is unknown; the
	// next send opens a new sending session.
	srv.DropOnPublish(tg.Driver().groups[0].name, 1, false)
	_, err = s7.Send(ctx, &targets.SendReq{ClientMsgID: "run-x-4", ConvType: targets.ConvGroup, GroupID: 50, Content: "y"})
	if targets.Classify(err) != targets.Unknown || targets.StatusOf(err) != 0 {
		t.Fatalf("dropped: class %v status %d (%v)", targets.Classify(err), targets.StatusOf(err), err)
	}
	if _, err := s7.Send(ctx, &targets.SendReq{ClientMsgID: "run-x-5", ConvType: targets.ConvGroup, GroupID: 50, Content: "z"}); err != nil {
		t.Fatalf("after the drop: %v", err)
	}
}

// TestTargetReconnectReadsWhatWasNotHandedOut: a connection closed with
// messages caught up but not yet returned by Recv hands them out again on
// the next connection, and nothing already returned.
func TestTargetReconnectReadsWhatWasNotHandedOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := fakeServer(t)
	tg := openTarget(t, srv.URL(), map[string]string{OptAPIKey: fakeKey})
	if err := tg.Provision(ctx, targets.Population{Prefix: "run-y", Users: []uint64{1, 2}}); err != nil {
		t.Fatal(err)
	}
	s1, _ := tg.Session(ctx, 1, "d0")
	s2, _ := tg.Session(ctx, 2, "d0")
	send := func(i int) uint64 {
		ack, err := s1.Send(ctx, &targets.SendReq{ClientMsgID: "run-y-" + string(rune('0'+i)), ConvType: targets.ConvSingle, ToUID: 2, Content: "m"})
		if err != nil {
			t.Fatal(err)
		}
		return ack.ConvSeq
	}
	recvAll := func(c targets.Conn) []uint64 {
		var out []uint64
		for {
			p, err := c.Recv(time.Now())
			if err != nil {
				return out
			}
			out = append(out, p.Msg.ConvSeq)
		}
	}
	send(1)
	send(2)
	c, err := s2.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := c.Recv(time.Now()); err != nil || p.Msg.ConvSeq != 1 {
		t.Fatalf("first: %+v %v", p, err)
	}
	c.Close() // seq 2 was caught up, never handed out
	send(3)
	if c, err = s2.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := recvAll(c); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("after reconnect: %v", got)
	}
}
