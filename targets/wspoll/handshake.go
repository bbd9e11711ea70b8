package wspoll

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// HandshakeError is an upgrade the server refused; Status is its HTTP
// status (0 when no answer was read).
type HandshakeError struct {
	Status int
	Err    error
}

func (e *HandshakeError) Error() string { return fmt.Sprintf("wspoll: handshake: %v", e.Err) }
func (e *HandshakeError) Unwrap() error { return e.Err }

// acceptGUID is RFC 6455's key suffix.
const acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// handshake dials u (ws://host/path) and upgrades; it returns the TCP
// connection and the bytes read past the server's answer (the first
// frames, if the server sent any with it).
func handshake(ctx context.Context, u string, h http.Header, timeout time.Duration) (*net.TCPConn, []byte, error) {
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme != "ws" {
		return nil, nil, &HandshakeError{Err: fmt.Errorf("bad url %q (ws:// only)", u)}
	}
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", pu.Host)
	if err != nil {
		return nil, nil, &HandshakeError{Err: err}
	}
	tc := nc.(*net.TCPConn)
	rest, err := upgrade(tc, pu, h, timeout)
	if err != nil {
		tc.Close()
		return nil, nil, err
	}
	return tc, rest, nil
}

// upgrade writes the Upgrade request on tc and reads the answer.
func upgrade(tc *net.TCPConn, pu *url.URL, h http.Header, timeout time.Duration) ([]byte, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, &HandshakeError{Err: err}
	}
	key := base64.StdEncoding.EncodeToString(raw[:])
	if timeout > 0 {
		if err := tc.SetDeadline(time.Now().Add(timeout)); err != nil {
			return nil, &HandshakeError{Err: err}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n", pu.RequestURI(), pu.Host, key)
	if err := h.Write(&b); err != nil {
		return nil, &HandshakeError{Err: err}
	}
	b.WriteString("\r\n")
	if _, err := tc.Write([]byte(b.String())); err != nil {
		return nil, &HandshakeError{Err: err}
	}
	br := bufio.NewReaderSize(tc, 4096)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet, URL: pu})
	if err != nil {
		return nil, &HandshakeError{Err: err}
	}
	resp.Body.Close()
	sum := sha1.Sum([]byte(key + acceptGUID))
	switch {
	case resp.StatusCode != http.StatusSwitchingProtocols:
		return nil, &HandshakeError{Status: resp.StatusCode, Err: fmt.Errorf("bad status %s", resp.Status)}
	case !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket"):
		return nil, &HandshakeError{Status: resp.StatusCode, Err: errors.New("no Upgrade: websocket")}
	case resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]):
		return nil, &HandshakeError{Status: resp.StatusCode, Err: errors.New("bad Sec-WebSocket-Accept")}
	}
	if err := tc.SetDeadline(time.Time{}); err != nil {
		return nil, &HandshakeError{Err: err}
	}
	rest, _ := br.Peek(br.Buffered())
	return append([]byte(nil), rest...), nil
}
