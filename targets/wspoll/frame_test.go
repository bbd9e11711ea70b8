package wspoll

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// serverFrame is an unmasked frame as a server sends it.
func serverFrame(fin bool, op byte, p []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	switch n := len(p); {
	case n < 126:
		out = append(out, byte(n))
	case n <= 0xffff:
		out = append(out, 126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, 127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	return append(out, p...)
}

// feed gives r the stream in chunks of k bytes and collects the events.
func feed(t *testing.T, stream []byte, k int) []event {
	t.Helper()
	r := reader{limit: MessageLimit}
	var got []event
	for i := 0; i < len(stream); i += k {
		r.buf = append(r.buf, stream[i:min(i+k, len(stream))]...)
		off := 0
		for {
			ev, ok, err := r.next(&off)
			if err != nil {
				t.Fatalf("chunk %d: %v", k, err)
			}
			if !ok {
				break
			}
			got = append(got, event{op: ev.op, payload: bytes.Clone(ev.payload)})
		}
		r.compact(off)
	}
	if len(r.buf) != 0 {
		t.Fatalf("chunk %d: %d bytes left over", k, len(r.buf))
	}
	return got
}

func TestReaderSplitReads(t *testing.T) {
	long := []byte(strings.Repeat("x", 300))
	huge := []byte(strings.Repeat("y", 70000)) // a 64-bit length
	var stream []byte
	stream = append(stream, serverFrame(true, opText, []byte("a"))...)
	stream = append(stream, serverFrame(true, opText, long)...)
	stream = append(stream, serverFrame(false, opText, []byte("fr"))...)
	stream = append(stream, serverFrame(true, opPing, []byte("p"))...) // a control frame between fragments
	stream = append(stream, serverFrame(false, opCont, []byte("ag"))...)
	stream = append(stream, serverFrame(true, opCont, []byte("ment"))...)
	stream = append(stream, serverFrame(true, opText, huge)...)
	stream = append(stream, serverFrame(true, opText, nil)...)
	stream = append(stream, serverFrame(true, opClose, []byte{0x03, 0xe8, 'b', 'y', 'e'})...)
	want := []event{{opText, []byte("a")}, {opText, long}, {opPing, []byte("p")}, {opText, []byte("fragment")},
		{opText, huge}, {opText, nil}, {opClose, []byte{0x03, 0xe8, 'b', 'y', 'e'}}}
	for _, k := range []int{1, 2, 3, 7, 100, 4096, len(stream)} {
		got := feed(t, stream, k)
		if len(got) != len(want) {
			t.Fatalf("chunk %d: %d events, want %d", k, len(got), len(want))
		}
		for i := range want {
			if got[i].op != want[i].op || !bytes.Equal(got[i].payload, want[i].payload) {
				t.Fatalf("chunk %d: event %d is op %d (%d bytes), want op %d (%d bytes)", k, i, got[i].op, len(got[i].payload), want[i].op, len(want[i].payload))
			}
		}
	}
	if ce := closeFrame([]byte{0x03, 0xe8, 'b', 'y', 'e'}); ce.Code != 1000 || ce.Reason != "bye" {
		t.Fatalf("close frame read as %+v", ce)
	}
}

func TestReaderRefuses(t *testing.T) {
	masked := serverFrame(true, opText, []byte("a"))
	masked[1] |= 0x80
	long := make([]byte, 10)
	long[0], long[1] = 0x81, 127
	binary.BigEndian.PutUint64(long[2:], MessageLimit+1)
	for name, b := range map[string][]byte{
		"masked":              masked,
		"reserved bits":       {0xc1, 0},
		"long ping":           serverFrame(true, opPing, make([]byte, 126)),
		"fragmented close":    serverFrame(false, opClose, nil),
		"over the limit":      long,
		"lone continuation":   serverFrame(true, opCont, []byte("x")),
		"unknown opcode":      serverFrame(true, 3, nil),
		"message in fragment": append(serverFrame(false, opText, []byte("a")), serverFrame(true, opText, []byte("b"))...),
	} {
		r := reader{buf: b, limit: MessageLimit}
		off := 0
		_, _, err := r.next(&off)
		if !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want a protocol error", name, err)
		}
	}
}

func TestAppendFrameMasks(t *testing.T) {
	for _, n := range []int{0, 5, 125, 126, 300, 70000} {
		p := bytes.Repeat([]byte("z"), n)
		b := appendFrame(nil, opText, p, 0x01020304)
		if b[0] != 0x81 || b[1]&0x80 == 0 {
			t.Fatalf("%d bytes: head %x", n, b[:2])
		}
		// Unmask as a server would and read it back as a frame.
		hl := map[bool]int{true: 2, false: 4}[n < 126]
		if n > 0xffff {
			hl = 10
		}
		key := b[hl : hl+4]
		pl := bytes.Clone(b[hl+4:])
		for i := range pl {
			pl[i] ^= key[i&3]
		}
		if !bytes.Equal(pl, p) {
			t.Fatalf("%d bytes: payload does not unmask", n)
		}
	}
}
