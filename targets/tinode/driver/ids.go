package driver

import (
	"fmt"
	"strconv"
	"strings"
)

// MsgID names message seq of conversation conv (see the package doc).
func MsgID(conv uint64, seq int64) uint64 { return conv<<24 | uint64(seq) }

// SplitMsgID is MsgID's inverse.
func SplitMsgID(id uint64) (conv uint64, seq int64) { return id >> 24, int64(id & MaxSeq) }

// Tag is the client tag of send tick in this run, put in the message head.
func (c Config) Tag(tick uint64) string { return c.RunHash + ":" + strconv.FormatUint(tick, 10) }

// TickOf reads a tag written by Tag: the send's tick, or 0 for a tag of
// another run or none.
func (c Config) TickOf(tag string) uint64 {
	rest, ok := strings.CutPrefix(tag, c.RunHash+":")
	if !ok {
		return 0
	}
	t, err := strconv.ParseUint(rest, 10, 64)
	if err != nil {
		return 0
	}
	return t
}

// checkSeq refuses a seq a msg_id cannot hold.
func checkSeq(topic string, seq int64) error {
	if seq < 1 || seq > MaxSeq {
		return fmt.Errorf("%w: topic %s seq %d outside 1..%d (MaxSeq)", ErrInvalid, topic, seq, MaxSeq)
	}
	return nil
}
