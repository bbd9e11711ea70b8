package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestEmbeddedMongoPprof: with IMLAB_MONGO_PPROF the embedded-mongo child
// serves pprof on that loopback address beside FerretDB and stops with it;
// a non-loopback address is refused before FerretDB starts.
func TestEmbeddedMongoPprof(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr := freeLoopbackAddr(t)
	cmd := exec.Command(exe, "embedded-mongo", t.TempDir())
	cmd.Env = append(os.Environ(), envMongoPprof+"="+addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l := <-line:
		if !strings.HasPrefix(l, "mongodb://") {
			t.Fatalf("first line %q", l)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no URI from the child")
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatalf("pprof of the child: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "embedded-mongo") {
		t.Fatalf("pprof cmdline: %d %q", resp.StatusCode, body)
	}
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("child exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("child did not stop at stdin EOF")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("pprof still listening after the child stopped")
	}

	bad := exec.Command(exe, "embedded-mongo", t.TempDir())
	bad.Env = append(os.Environ(), envMongoPprof+"=0.0.0.0:0")
	msg, err := bad.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), envMongoPprof) || strings.Contains(string(msg), "mongodb://") {
		t.Fatalf("non-loopback pprof address: err %v, output %q", err, msg)
	}
}
