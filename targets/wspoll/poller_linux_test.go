//go:build linux

package wspoll

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// rawServer accepts WebSockets on loopback and runs script on each
// upgraded connection; first is written in the same write as the 101.
type rawServer struct {
	ln    net.Listener
	first []byte
	wg    sync.WaitGroup
}

func newRawServer(t *testing.T, first []byte, script func(c net.Conn, br *bufio.Reader)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, first: first}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + acceptGUID))
				resp := fmt.Sprintf("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
					base64.StdEncoding.EncodeToString(sum[:]))
				if _, err := c.Write(append([]byte(resp), s.first...)); err != nil {
					return
				}
				script(c, br)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *rawServer) url() string { return "ws://" + s.ln.Addr().String() + "/v1/ws" }

// record is a Handler that keeps what it is given.
type record struct {
	mu    sync.Mutex
	msgs  []string
	ended chan error
}

func newRecord() *record { return &record{ended: make(chan error, 1)} }

func (r *record) Message(b []byte) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, string(b))
	r.mu.Unlock()
	return nil
}

func (r *record) Ended(err error) { r.ended <- err }

func (r *record) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

func runPoller(t *testing.T) (*Poller, context.CancelFunc, <-chan error) {
	t.Helper()
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, stopped := make(chan error, 1), make(chan struct{})
	go func() { defer close(stopped); done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
	return p, cancel, done
}

// readClientFrame reads one masked client frame (payload < 126 bytes).
func readClientFrame(br *bufio.Reader) (byte, []byte, error) {
	var h [6]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return 0, nil, err
	}
	p := make([]byte, h[1]&0x7f)
	if _, err := io.ReadFull(br, p); err != nil {
		return 0, nil, err
	}
	for i := range p {
		p[i] ^= h[2+i&3]
	}
	return h[0] & 0x0f, p, nil
}

func TestPollerReadsInOrderAndCloses(t *testing.T) {
	first := append(serverFrame(true, opText, []byte("m1")), serverFrame(true, opText, []byte("m2"))...)
	acks := make(chan string, 4)
	srv := newRawServer(t, first, func(c net.Conn, br *bufio.Reader) {
		// A frame split over two writes, a ping, then the client's text and
		// pong are read back, then a close.
		f := serverFrame(true, opText, bytes.Repeat([]byte("3"), 200))
		c.Write(f[:3])
		time.Sleep(20 * time.Millisecond)
		c.Write(append(f[3:], serverFrame(true, opPing, []byte("hi"))...))
		for range 2 {
			op, p, err := readClientFrame(br)
			if err != nil {
				return
			}
			acks <- fmt.Sprintf("%d:%s", op, p)
		}
		c.Write(serverFrame(true, opClose, []byte{0x03, 0xe8}))
		io.Copy(io.Discard, br)
	})
	p, _, _ := runPoller(t)
	rec := newRecord()
	c, err := p.Dial(context.Background(), srv.url(), http.Header{"Authorization": {"Bearer x"}}, 2*time.Second, rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteText([]byte(`{"type":"ack"}`)); err != nil {
		t.Fatal(err)
	}
	var err2 error
	select {
	case err2 = <-rec.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("no end")
	}
	var ce *CloseError
	if !errors.As(err2, &ce) || ce.Code != 1000 {
		t.Fatalf("ended with %v, want the server's close 1000", err2)
	}
	got := rec.got()
	if len(got) != 3 || got[0] != "m1" || got[1] != "m2" || len(got[2]) != 200 {
		t.Fatalf("messages %q", got)
	}
	a1, a2 := <-acks, <-acks
	if !(a1 == `1:{"type":"ack"}` && a2 == "10:hi") && !(a2 == `1:{"type":"ack"}` && a1 == "10:hi") {
		t.Fatalf("server read %q, %q", a1, a2)
	}
	if err := c.WriteText([]byte("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after the end: %v", err)
	}
}

func TestPollerCloseAndStop(t *testing.T) {
	// Each connection gets one message, then nothing until the client ends it.
	srv := newRawServer(t, serverFrame(true, opText, []byte("hello")), func(c net.Conn, br *bufio.Reader) { io.Copy(io.Discard, br) })
	p, cancel, done := runPoller(t)
	const n = 20
	recs := make([]*record, n)
	conns := make([]*Conn, n)
	for i := range recs {
		recs[i] = newRecord()
		c, err := p.Dial(context.Background(), srv.url(), nil, 2*time.Second, recs[i])
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	// Close ends one connection with ErrClosed.
	conns[0].Close()
	if err := <-recs[0].ended; !errors.Is(err, ErrClosed) {
		t.Fatalf("closed connection ended with %v", err)
	}
	// The context ends the poller: Run returns, every other connection ends
	// with ErrStopped, and no connection is taken after.
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	for i := 1; i < n; i++ {
		if err := <-recs[i].ended; !errors.Is(err, ErrStopped) {
			t.Fatalf("connection %d ended with %v", i, err)
		}
		if got := recs[i].got(); len(got) != 1 || got[0] != "hello" {
			t.Fatalf("connection %d got %q", i, got)
		}
	}
	if _, err := p.Dial(context.Background(), srv.url(), nil, time.Second, newRecord()); !errors.Is(err, ErrStopped) {
		t.Fatalf("dial after the stop: %v", err)
	}
}

func TestDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		http.ReadRequest(bufio.NewReader(c))
		c.Write([]byte("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"))
	}()
	p, _, _ := runPoller(t)
	_, err = p.Dial(context.Background(), "ws://"+ln.Addr().String()+"/v1/ws", nil, time.Second, newRecord())
	var he *HandshakeError
	if !errors.As(err, &he) || he.Status != 401 {
		t.Fatalf("dial: %v, want a handshake error with status 401", err)
	}
}
