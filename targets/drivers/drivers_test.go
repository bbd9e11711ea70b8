package drivers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"imlab/targets"
	"imlab/targets/drivers"
	"imlab/targets/ref/noop"
)

const secret = "0123456789abcdef0123"

// The reference driver is chosen by ref+http:// and by plain http://, and
// its session sends through the contract (the no-op endpoint's fixed ACK,
// over HTTP and over a WebSocket sender); an unknown driver is refused by
// name.
func TestOpenRefDriverSends(t *testing.T) {
	srv, err := noop.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	for _, target := range []string{srv.URL(), "ref+" + srv.URL()} {
		drv, err := drivers.Open(targets.Config{Target: target, Secret: secret, Conns: 2, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if drv.Name() != "ref" || !drv.Capabilities().Inbox || !drv.Capabilities().IdempotentSend {
			t.Fatalf("%s: driver %s capabilities %+v", target, drv.Name(), drv.Capabilities())
		}
		if err := drv.Warm(ctx); err != nil {
			t.Fatal(err)
		}
		s, err := drv.Session(ctx, 1, "d0")
		if err != nil {
			t.Fatal(err)
		}
		req := &targets.SendReq{ClientMsgID: "c-1", ConvType: targets.ConvSingle, ToUID: 2, Content: "hi"}
		ack, err := s.Send(ctx, req)
		if err != nil || ack.MsgID != 1 || ack.ConvSeq != 1 {
			t.Fatalf("%s: send %+v %v", target, ack, err)
		}
		snd, err := s.DialSender(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ack, err = snd.Send(ctx, req, time.Second)
		if err != nil || ack.MsgID != 1 {
			t.Fatalf("%s: ws send %+v %v", target, ack, err)
		}
		snd.Close()
		if _, ok := drv.(targets.LabDriver); !ok {
			t.Fatal("the ref driver offers no lab view")
		}
		if _, ok := s.(targets.LabSession); !ok {
			t.Fatal("the ref session offers no lab reads")
		}
		drv.Close()
	}
	_, err = drivers.Open(targets.Config{Target: "nosuch+http://127.0.0.1:1", Secret: secret, Conns: 1, Timeout: time.Second})
	if !errors.Is(err, targets.ErrInvalid) || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Fatalf("unknown driver: %v", err)
	}
	if err := drivers.Check(targets.Config{Target: srv.URL(), Secret: "short", Conns: 1, Timeout: time.Second}); err == nil {
		t.Fatal("a short secret passed the reference driver's check")
	}
}

// A refusal the driver makes before sending is ErrInvalid, class Failed.
func TestRefDriverRefusesBadArguments(t *testing.T) {
	drv, err := drivers.Open(targets.Config{Target: "http://127.0.0.1:1", Secret: secret, Conns: 1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	s, err := drv.Session(context.Background(), 1, "d0")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ConvPull(context.Background(), targets.ConvPullOpts{ConvID: 1, Limit: 51})
	if !errors.Is(err, targets.ErrInvalid) || targets.Classify(err) != targets.Failed {
		t.Fatalf("conv pull limit 51: %v", err)
	}
	_, err = s.History(context.Background(), targets.HistoryOpts{ConvID: 1, From: 5, To: 4})
	if targets.Classify(err) != targets.Failed {
		t.Fatalf("history 5..4: %v", err)
	}
	// Nothing listens on port 1: no answer, outcome unknown.
	_, err = s.Send(context.Background(), &targets.SendReq{ClientMsgID: "c", ConvType: 1, ToUID: 2, Content: "x"})
	if targets.Classify(err) != targets.Unknown || targets.StatusOf(err) != 0 {
		t.Fatalf("send to a closed port: %v (class %s)", err, targets.Classify(err))
	}
}

// TestHTTP: the reference server's schemes are HTTP targets; another
// driver's, or no URL, are not.
func TestHTTP(t *testing.T) {
	for target, want := range map[string]bool{"http://127.0.0.1:8080": true, "ref+http://h:1": true, "https://h": true, "tinode+ws://h:1": false, "::": false} {
		if drivers.HTTP(target) != want {
			t.Errorf("HTTP(%q) = %v", target, !want)
		}
	}
}
