package chaos

import (
	"errors"
	"net"
	"testing"
)

func TestAdvertiser(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var a Advertiser
	wl := a.Wrap(ln)
	if got, want := wl.Addr().String(), ln.Addr().String(); got != want {
		t.Fatalf("before Set: Addr %s, want the listener's own %s", got, want)
	}
	if err := a.Set("127.0.0.1:4242"); err != nil {
		t.Fatal(err)
	}
	if got := wl.Addr().String(); got != "127.0.0.1:4242" {
		t.Fatalf("after Set: Addr %s, want 127.0.0.1:4242", got)
	}
	if err := a.Set("192.0.2.1:9092"); !errors.Is(err, ErrNotLoopback) {
		t.Fatalf("non-loopback address: %v, want ErrNotLoopback", err)
	}
	if err := a.Set("127.0.0.1"); err == nil {
		t.Fatal("an address without a port was accepted")
	}
	if got := wl.Addr().String(); got != "127.0.0.1:4242" {
		t.Fatalf("a refused Set changed the advertised address to %s", got)
	}
	// Accept still serves the real listener.
	done := make(chan error, 1)
	go func() {
		c, err := wl.Accept()
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
