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

// TickOf reads the send's tick from a client tag: the lab's client
// message ids are RUNID-TICK (loadgen), so the tick is the number after
// the tag's last '-'; 0 for a tag of another run, or none.
func (c Config) TickOf(tag string) uint64 {
	if c.TagPrefix == "" {
		return 0
	}
	rest, ok := strings.CutPrefix(tag, c.TagPrefix)
	if !ok {
		return 0
	}
	i := strings.LastIndexByte(rest, '-')
	t, err := strconv.ParseUint(rest[i+1:], 10, 64)
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
