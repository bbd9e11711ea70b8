package history

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/mongo"

	"imlab/ref/model"
)

// lockStripes is the number of per-document write locks (by hash of _id).
const lockStripes = 256

// docLock serializes this Store's writes to one document. MongoDB applies
// each update to a document atomically; FerretDB v1 does not: it reads the
// document, applies the operators in Go and replaces the row, with no
// compare, so two concurrent updates of one document can lose one of them
// (seen here: 38 of 150 slots lost by 6 racing writers). Holding a lock per
// document inside the process makes one process correct on FerretDB; it does
// not protect several processes writing the same bucket through FerretDB.
// Writes take it through write, never directly.
func (s *Store) docLock(id string) func() {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	m := &s.stripes[h.Sum32()%lockStripes]
	m.Lock()
	return m.Unlock
}

// write runs fn, the database calls of one write of document id, holding
// the document's lock until the database has answered them. A caller that
// gives up does not end them: FerretDB goes on with a command whose client
// went away, so a lock released at the caller's deadline would let the next
// writer read the version the abandoned update is about to replace, and one
// of the two updates would be lost (a revoke answered ok, stored unrevoked).
// fn therefore runs under a context the caller's cancellation does not
// reach, bounded by Config.WriteTimeout; its outcome, even past the caller's
// deadline, is what write returns. A write whose caller gave up before the
// lock was taken is not started.
//
// A call that had no answer within that bound (or lost its connection) may
// still be running inside the database: the document is unknown, and writes
// of it are refused (ErrUnavailable, retryable) for Config.UnknownHold, so
// that no writer reads it while the abandoned update may still replace it.
// The caller of the unanswered write gets its error.
func (s *Store) write(ctx context.Context, id string, fn func(ctx context.Context) error) error {
	defer s.docLock(id)()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: history: write of %s not started: %w", model.ErrUnavailable, id, err)
	}
	now := time.Now()
	if until, held := s.unknown.heldUntil(id, now); held {
		return fmt.Errorf("%w: history: %s is unknown (a write of it had no answer within %s); its writes resume in %s",
			model.ErrUnavailable, id, s.cfg.WriteTimeout, until.Sub(now).Round(time.Millisecond))
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.WriteTimeout)
	defer cancel()
	err := fn(wctx)
	if unanswered(err) {
		s.unknown.mark(id, time.Now().Add(s.cfg.UnknownHold))
	}
	return err
}

// unanswered reports whether err leaves a command's fate unknown: a
// timeout, a cancellation or a broken connection, rather than the server's
// answer.
func unanswered(err error) bool {
	if err == nil {
		return false
	}
	if mongo.IsTimeout(err) || errors.Is(err, context.Canceled) {
		return true
	}
	var le mongo.LabeledError
	return errors.As(err, &le) && le.HasErrorLabel("NetworkError")
}

// unknownDocs holds the documents whose last write had no answer, each
// until the end of its hold.
type unknownDocs struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (u *unknownDocs) mark(id string, until time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.until == nil {
		u.until = make(map[string]time.Time)
	}
	u.until[id] = until
}

// heldUntil reports whether id is held at now, and until when; a hold
// that has ended is forgotten.
func (u *unknownDocs) heldUntil(id string, now time.Time) (time.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.until[id]
	if !ok {
		return time.Time{}, false
	}
	if !now.Before(t) {
		delete(u.until, id)
		return time.Time{}, false
	}
	return t, true
}
