package loadgen

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"imlab/targets/ref/noop"
)

// envNoopChild makes the test binary a no-op endpoint (see startNoopProcess).
const envNoopChild = "IMLAB_LOADGEN_NOOP_CHILD"

// envSlowChild makes the test binary a send endpoint that answers at most
// this many requests per second (see startSlowProcess).
const envSlowChild = "IMLAB_LOADGEN_SLOW_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envNoopChild) == "1" {
		os.Exit(noopChild())
	}
	if r := os.Getenv(envSlowChild); r != "" {
		os.Exit(slowChild(r))
	}
	os.Exit(m.Run())
}

// noopChild serves the no-op endpoint on a loopback port, prints its URL on
// stdout and stops when stdin closes (the parent ended or closed it).
func noopChild() int {
	srv, err := noop.Start("127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(srv.URL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
	return 0
}

// slowChild serves a send ACK to every request, at most rate per second
// in all (a request waits for its slot: a server that queues), on a
// loopback port, prints its URL and stops when stdin closes.
func slowChild(rate string) int {
	perSec, err := strconv.Atoi(rate)
	if err != nil || perSec < 1 {
		fmt.Fprintln(os.Stderr, "bad rate", rate)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex
	next := time.Now()
	gap := time.Second / time.Duration(perSec)
	body := []byte(noop.Body)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		now := time.Now()
		if next.Before(now) {
			next = now
		}
		next = next.Add(gap)
		at := next
		mu.Unlock()
		time.Sleep(time.Until(at))
		ctx.SetContentType("application/json")
		ctx.SetBody(body)
	}, NoDefaultDate: true}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println("http://" + ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Shutdown()
	return 0
}

// startSlowProcess runs slowChild at perSec in a child process (this test
// binary again) and returns its URL; the child stops with tb.
func startSlowProcess(tb testing.TB, perSec int) string {
	return startChildProcess(tb, envSlowChild+"="+strconv.Itoa(perSec))
}

// startNoopProcess runs the no-op endpoint in a child process (this test
// binary again) and returns its URL; the child stops with tb.
func startNoopProcess(tb testing.TB) string {
	return startChildProcess(tb, envNoopChild+"=1")
}

// startChildProcess runs this test binary with env set, reads the URL it
// prints and stops it with tb.
func startChildProcess(tb testing.TB, env string) string {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("no-op child: %v", err)
	}
	return strings.TrimSpace(line)
}
