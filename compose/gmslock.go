package compose

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
// Limit: transactions opened with SET autocommit=0 rather than BEGIN are
// serialized per statement only.
type serialHandler struct {
	mysql.Handler

	lockWait time.Duration
	sem      chan struct{} // capacity 1: the engine lock

	mu     sync.Mutex
	holder uint32 // connection holding sem, valid when held
	held   bool
	inTx   bool
}

func newSerialHandler(h mysql.Handler, lockWait time.Duration) *serialHandler {
	return &serialHandler{Handler: h, lockWait: lockWait, sem: make(chan struct{}, 1)}
}

// stmtKind classifies the transaction effect of a statement.
type stmtKind int

const (
	stmtOther stmtKind = iota
	stmtBegin
	stmtEnd
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
		return stmtEnd
	case "ROLLBACK":
		w2, rest2 := word(rest)
		if w2 == "WORK" {
			w2, _ = word(rest2)
		}
		if w2 == "TO" { // ROLLBACK TO SAVEPOINT stays in the transaction
			return stmtOther
		}
		return stmtEnd
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
	h.holder, h.held, h.inTx = c.ConnectionID, true, false
	h.mu.Unlock()
	return nil
}

// after updates the transaction state of c after a statement and releases
// the lock when c is not inside a transaction.
func (h *serialHandler) after(c *mysql.Conn, kind stmtKind, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.held || h.holder != c.ConnectionID {
		return
	}
	switch kind {
	case stmtBegin:
		if err == nil {
			h.inTx = true
		}
	case stmtEnd:
		h.inTx = false
	}
	if !h.inTx {
		h.releaseLocked()
	}
}

func (h *serialHandler) releaseLocked() {
	h.held, h.inTx = false, false
	<-h.sem
}

func (h *serialHandler) releaseConn(c *mysql.Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held && h.holder == c.ConnectionID {
		h.releaseLocked()
	}
}

// ComQuery implements mysql.Handler.
func (h *serialHandler) ComQuery(ctx context.Context, c *mysql.Conn, query string, cb mysql.ResultSpoolFn) error {
	kind := classify(query)
	if err := h.acquire(ctx, c); err != nil {
		return err
	}
	err := h.Handler.ComQuery(ctx, c, query, cb)
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
	rest, err := h.Handler.ComMultiQuery(ctx, c, query, cb)
	h.after(c, kind, err)
	return rest, err
}

// ComStmtExecute implements mysql.Handler.
func (h *serialHandler) ComStmtExecute(ctx context.Context, c *mysql.Conn, prepare *mysql.PrepareData, cb func(*sqltypes.Result) error) error {
	kind := classify(prepare.PrepareStmt)
	if err := h.acquire(ctx, c); err != nil {
		return err
	}
	err := h.Handler.ComStmtExecute(ctx, c, prepare, cb)
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
