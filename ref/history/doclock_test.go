package history

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/event"
	"go.mongodb.org/mongo-driver/mongo"
	_ "modernc.org/sqlite"

	"imlab/ref/model"
)

// sqliteWriteLock holds the write lock of the embedded FerretDB's SQLite
// file of db: FerretDB v1 still reads a document for an update (WAL) and
// then waits to replace it, so an update is held between its read and its
// write, as a slow FerretDB holds it. release ends the hold; it is also
// released when the test ends.
func sqliteWriteLock(t *testing.T, db *mongo.Database) (release func()) {
	t.Helper()
	if !onFerret {
		t.Skip("holds an update between FerretDB v1's read and replace; MongoDB updates a document atomically")
	}
	sdb, err := sql.Open("sqlite", "file:"+filepath.Join(ferretDir, db.Name()+".sqlite")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := sdb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
				t.Errorf("release the SQLite write lock: %v", err)
			}
			_ = conn.Close()
			_ = sdb.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// updateStarts signals every update command a client sends.
func updateStarts() (*event.CommandMonitor, <-chan struct{}) {
	ch := make(chan struct{}, 16)
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == "update" {
			ch <- struct{}{}
		}
	}}, ch
}

func setRead(seq int) bson.D {
	return bson.D{{Key: "$set", Value: bson.D{{Key: slotPath(seq-1, "is_read"), Value: true}}}}
}

func waitErr(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not end", what)
		return nil
	}
}

// An update whose caller's deadline passes while FerretDB is between its
// read and its replace keeps the document's lock until FerretDB answers,
// so the next writer of the document reads what it replaced: neither
// update is lost. (Before, the lock went with the caller: the second
// writer read the version the abandoned update was about to replace, and
// one of the two was lost, e.g. a revoke answered ok stored unrevoked.)
func TestAbandonedUpdateHoldsTheDocument(t *testing.T) {
	ctx := context.Background()
	conv, _ := model.SingleConvID(1, 2)
	mon, started := updateStarts()
	db := newDB(t, mon)
	s := newStore(t, db, nil)
	if err := s.WriteBatch(ctx, msgsFor(conv, 1, 4, 1, 2)); err != nil {
		t.Fatal(err)
	}
	docID := DocIDOf(conv, 0)
	drain(started)
	release := sqliteWriteLock(t, db)

	actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	aErr := make(chan error, 1)
	go func() { _, err := s.updateSlot(actx, docID, setRead(1)); aErr <- err }()
	select {
	case <-started: // A is inside FerretDB: read, waiting to replace
	case <-time.After(10 * time.Second):
		t.Fatal("the first update was not sent")
	}
	<-actx.Done()
	time.Sleep(200 * time.Millisecond) // A's caller has given up

	bErr := make(chan error, 1)
	go func() { _, err := s.updateSlot(ctx, docID, setRead(2)); bErr <- err }()
	select {
	case <-started: // B went to FerretDB beside A: let it read
		time.Sleep(300 * time.Millisecond)
	case <-time.After(time.Second): // B waits for A's answer
	}
	release()
	if err := waitErr(t, "the abandoned update", aErr); err != nil {
		t.Errorf("the abandoned update: %v (FerretDB applied it: its outcome is the answer)", err)
	}
	if err := waitErr(t, "the second update", bErr); err != nil {
		t.Fatalf("the second update: %v", err)
	}
	rr, err := s.ReadSlots(ctx, conv, []uint64{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if !rr.Slots[1].IsRead || !rr.Slots[2].IsRead {
		t.Errorf("an update of the document was lost: seq 1 is_read %v, seq 2 is_read %v", rr.Slots[1].IsRead, rr.Slots[2].IsRead)
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// A write that has no answer within the Store's own bound is an error for
// its caller, and the document is unknown: FerretDB may still replace it
// from the version it read, so writes of it are refused until the hold
// ends, without reaching the database. The abandoned update lands; a write
// after the hold keeps it.
func TestUnansweredWriteHoldsTheDocument(t *testing.T) {
	ctx := context.Background()
	conv, _ := model.SingleConvID(1, 2)
	mon, started := updateStarts()
	db := newDB(t, mon)
	const hold = 1500 * time.Millisecond
	s := newStore(t, db, func(c *Config) { c.WriteTimeout, c.UnknownHold = 300*time.Millisecond, hold })
	if err := s.WriteBatch(ctx, msgsFor(conv, 1, 4, 1, 2)); err != nil {
		t.Fatal(err)
	}
	docID := DocIDOf(conv, 0)
	release := sqliteWriteLock(t, db)
	drain(started)
	_, err := s.updateSlot(ctx, docID, setRead(1))
	timedOut := time.Now()
	if !errors.Is(err, model.ErrUnavailable) || !unanswered(err) {
		t.Fatalf("a write with no answer within the bound: %v, want an unanswered ErrUnavailable", err)
	}
	drain(started)
	if _, err := s.updateSlot(ctx, docID, setRead(2)); !errors.Is(err, model.ErrUnavailable) {
		t.Fatalf("a write of the unknown document: %v, want ErrUnavailable", err)
	}
	if _, held := s.unknown.heldUntil(DocIDOf(conv, 1), time.Now()); held {
		t.Error("a document no write left unknown is held")
	}
	select {
	case <-started:
		t.Fatal("a write of the unknown document reached the database")
	default:
	}
	release()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rr, err := s.ReadSlots(ctx, conv, []uint64{1})
		if err == nil && rr.Slots[1].IsRead {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the abandoned update never landed (%v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if wait := time.Until(timedOut.Add(hold)); wait > 0 {
		time.Sleep(wait)
	}
	if _, err := s.updateSlot(ctx, docID, setRead(2)); err != nil {
		t.Fatalf("a write after the hold: %v", err)
	}
	rr, err := s.ReadSlots(ctx, conv, []uint64{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	if !rr.Slots[1].IsRead || !rr.Slots[2].IsRead {
		t.Errorf("seq 1 is_read %v, seq 2 is_read %v; want both", rr.Slots[1].IsRead, rr.Slots[2].IsRead)
	}
}

// A write whose caller gave up before the document's lock was free is not
// started.
func TestWriteOfAGoneCallerIsNotStarted(t *testing.T) {
	conv, _ := model.SingleConvID(1, 2)
	mon, started := updateStarts()
	s := newStore(t, newDB(t, mon), nil)
	if err := s.WriteBatch(context.Background(), msgsFor(conv, 1, 2, 1, 2)); err != nil {
		t.Fatal(err)
	}
	drain(started)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.updateSlot(ctx, DocIDOf(conv, 0), setRead(1)); !errors.Is(err, model.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("write for a gone caller: %v", err)
	}
	select {
	case <-started:
		t.Fatal("the write reached the database")
	default:
	}
}
