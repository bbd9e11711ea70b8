package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"imlab/targets/ref/client"
)

// WS.Read reads each frame whole into a buffer it reuses: frames of every
// size, one after the other, come out as written, and a read past the
// deadline ends with an error.
func TestWSReadFramesInOrder(t *testing.T) {
	big := strings.Repeat("b", 100<<10)
	frames := []string{
		`{"type":"msg","prev_seq":4,"seq":5,"msg_id":50,"conv_id":7,"conv_seq":2,"content":"hello"}`,
		`{"type":"msg","prev_seq":5,"seq":6,"msg_id":60,"content":"` + big + `"}`,
		`{"type":"msg","prev_seq":6,"seq":7,"msg_id":70,"content":"x"}`,
		`{"type":"close","reason":"slow"}`,
	}
	up := websocket.Upgrader{}
	hold := make(chan struct{})
	defer close(hold)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for _, f := range frames {
			if c.WriteMessage(websocket.TextMessage, []byte(f)) != nil {
				return
			}
		}
		<-hold // then nothing more: the client's read times out
	}))
	defer srv.Close()
	ws := dialWS(t, srv.URL, client.DefaultConfig().Timeout)
	want := []struct {
		typ       string
		prev, seq uint64
		content   string
	}{{"msg", 4, 5, "hello"}, {"msg", 5, 6, big}, {"msg", 6, 7, "x"}, {"close", 0, 0, ""}}
	var got []client.Frame
	for range want {
		f, err := ws.Read(time.Time{})
		if err != nil {
			t.Fatalf("frame %d: %v", len(got), err)
		}
		got = append(got, f)
	}
	for i, w := range want {
		f := got[i]
		if f.Type != w.typ || f.PrevSeq != w.prev || f.Seq != w.seq || f.Content != w.content {
			t.Fatalf("frame %d: type %q prev %d seq %d content %d bytes, want %q %d %d %d bytes", i, f.Type, f.PrevSeq, f.Seq, len(f.Content), w.typ, w.prev, w.seq, len(w.content))
		}
	}
	if got[0].MsgID != 50 || got[0].ConvID != 7 || got[0].ConvSeq != 2 || got[3].Reason != "slow" {
		t.Fatalf("frames 0 and 3: %+v %+v", got[0], got[3])
	}
	start := time.Now()
	if _, err := ws.Read(time.Now().Add(50 * time.Millisecond)); err == nil {
		t.Fatal("a read with nothing to read returned no error past its deadline")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the read past its deadline took %s", d)
	}
}

// A write to a peer that stops reading ends with an error within the
// client's Timeout (each frame's write deadline), and writes before the
// buffers fill go through.
func TestWSWriteToAStalledPeerEnds(t *testing.T) {
	up := websocket.Upgrader{}
	hold := make(chan struct{})
	defer close(hold)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		<-hold // never reads
	}))
	defer srv.Close()
	timeout := 400 * time.Millisecond
	ws := dialWS(t, srv.URL, timeout)
	req := &client.SendReq{ClientMsgID: "c1", ConvType: 1, ToUID: 2, Content: strings.Repeat("x", 256<<10)}
	start := time.Now()
	var sent int
	var err error
	for ; sent < 10_000; sent++ {
		t0 := time.Now()
		if err = ws.Send(req); err != nil {
			if d := time.Since(t0); d > timeout+200*time.Millisecond {
				t.Fatalf("the blocked write ended after %v, want within the timeout %v", d, timeout)
			}
			break
		}
	}
	if err == nil {
		t.Fatalf("%d frames of 256 KiB to a peer that never reads all went through in %v", sent, time.Since(start))
	}
	if sent == 0 {
		t.Fatalf("the first write failed: %v", err)
	}
	t.Logf("%d frames went through, then: %v", sent, err)
}

// dialWS opens a WebSocket with token "tok" to the server at url through a
// client with the given timeout; the test's end closes both.
func dialWS(t *testing.T, url string, timeout time.Duration) *client.WS {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Target, cfg.Secret, cfg.Timeout = url, secret, timeout
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ws, err := c.DialWS(context.Background(), "tok")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}
