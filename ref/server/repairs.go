package server

import (
	"context"
	"strconv"
	"sync"

	"imlab/ref/model"
)

// RepairsPath is where every process serves what its reconciler repaired:
// the lab reads it to report repairs as findings of the pipeline.
const RepairsPath = "/v1/lab/repairs"

// MaxRepairsListed bounds the msg_ids a process remembers (and RepairsPath
// lists); the counts go on past it.
const MaxRepairsListed = 10_000

// Repairs is RepairsPath's answer: the inbox rows this process's forward
// reconciliation wrote since it started (the pipeline had lost them).
type Repairs struct {
	// Rows is every repaired inbox row; MsgIDs the distinct messages, in
	// the order they were first repaired, at most MaxRepairsListed
	// (Truncated says more were repaired). MsgIDsStr is MsgIDs as strings
	// of the same digits, in the same order: a msg_id passes 2^53, which a
	// client whose numbers are doubles cannot hold as a number.
	Rows      uint64   `json:"rows"`
	MsgIDs    []uint64 `json:"msg_ids"`
	MsgIDsStr []string `json:"msg_ids_str"`
	Truncated bool     `json:"truncated,omitempty"`
}

// repairLog is the reconciler's commit hook that remembers what it
// repaired (bounded). It is safe for concurrent use.
type repairLog struct {
	mu   sync.Mutex
	seen map[uint64]bool
	r    Repairs
}

// Committed implements send.CommitHook for the reconciler's writes.
func (l *repairLog) Committed(_ context.Context, entries []model.InboxEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[uint64]bool{}
	}
	for _, e := range entries {
		l.r.Rows++
		if l.seen[e.MsgID] {
			continue
		}
		if len(l.r.MsgIDs) >= MaxRepairsListed {
			l.r.Truncated = true
			continue
		}
		l.seen[e.MsgID] = true
		l.r.MsgIDs = append(l.r.MsgIDs, e.MsgID)
	}
}

// snapshot copies the log.
func (l *repairLog) snapshot() Repairs {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.r
	r.MsgIDs = append([]uint64{}, l.r.MsgIDs...)
	r.MsgIDsStr = make([]string, len(r.MsgIDs))
	for i, id := range r.MsgIDs {
		r.MsgIDsStr[i] = strconv.FormatUint(id, 10)
	}
	return r
}

// Repairs is what this process's reconciler repaired since it started.
func (p *Process) Repairs() Repairs { return p.repairs.snapshot() }

func (p *Process) repairsAnswer(context.Context) (any, error) { return p.Repairs(), nil }
