package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"imlab/ref/dbtime"
)

// inboxRef is one offline_msg row as the reverse and push passes read it.
type inboxRef struct {
	uid, seq, msgID, convID uint64
	createdAt               time.Time
	missing                 bool // msg_content has no row (read only when asked)
}

// The scan's statements: offline_msg's rows of [since, until) in the order
// of idx_created_msg (created_at, msg_id, conv_id, then the primary key
// uid, seq that InnoDB keeps in every secondary entry), a page at a time
// after the last row read. The pass reads the index alone, and with the
// body check one msg_content primary-key lookup per row. The after-row
// condition is spelt out key part by key part (not a row comparison) so
// that MySQL and MariaDB read it as ranges of the index, starting at the
// row after the last one.
const (
	scanCols     = `SELECT o.uid, o.seq, o.msg_id, o.conv_id, o.created_at, `
	scanWithBody = scanCols + `c.msg_id IS NULL
		FROM offline_msg o FORCE INDEX (idx_created_msg) LEFT JOIN msg_content c ON c.msg_id = o.msg_id `
	scanNoBody = scanCols + `FALSE FROM offline_msg o FORCE INDEX (idx_created_msg) `
	scanFirst  = `WHERE o.created_at >= ? AND o.created_at < ?
		ORDER BY o.created_at, o.msg_id, o.conv_id, o.uid, o.seq LIMIT ?`
	scanAfter = `WHERE o.created_at >= ? AND o.created_at < ? AND (o.created_at > ? OR (o.created_at = ? AND
		(o.msg_id > ? OR (o.msg_id = ? AND (o.conv_id > ? OR (o.conv_id = ? AND (o.uid > ? OR (o.uid = ? AND o.seq > ?))))))))
		ORDER BY o.created_at, o.msg_id, o.conv_id, o.uid, o.seq LIMIT ?`
)

// scanInbox reads offline_msg's rows written in [since, until) along
// idx_created_msg (migration 008), calling fn with each page; withBody adds
// whether msg_content has each row's body. It returns the rows read. A
// scan costs the rows of its range, not the table: before the index it
// walked every row by the primary key to keep those of its range.
func (r *Reconciler) scanInbox(ctx context.Context, since, until time.Time, withBody bool, fn func([]inboxRef) error) (int64, error) {
	since, until = dbtime.Ceil(since), dbtime.Ceil(until)
	from := scanNoBody
	if withBody {
		from = scanWithBody
	}
	var last *inboxRef
	var scanned int64
	for {
		var rows *sql.Rows
		var err error
		if last == nil {
			rows, err = r.db.QueryContext(ctx, from+scanFirst, since, until, r.cfg.PageSize)
		} else {
			rows, err = r.db.QueryContext(ctx, from+scanAfter, last.createdAt, until, last.createdAt, last.createdAt,
				last.msgID, last.msgID, last.convID, last.convID, last.uid, last.uid, last.seq, r.cfg.PageSize)
		}
		if err != nil {
			return scanned, fmt.Errorf("reconcile: scan offline_msg: %w", err)
		}
		page, err := scanRows(rows)
		if err != nil {
			return scanned, err
		}
		scanned += int64(len(page))
		if len(page) > 0 {
			last = &page[len(page)-1]
			if err := fn(page); err != nil {
				return scanned, err
			}
		}
		if len(page) < r.cfg.PageSize {
			return scanned, nil
		}
	}
}

// scanRows reads one page of the scan and closes rows.
func scanRows(rows *sql.Rows) ([]inboxRef, error) {
	defer rows.Close()
	var page []inboxRef
	for rows.Next() {
		var x inboxRef
		if err := rows.Scan(&x.uid, &x.seq, &x.msgID, &x.convID, &x.createdAt, &x.missing); err != nil {
			return nil, fmt.Errorf("reconcile: scan offline_msg row: %w", err)
		}
		x.createdAt = x.createdAt.UTC()
		page = append(page, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reconcile: offline_msg rows: %w", err)
	}
	return page, nil
}
