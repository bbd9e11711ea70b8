package ledger

import (
	"errors"
	"fmt"
	"time"
)

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

// ReadHeader reads only the header of a shard file.
func ReadHeader(path string) (Header, error) {
	var h Header
	info, err := ReadFile(path, func(*Record) error { return errStopAfterHeader })
	if err != nil && !errors.Is(err, errStopAfterHeader) {
		return h, err
	}
	if info.Header.RunID == "" && info.Header.StartUnixNano == 0 {
		return h, fmt.Errorf("%w: %s: empty header", ErrCorrupt, path)
	}
	return info.Header, nil
}

// errStopAfterHeader ends ReadFile at the first record.
var errStopAfterHeader = errors.New("ledger: stop after the header")
