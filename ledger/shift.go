package ledger

import "time"

// Shift moves every time of the record by d: a record's times are offsets
// from its shard's start, and ledgers of several generators (segments of
// one run) are judged together on one time base, the earliest start. Every
// record kind with a time field is shifted here; a test holds each
// time.Duration field of Record to it.
func (r *Record) Shift(d time.Duration) {
	if d == 0 {
		return
	}
	switch r.Kind {
	case KindAttempt:
		r.Attempt.Intended += d
		r.Attempt.Started += d
		r.Attempt.Ended += d
	case KindDelivery:
		r.Delivery.At += d
	case KindCursor:
		r.Cursor.At += d
	case KindProbe:
		r.Probe.At += d
	}
}
