package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"imlab/ref/dbtime"
	"imlab/ref/inbox"
)

// inboxRef is one offline_msg row as the reverse and push passes read it.
type inboxRef struct {
	uid, seq, msgID, convID uint64
	createdAt               time.Time
	missing                 bool // msg_content has no row (read only when asked)
}

// The scan's statements: offline_msg's rows of [since, until) along
// idx_created_msg (inbox.CreatedOrder), a page at a time after the last
// row read (inbox.CreatedAfter). The pass reads the index alone, and with
// the body check one msg_content primary-key lookup per row.
const (
	scanCols     = `SELECT o.uid, o.seq, o.msg_id, o.conv_id, o.created_at, `
	scanWithBody = scanCols + `c.msg_id IS NULL
		FROM offline_msg o FORCE INDEX (idx_created_msg) LEFT JOIN msg_content c ON c.msg_id = o.msg_id `
	scanNoBody = scanCols + `FALSE FROM offline_msg o FORCE INDEX (idx_created_msg) `
	scanFirst  = `WHERE o.created_at >= ? AND o.created_at < ?` + inbox.CreatedOrder + ` LIMIT ?`
	scanAfter  = `WHERE o.created_at >= ? AND o.created_at < ? AND ` + inbox.CreatedAfter + inbox.CreatedOrder + ` LIMIT ?`
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
			args := append([]any{last.createdAt, until}, inbox.CreatedAfterArgs(last.createdAt, last.msgID, last.convID, last.uid, last.seq)...)
			rows, err = r.db.QueryContext(ctx, from+scanAfter, append(args, r.cfg.PageSize)...)
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
