package retention

import (
	"sync"
	"time"
)

// MaxLogged bounds the deletions a Log keeps; its counts go on past it.
const MaxLogged = 100_000

// Log is a bounded Sink: the first MaxLogged deletions since the process
// started, the counts of all of them, and the passes. It is safe for
// concurrent use.
type Log struct {
	mu   sync.Mutex
	snap LogSnapshot
}

// LogSnapshot is a copy of a Log.
type LogSnapshot struct {
	// Rows are the deletions in the order they were committed, at most
	// MaxLogged (Truncated: more were deleted).
	Rows      []Deletion
	Truncated bool
	// Deleted counts every deletion, Expired and Pulled by reason.
	Deleted, Expired, Pulled uint64
	// Passes counts the completed passes, FailedPasses the others;
	// LastPass is when the last one (either) ended (zero: none yet).
	Passes, FailedPasses uint64
	LastPass             time.Time
	LastError            string
}

// Deleted implements Sink.
func (l *Log) Deleted(rows []Deletion) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range rows {
		l.snap.Deleted++
		if d.Reason == ReasonExpired {
			l.snap.Expired++
		} else {
			l.snap.Pulled++
		}
		if len(l.snap.Rows) >= MaxLogged {
			l.snap.Truncated = true
			continue
		}
		l.snap.Rows = append(l.snap.Rows, d)
	}
}

// Passed implements Sink.
func (l *Log) Passed(_ Report, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.snap.LastPass = time.Now().UTC()
	if err != nil {
		l.snap.FailedPasses++
		l.snap.LastError = err.Error()
		return
	}
	l.snap.Passes++
}

// Snapshot copies the log.
func (l *Log) Snapshot() LogSnapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.snap
	s.Rows = append([]Deletion(nil), l.snap.Rows...)
	return s
}
