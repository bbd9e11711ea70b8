// Package msgid makes 64-bit message ids that are ordered by time and unique
// across processes that use distinct node numbers: 41 bits of milliseconds
// since Epoch, 10 bits of node, 12 bits of a per-millisecond sequence.
//
// It owns only the generator's in-memory state. It must not do I/O: the node
// number is chosen by whoever wires the process.
//
// A generator never hands out the same id twice: when the wall clock steps
// back it waits until the clock passes the last millisecond it used, and when
// 4096 ids were taken within one millisecond it waits for the next one.
package msgid

import (
	"fmt"
	"sync"
	"time"
)

// Layout of an id, most significant bits first.
const (
	TimeBits = 41
	NodeBits = 10
	SeqBits  = 12

	// MaxNode is the largest node number.
	MaxNode = 1<<NodeBits - 1
	maxSeq  = 1<<SeqBits - 1
	maxMs   = 1<<TimeBits - 1
)

// epochUnixMs is the zero of the id's millisecond field (2024-01-01T00:00:00Z).
const epochUnixMs = 1704067200000

// Epoch is the zero of the id's millisecond field (2024-01-01T00:00:00Z).
func Epoch() time.Time { return time.UnixMilli(epochUnixMs).UTC() }

// Clock is the time source; tests replace it to step the clock back.
type Clock interface {
	Now() time.Time
	Sleep(d time.Duration)
}

type wallClock struct{}

func (wallClock) Now() time.Time        { return time.Now() }
func (wallClock) Sleep(d time.Duration) { time.Sleep(d) }

// Generator hands out ids for one node. It is safe for concurrent use.
type Generator struct {
	node  uint64
	clock Clock

	mu     sync.Mutex
	lastMs int64
	seq    uint64
}

// New returns a generator for node (0..MaxNode) on the wall clock.
func New(node uint16) (*Generator, error) {
	return NewWithClock(node, wallClock{})
}

// NewWithClock returns a generator for node on the given clock.
func NewWithClock(node uint16, clock Clock) (*Generator, error) {
	if node > MaxNode {
		return nil, fmt.Errorf("msgid: node %d out of range 0..%d", node, MaxNode)
	}
	if clock == nil {
		return nil, fmt.Errorf("msgid: nil clock")
	}
	return &Generator{node: uint64(node), clock: clock, lastMs: -1}, nil
}

// Node is the generator's node number.
func (g *Generator) Node() uint16 { return uint16(g.node) }

func (g *Generator) nowMs() int64 {
	return g.clock.Now().UnixMilli() - epochUnixMs
}

// Next returns a new id, greater than every id this generator returned
// before. It may wait (clock stepped back, sequence exhausted) but never
// returns a duplicate.
func (g *Generator) Next() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		ms := g.nowMs()
		if ms < 0 {
			ms = 0
		}
		switch {
		case ms > g.lastMs:
			g.lastMs = ms
			g.seq = 0
		case ms == g.lastMs && g.seq < maxSeq:
			g.seq++
		default:
			// Clock behind the last used millisecond, or the sequence of
			// this millisecond is used up: wait for the clock to pass it.
			wait := time.Duration(g.lastMs-ms+1) * time.Millisecond
			if wait > 100*time.Millisecond {
				wait = 100 * time.Millisecond // re-read the clock at least every 100ms
			}
			g.clock.Sleep(wait)
			continue
		}
		return uint64(g.lastMs&maxMs)<<(NodeBits+SeqBits) | g.node<<SeqBits | g.seq
	}
}

// Time is the millisecond at which id was made.
func Time(id uint64) time.Time {
	return time.UnixMilli(epochUnixMs + int64(id>>(NodeBits+SeqBits))).UTC()
}

// NodeOf is the node that made id.
func NodeOf(id uint64) uint16 { return uint16(id >> SeqBits & MaxNode) }
