package chaos

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestProxyFixedListen: a proxy named in listens listens exactly there and
// carries bytes to its upstream; down refuses on that address; bad listen
// input is refused and leaves nothing listening.
func TestProxyFixedListen(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := free.Addr().String()
	free.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, bad := range []map[string]string{{"db": "10.1.2.3:5432"}, {"other": listen}, {"db": "nohost"}} {
		if p, err := StartProxiesOn(ctx, map[string]string{"db": up.Addr().String()}, bad); err == nil {
			p.Close()
			t.Fatalf("listens %v: accepted", bad)
		}
	}
	p, err := StartProxiesOn(ctx, map[string]string{"db": up.Addr().String()}, map[string]string{"db": listen})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if a, err := p.Addr("db"); err != nil || a != listen {
		t.Fatalf("addr %q %v, want %q", a, err, listen)
	}
	c, err := net.DialTimeout("tcp", listen, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("echo %q %v", b, err)
	}
	c.Close()
	if err := p.SetDown(ctx, "db", true); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", listen, time.Second); err == nil {
		c.Close()
		t.Fatal("down proxy still accepts on its fixed address")
	} else if !strings.Contains(err.Error(), "refused") {
		t.Logf("dial while down: %v", err)
	}
}
