package wspoll

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Opcodes of RFC 6455.
const (
	opCont   = 0
	opText   = 1
	opBinary = 2
	opClose  = 8
	opPing   = 9
	opPong   = 10
)

// ErrProtocol is a frame the server must not send.
var ErrProtocol = errors.New("wspoll: protocol error")

// CloseError is the close frame that ended a connection.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("wspoll: closed by the server (%d %s)", e.Code, e.Reason)
}

// header is one frame's head.
type header struct {
	fin bool
	op  byte
	n   int // payload length
	hl  int // header length
}

// parseHeader reads a server frame's head from b; ok false when b does not
// hold all of it yet. A frame longer than limit, a masked frame, reserved
// bits, or a control frame that is fragmented or longer than 125 bytes is
// a protocol error.
func parseHeader(b []byte, limit int) (h header, ok bool, err error) {
	if len(b) < 2 {
		return h, false, nil
	}
	h.fin, h.op = b[0]&0x80 != 0, b[0]&0x0f
	if b[0]&0x70 != 0 {
		return h, false, fmt.Errorf("%w: reserved bits set", ErrProtocol)
	}
	if b[1]&0x80 != 0 {
		return h, false, fmt.Errorf("%w: masked server frame", ErrProtocol)
	}
	n, hl := uint64(b[1]&0x7f), 2
	switch n {
	case 126:
		if len(b) < 4 {
			return h, false, nil
		}
		n, hl = uint64(binary.BigEndian.Uint16(b[2:])), 4
	case 127:
		if len(b) < 10 {
			return h, false, nil
		}
		n, hl = binary.BigEndian.Uint64(b[2:]), 10
	}
	if n > uint64(limit) {
		return h, false, fmt.Errorf("%w: frame of %d bytes over the limit %d", ErrProtocol, n, limit)
	}
	h.n, h.hl = int(n), hl
	if h.op >= opClose && (!h.fin || h.n > 125) {
		return h, false, fmt.Errorf("%w: control frame fragmented or over 125 bytes", ErrProtocol)
	}
	return h, true, nil
}

// appendFrame appends a masked client frame of op carrying p, masked with
// key.
func appendFrame(dst []byte, op byte, p []byte, key uint32) []byte {
	dst = append(dst, 0x80|op)
	switch n := len(p); {
	case n < 126:
		dst = append(dst, 0x80|byte(n))
	case n <= 0xffff:
		dst = append(dst, 0x80|126)
		dst = binary.BigEndian.AppendUint16(dst, uint16(n))
	default:
		dst = append(dst, 0x80|127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	dst = binary.BigEndian.AppendUint32(dst, key)
	var k [4]byte
	binary.BigEndian.PutUint32(k[:], key)
	start := len(dst)
	dst = append(dst, p...)
	for i := range p {
		dst[start+i] ^= k[i&3]
	}
	return dst
}

// reader is a connection's parsing state: the bytes read and not yet a
// whole frame, and a fragmented message being reassembled.
type reader struct {
	buf   []byte
	msg   []byte
	frag  bool // a fragmented message is open
	limit int
}

// event is what one frame asks of the connection.
type event struct {
	op      byte   // opText / opBinary (a whole message), opClose, opPing, opPong
	payload []byte // valid until the next call of next
}

// next returns the next whole event in r.buf; ok false when more bytes are
// needed. It consumes what it returns (compact moves the rest to the
// front).
func (r *reader) next(off *int) (ev event, ok bool, err error) {
	for {
		b := r.buf[*off:]
		h, ok, err := parseHeader(b, r.limit)
		if err != nil || !ok || len(b) < h.hl+h.n {
			return ev, false, err
		}
		p := b[h.hl : h.hl+h.n]
		*off += h.hl + h.n
		switch {
		case h.op >= opClose:
			return event{op: h.op, payload: p}, true, nil
		case h.op == opCont:
			if !r.frag {
				return ev, false, fmt.Errorf("%w: continuation without a message", ErrProtocol)
			}
			if len(r.msg)+len(p) > r.limit {
				return ev, false, fmt.Errorf("%w: message over the limit %d", ErrProtocol, r.limit)
			}
			r.msg = append(r.msg, p...)
			if h.fin {
				r.frag = false
				return event{op: opText, payload: r.msg}, true, nil
			}
		case h.op == opText || h.op == opBinary:
			if r.frag {
				return ev, false, fmt.Errorf("%w: new message inside a fragmented one", ErrProtocol)
			}
			if h.fin {
				return event{op: h.op, payload: p}, true, nil
			}
			r.frag, r.msg = true, append(r.msg[:0], p...)
		default:
			return ev, false, fmt.Errorf("%w: opcode %d", ErrProtocol, h.op)
		}
	}
}

// compact drops the first off bytes of r.buf.
func (r *reader) compact(off int) {
	r.buf = r.buf[:copy(r.buf, r.buf[off:])]
	if cap(r.msg) > maxKept && !r.frag {
		r.msg = nil
	}
}

// maxKept bounds the reassembly buffer a connection keeps between
// messages.
const maxKept = 64 << 10

// closeFrame reads a close frame's payload.
func closeFrame(p []byte) *CloseError {
	e := &CloseError{Code: 1005}
	if len(p) >= 2 {
		e.Code = int(binary.BigEndian.Uint16(p))
		e.Reason = string(p[2:])
	}
	return e
}
