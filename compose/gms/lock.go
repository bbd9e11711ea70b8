package gms

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/sqltypes"
)

// serialHandler makes go-mysql-server's memory engine safe for concurrent
// clients by running one transaction at a time.
//
// The memory engine takes no row locks: SELECT ... FOR UPDATE does not block,
// and concurrent transactions overwrite each other's commits (measured: 8
// connections committing 320 distinct rows kept 68; 160 locked
// read-increment-writes left 36). The reference server depends on row locks
// (conv_counter, seq_fence), so the embedded topology serializes instead: a
// connection takes the engine lock at its first statement and keeps it until
// the statement ends, or, inside BEGIN/START TRANSACTION, until COMMIT or
// ROLLBACK (or the connection closes). A connection that waits longer than
// lockWait gets MySQL's lock wait timeout error (1205), which callers already
// treat as retryable.
//
// With an engine (gmsEngine) it also makes the memory engine answer as
// MySQL does where the reference server depends on it: a transaction that
// wrote and ended without COMMIT (ROLLBACK, a failed COMMIT, a reset or
// closed connection) has the indexes of the tables it wrote rebuilt before
// the lock is released, and a duplicate-key error names its key. A rebuild
// that fails leaves indexes that cannot be trusted: every later statement
// then fails with that error rather than answer from them.
//
// Limit: transactions opened with SET autocommit=0 rather than BEGIN are
// serialized per statement only, and their aborts are not repaired.
type serialHandler struct {
	mysql.Handler

	lockWait time.Duration
	sem      chan struct{} // capacity 1: the engine lock
	engine   *gmsEngine    // nil: locking only

	mu     sync.Mutex
	holder uint32 // connection holding sem, valid when held
	held   bool
	inTx   bool
	tx     txWrites // what the holder's transaction wrote, valid when inTx
	broken error    // a failed index rebuild: the engine answers nothing more
}

func newSerialHandler(h mysql.Handler, lockWait time.Duration, engine *gmsEngine) *serialHandler {
	return &serialHandler{Handler: h, lockWait: lockWait, sem: make(chan struct{}, 1), engine: engine}
}

// stmtKind classifies the transaction effect of a statement.
type stmtKind int

const (
	stmtOther stmtKind = iota
	stmtBegin
	stmtCommit
	stmtRollback
)

// classify looks at the first keywords of query, after comments.
func classify(query string) stmtKind {
	q := skipComments(query)
	word := func(s string) (string, string) {
		s = strings.TrimLeft(s, " \t\r\n")
		i := strings.IndexAny(s, " \t\r\n;")
		if i < 0 {
			return strings.ToUpper(s), ""
		}
		return strings.ToUpper(s[:i]), s[i:]
	}
	w1, rest := word(q)
	switch w1 {
	case "BEGIN":
		return stmtBegin
	case "START":
		if w2, _ := word(rest); w2 == "TRANSACTION" {
			return stmtBegin
		}
	case "COMMIT":
		return stmtCommit
	case "ROLLBACK":
		w2, rest2 := word(rest)
		if w2 == "WORK" {
			w2, _ = word(rest2)
		}
		if w2 == "TO" { // ROLLBACK TO SAVEPOINT stays in the transaction
			return stmtOther
		}
		return stmtRollback
	}
	return stmtOther
}

func skipComments(q string) string {
	for {
		q = strings.TrimLeft(q, " \t\r\n")
		switch {
		case strings.HasPrefix(q, "/*"):
			i := strings.Index(q, "*/")
			if i < 0 {
				return ""
			}
			q = q[i+2:]
		case strings.HasPrefix(q, "--"), strings.HasPrefix(q, "#"):
			i := strings.IndexByte(q, '\n')
			if i < 0 {
				return ""
			}
			q = q[i+1:]
		default:
			return q
		}
	}
}

func (h *serialHandler) acquire(ctx context.Context, c *mysql.Conn) error {
	h.mu.Lock()
	if h.held && h.holder == c.ConnectionID {
		h.mu.Unlock()
		return nil
	}
	h.mu.Unlock()
	t := time.NewTimer(h.lockWait)
	defer t.Stop()
	select {
	case h.sem <- struct{}{}:
	case <-t.C:
		return mysql.NewSQLError(mysql.ERLockWaitTimeout, mysql.SSUnknownSQLState,
			"Lock wait timeout exceeded; try restarting transaction (embedded engine runs one transaction at a time)")
	case <-ctx.Done():
		return ctx.Err()
	}
	h.mu.Lock()
	h.holder, h.held, h.inTx, h.tx = c.ConnectionID, true, false, txWrites{}
	broken := h.broken
	h.mu.Unlock()
	if broken != nil {
		h.release(c, false)
		return mysql.NewSQLError(mysql.ERUnknownError, mysql.SSUnknownSQLState, "%s", broken.Error())
	}
	return nil
}

