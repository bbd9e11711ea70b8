package inbox

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// MySQL error numbers the write path reacts to.
const (
	ErrNoDupEntry     = 1062 // ER_DUP_ENTRY
	ErrNoLockWait     = 1205 // ER_LOCK_WAIT_TIMEOUT
	ErrNoDeadlock     = 1213 // ER_LOCK_DEADLOCK
	ErrNoQueryTimeout = 1969 // MariaDB ER_STATEMENT_TIMEOUT
)

// DupKey tells whether err is a duplicate-key error (1062) and names the key
// without its table prefix: "PRIMARY", "uk_uid_msg", "uk_sender_client"...
// It reads MariaDB ("for key 'PRIMARY'") and MySQL 8 ("for key
// 'offline_msg.PRIMARY'") messages alike.
func DupKey(err error) (string, bool) {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != ErrNoDupEntry {
		return "", false
	}
	msg := me.Message
	i := strings.LastIndex(msg, "for key '")
	if i < 0 {
		return "", true
	}
	key := msg[i+len("for key '"):]
	if j := strings.IndexByte(key, '\''); j >= 0 {
		key = key[:j]
	}
	if j := strings.LastIndexByte(key, '.'); j >= 0 {
		key = key[j+1:]
	}
	return key, true
}

// Retryable tells whether a transaction that failed with err should be run
// again from the start: deadlock (1213, the server rolled it back) or lock
// wait timeout (1205).
func Retryable(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	return me.Number == ErrNoDeadlock || me.Number == ErrNoLockWait
}

// ErrNoParse is ER_PARSE_ERROR.
const ErrNoParse = 1064

// PrimaryHint is the index hint the write path's guarded UPDATEs carry
// (FORCE INDEX (PRIMARY): on a small table MariaDB's optimizer would scan it
// for an IN list covering much of it). The embedded engine (go-mysql-server)
// does not parse index hints in UPDATE: the first statement it refuses for
// that turns the hint off for good, and Exec sends the same statement again
// without it. Safe for concurrent use; the zero value (and nil)
// carries the hint, and nil never turns it off.
type PrimaryHint struct{ off atomic.Bool }

// Text is " FORCE INDEX (PRIMARY)", or "" once the server refused it.
func (h *PrimaryHint) Text() string {
	if h != nil && h.off.Load() {
		return ""
	}
	return " FORCE INDEX (PRIMARY)"
}

// Refused tells whether err is a parse error of a statement that carried
// the hint, and then turns the hint off: the caller may send the statement
// again without it (a parse error changes nothing, in or out of a
// transaction).
func (h *PrimaryHint) Refused(err error) bool {
	var me *mysql.MySQLError
	if h == nil || h.off.Load() || !errors.As(err, &me) {
		return false
	}
	if me.Number == ErrNoParse || (me.Number == 1105 && strings.Contains(me.Message, "syntax error")) {
		h.off.Store(true)
		return true
	}
	return false
}

// Exec runs in tx the statement build writes with hint (Text), and, when
// the server refused the hint, the same statement again without it.
func (h *PrimaryHint) Exec(ctx context.Context, tx *sql.Tx, build func(sb *strings.Builder, hint string)) (sql.Result, error) {
	var sb strings.Builder
	for {
		sb.Reset()
		build(&sb, h.Text())
		res, err := tx.ExecContext(ctx, sb.String())
		if err != nil && h.Refused(err) {
			continue // at most once: Refused turned the hint off
		}
		return res, err
	}
}
