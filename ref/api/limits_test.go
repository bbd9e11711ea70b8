package api

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawGet sends one GET with the given request target and headers over a
// fresh TCP connection and reads the answer.
func rawGet(t *testing.T, h *harness, target string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	addr := strings.TrimPrefix(h.url, "http://")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET " + target + " HTTP/1.1\r\nHost: " + addr + "\r\n"
	for _, hd := range headers {
		req += hd + "\r\n"
	}
	req += "\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatalf("write: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no HTTP answer to a %d-byte request: %v", len(req), err)
	}
	defer resp.Body.Close()
	var body []byte
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		body = append(body, buf[:n]...)
		if err != nil {
			break
		}
	}
	return resp, body
}

// TestOversizedRequestLineAndHeaders: a request line or header block
// larger than the server's read buffer is answered 414 / 431 with the JSON
// error body, as every other limit is, never a dropped connection.
func TestOversizedRequestLineAndHeaders(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.token(1, "phone")
	cases := []struct {
		name    string
		target  string
		headers []string
		status  int
	}{
		{"18 KB query string", "/v1/sync/pull?limit=10&x=" + strings.Repeat("a", 18<<10), []string{"Authorization: Bearer " + tok}, 414},
		{"10 KB query string (fits the buffer)", "/v1/sync/pull?limit=10&x=" + strings.Repeat("a", 10<<10), []string{"Authorization: Bearer " + tok}, 414},
		{"18 KB header", "/v1/sync/pull?limit=10", []string{"Authorization: Bearer " + tok, "X-Pad: " + strings.Repeat("b", 18<<10)}, 431},
	}
	for _, c := range cases {
		resp, body := rawGet(t, h, c.target, c.headers...)
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d %s, want %d", c.name, resp.StatusCode, body, c.status)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: content type %q", c.name, ct)
		}
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "too_large" || e.Error.Message == "" {
			t.Errorf("%s: body %q (%v), want a too_large JSON error", c.name, body, err)
		}
	}
	if calls := h.pull.snapshot(); len(calls) != 0 {
		t.Fatalf("puller called by oversized requests: %+v", calls)
	}
	// Through an ordinary client as well (which writes the request whole).
	for i := 0; i < 5; i++ {
		resp, err := h.client.Get(h.url + "/v1/sync/pull?limit=10&x=" + strings.Repeat("a", 18<<10))
		if err != nil {
			t.Fatalf("no HTTP answer to an 18 KB query string: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 414 {
			t.Fatalf("18 KB query string: status %d", resp.StatusCode)
		}
	}
	// The server still serves.
	if a := h.do("GET", "/v1/sync/pull?limit=10", tok, nil); a.status != 200 {
		t.Fatalf("after the oversized requests: %d %s", a.status, a.body)
	}
}

// TestEarlyAnswerIsReadable: a client still writing its request when the
// server answers it early (a request target longer than the read buffer,
// as a fuzzer under load sends it in pieces) still reads the answer: the
// server does not close with the rest of the request unread, which makes
// its kernel reset the connection and the client lose the answer that was
// already on its way.
func TestEarlyAnswerIsReadable(t *testing.T) {
	h := newHarness(t, nil)
	addr := strings.TrimPrefix(h.url, "http://")
	target := "/v1/sync/pull?limit=10&x=" + strings.Repeat("%E4%B8%AD", 4<<10) // 36 KB of percent-encoded UTF-8
	req := "GET " + target + " HTTP/1.1\r\nHost: " + addr + "\r\n\r\n"
	for i := range 3 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		// The first part fills the server's read buffer: it answers 414
		// and is done with the connection while the rest is on its way.
		first := MaxHeaderBytes + 2048
		if _, err := c.Write([]byte(req[:first])); err != nil {
			t.Fatalf("write: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
		// A client writes its whole request before it reads (curl, most
		// HTTP libraries): a write that fails because the server reset
		// the connection is a client that never sees the answer.
		for rest := req[first:]; rest != ""; {
			n := min(len(rest), 4096)
			if _, err := c.Write([]byte(rest[:n])); err != nil {
				c.Close()
				t.Fatalf("try %d: writing the rest of the request after the early answer: %v (the server reset the connection)", i+1, err)
			}
			rest = rest[n:]
			time.Sleep(20 * time.Millisecond)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			c.Close()
			t.Fatalf("try %d: no HTTP answer to a request still being written: %v", i+1, err)
		}
		resp.Body.Close()
		c.Close()
		if resp.StatusCode != 414 {
			t.Fatalf("try %d: status %d, want 414", i+1, resp.StatusCode)
		}
	}
	if a := h.do("GET", "/v1/sync/pull?limit=10", h.token(1, "phone"), nil); a.status != 200 {
		t.Fatalf("after the early answers: %d %s", a.status, a.body)
	}
}
