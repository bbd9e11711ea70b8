package ledger

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// This file holds a shard's header, what it states about the target, and
// the making of a run's shards.

// Header is the JSON header of a shard.
type Header struct {
	// Version of the format (0 in the file means 1: written before the
	// field existed).
	Version       int    `json:"version,omitempty"`
	RunID         string `json:"run_id"`
	Shard         int    `json:"shard"`
	StartUnixNano int64  `json:"start_unix_nano"`
	// Target says what the server under test offers (version 3; absent:
	// the reference contract, DefaultCapabilities).
	Target *Capabilities `json:"target,omitempty"`
}

// Capabilities say what a target offers, so that the checker makes the
// findings that have a meaning on it and names the others as not made.
type Capabilities struct {
	// Driver names the driver that talked to the target ("ref", "tinode").
	Driver string `json:"driver"`
	// Inbox: the target keeps a per-user inbox log (uid, seq) with a
	// sync pull and per-device cursors (the reference). Without it,
	// deliveries carry seq 0 and only the conversation (conv_id,
	// conv_seq) orders messages.
	Inbox bool `json:"inbox"`
	// IdempotentSend: a retried send (same client tag) is stored once.
	IdempotentSend bool `json:"idempotent_send"`
	// Actions the target offers (Action.String names: "conv-pull",
	// "history", "revoke", "delete", "clear", "read"), and "del-range" when
	// it keeps a delete log.
	Actions []string `json:"actions"`
}

// DelRangeCapability names a target's delete log in Capabilities.Actions.
// On such a target a delete is a range in the log, for everyone (a hard
// delete: the revoke) or for one user (a soft delete, a clear), and a
// message deleted for a user is absent from that user's history.
const DelRangeCapability = "del-range"

// ReadMarkCapability names, in Capabilities.Actions, a target that keeps
// one read mark per user and conversation (Tinode's {note what:"read"}):
// marking conv_seqs From..To read marks every conv_seq up to To.
const ReadMarkCapability = "read-mark"

// DefaultCapabilities are the reference server's: an inbox, idempotent
// send, every action, no delete log (physical deletes show in the history
// witness as purged slots).
func DefaultCapabilities() Capabilities {
	c := Capabilities{Driver: "ref", Inbox: true, IdempotentSend: true}
	for _, a := range Actions {
		c.Actions = append(c.Actions, a.String())
	}
	return c
}

// Offers says whether the target offers the named action or capability.
func (c Capabilities) Offers(name string) bool {
	for _, a := range c.Actions {
		if a == name {
			return true
		}
	}
	return false
}

// Create makes n shard files in dir (created if needed) for a run against
// the reference server. Existing ledger files are refused so a run never
// appends to another's.
func Create(dir, runID string, start time.Time, n int) (*Ledger, error) {
	return CreateWith(dir, Options{RunID: runID, Start: start, Shards: n})
}

// Options of CreateWith.
type Options struct {
	RunID  string
	Start  time.Time
	Shards int
	// Target is what the server under test offers (nil: the reference,
	// written as no target in the header).
	Target *Capabilities
}

// validate checks the capabilities a producer states.
func (c *Capabilities) validate() error {
	if c == nil {
		return nil
	}
	if c.Driver == "" {
		return fmt.Errorf("%w: target capabilities without a driver name", ErrInvalid)
	}
	for _, a := range c.Actions {
		known := a == DelRangeCapability || a == ReadMarkCapability
		for _, k := range Actions {
			known = known || a == k.String()
		}
		if !known {
			return fmt.Errorf("%w: target action %q is none of %v, %q or %q", ErrInvalid, a, Actions, DelRangeCapability, ReadMarkCapability)
		}
	}
	return nil
}

// CreateWith makes o.Shards shard files in dir (created if needed), their
// headers stating o.Target. Existing ledger files are refused so a run
// never appends to another's.
func CreateWith(dir string, o Options) (*Ledger, error) {
	n := o.Shards
	if n < 1 || n > MaxShards {
		return nil, fmt.Errorf("%w: shards %d must be in 1..%d", ErrInvalid, n, MaxShards)
	}
	if err := o.Target.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	l := &Ledger{dir: dir}
	for i := range n {
		f, err := os.OpenFile(ShardPath(dir, i), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("ledger: %w", err)
		}
		s := &Shard{f: f, bw: bufio.NewWriterSize(f, 256<<10), st: newState(), convs: map[uint64]uint64{}}
		hdr, err := json.Marshal(Header{Version: Version, RunID: o.RunID, Shard: i, StartUnixNano: o.Start.UnixNano(), Target: o.Target})
		if err != nil {
			f.Close()
			l.Close()
			return nil, fmt.Errorf("ledger: header: %w", err)
		}
		if len(hdr) > maxHeaderLen {
			f.Close()
			l.Close()
			return nil, fmt.Errorf("%w: header of %d bytes (max %d)", ErrInvalid, len(hdr), maxHeaderLen)
		}
		s.bw.WriteString(Magic)
		s.buf = binary.AppendUvarint(s.buf[:0], uint64(len(hdr)))
		s.bw.Write(s.buf)
		if _, err := s.bw.Write(hdr); err != nil {
			l.Close()
			return nil, fmt.Errorf("ledger: %w", err)
		}
		l.shards = append(l.shards, s)
	}
	return l, nil
}
