package ledger

import (
	"encoding/binary"
	"time"
)

// KindContact (extended) is a device's first contact with the target: the
// answer to a request the target makes a device known by (the generator's
// registering pull before the load starts). A reader that does not know
// it skips it; a ledger without it says nothing of when a device became
// known beyond what its other records show (a delivery, an accepted
// acknowledgement).
const KindContact Kind = 17

// Contact says device Dev had an answer from the target at At (an offset
// from the shard's start; before the start, negative, when it came at
// the warm-up): the target has heard of the device since then at the
// latest.
type Contact struct {
	Dev uint32
	At  time.Duration
}

// Contact appends a device's first contact (an extended record).
func (s *Shard) Contact(c Contact) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p []byte
	p = binary.AppendUvarint(p, uint64(c.Dev))
	p = binary.AppendUvarint(p, zz(c.At.Microseconds()))
	s.ext(KindContact, p)
}

// contact decodes a KindContact payload.
func (r *Record) contact(p *payload) {
	r.Kind = KindContact
	r.Contact = Contact{Dev: uint32(p.u()), At: time.Duration(unzz(p.u())) * time.Microsecond}
}