// before notes what statement q of c may write inside c's transaction.
func (h *serialHandler) before(c *mysql.Conn, q string) {
	if h.engine == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held && h.holder == c.ConnectionID && h.inTx {
		h.tx.note(q)
	}
}

// after updates the transaction state of c after a statement and releases
// the lock when c is not inside a transaction; a transaction that wrote and
// ended without COMMIT has its tables' indexes rebuilt first.
func (h *serialHandler) after(c *mysql.Conn, kind stmtKind, err error) {
	h.mu.Lock()
	if !h.held || h.holder != c.ConnectionID {
		h.mu.Unlock()
		return
	}
	aborted := false
	switch kind {
	case stmtBegin:
		// BEGIN inside a transaction commits it first (MySQL, and the engine).
		if err == nil {
			h.inTx, h.tx = true, txWrites{}
		}
	case stmtCommit:
		aborted = h.inTx && err != nil
		h.inTx = false
	case stmtRollback:
		aborted = h.inTx
		h.inTx = false
	}
	inTx := h.inTx
	h.mu.Unlock()
	if !inTx {
		h.release(c, aborted)
	}
}

// release ends c's hold of the engine lock; aborted says that c's
// transaction ended without COMMIT: the tables it wrote get their indexes
// rebuilt before another connection may run.
func (h *serialHandler) release(c *mysql.Conn, aborted bool) {
	h.mu.Lock()
	if !h.held || h.holder != c.ConnectionID {
		h.mu.Unlock()
		return
	}
	w := h.tx
	h.mu.Unlock()
	var rerr error
	if aborted && h.engine != nil {
		rerr = h.engine.rebuildIndexes(w) // still holding sem: nothing else runs
	}
	h.mu.Lock()
	if rerr != nil && h.broken == nil {
		h.broken = rerr
	}
	h.held, h.inTx, h.tx = false, false, txWrites{}
	h.mu.Unlock()
	<-h.sem
}

// releaseConn releases the lock c holds when its connection ends or is
// reset: a transaction it left open is rolled back.
func (h *serialHandler) releaseConn(c *mysql.Conn) {
	h.mu.Lock()
	inTx := h.held && h.holder == c.ConnectionID && h.inTx
	h.mu.Unlock()
	h.release(c, inTx)
}

// fixError names the key of a duplicate-key error of query.
func (h *serialHandler) fixError(query string, err error) error {
	if err == nil || h.engine == nil {
		return err
	}
	return h.engine.nameDupKey(query, err)
}

// ComQuery implements mysql.Handler.
func (h *serialHandler) ComQuery(ctx context.Context, c *mysql.Conn, query string, cb mysql.ResultSpoolFn) error {
	kind := classify(query)
	if err := h.acquire(ctx, c); err != nil {
		return err
	}
	h.before(c, query)
	err := h.fixError(query, h.Handler.ComQuery(ctx, c, query, cb))
	h.after(c, kind, err)
	return err
}

// ComMultiQuery implements mysql.Handler: each call runs the first
// statement of query.
func (h *serialHandler) ComMultiQuery(ctx context.Context, c *mysql.Conn, query string, cb mysql.ResultSpoolFn) (string, error) {
	kind := classify(query)
	if err := h.acquire(ctx, c); err != nil {
		return "", err
	}
	h.before(c, query)
	rest, err := h.Handler.ComMultiQuery(ctx, c, query, cb)
	err = h.fixError(query, err)
	h.after(c, kind, err)
	return rest, err
}

// ComStmtExecute implements mysql.Handler.
func (h *serialHandler) ComStmtExecute(ctx context.Context, c *mysql.Conn, prepare *mysql.PrepareData, cb func(*sqltypes.Result) error) error {
	kind := classify(prepare.PrepareStmt)
	if err := h.acquire(ctx, c); err != nil {
		return err
	}
	h.before(c, prepare.PrepareStmt)
	err := h.fixError(prepare.PrepareStmt, h.Handler.ComStmtExecute(ctx, c, prepare, cb))
	h.after(c, kind, err)
	return err
}

// ComResetConnection implements mysql.Handler: a reset ends any transaction.
func (h *serialHandler) ComResetConnection(c *mysql.Conn) error {
	err := h.Handler.ComResetConnection(c)
	h.releaseConn(c)
	return err
}

// ConnectionClosed implements mysql.Handler: a client that drops its
// connection inside a transaction releases the lock.
func (h *serialHandler) ConnectionClosed(c *mysql.Conn) {
	h.Handler.ConnectionClosed(c)
	h.releaseConn(c)
}
